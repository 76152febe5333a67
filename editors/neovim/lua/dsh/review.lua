-- Hunk review: a proposed text against a file, as a real Neovim diff in a tab of its own — the file
-- (its buffer when loaded and holding exactly the text the proposal was made from, else a copy of
-- that text) on the left, the proposal on the right, `diffthis` in both, so ]c / [c, do / dp and
-- folds work as in any diff. Per-hunk keys (config `keys.review`) keep a hunk or take it back out
-- of the proposal; the decision is handed to `on_decision` as one of
--   {outcome = 'accept'}                  the proposal as made,
--   {outcome = 'reject'}                  nothing of it,
--   {outcome = 'partial', lines, text}    what the proposal holds now (some hunks taken out, or
--                                          edited by hand).
-- The caller decides what each means (a permission answer, or the text written into the buffer).
-- Closing the tab without deciding calls `on_close` and decides nothing.
local api = vim.api
local config = require('dsh.config')
local notify = require('dsh.notify')

local M = {}
M.ns = api.nvim_create_namespace('dsh.review')

local diff = (vim.text and vim.text.diff) or vim.diff

--- Lines of a text (one final line break is not an empty last line).
function M.lines_of(text)
  text = (text or ''):gsub('\r\n', '\n')
  if text == '' then
    return {}
  end
  return vim.split(text:gsub('\n$', ''), '\n', { plain = true })
end

--- The hunks turning `a` into `b` (lists of lines): {start_a, count_a, start_b, count_b} (1-based;
--- a count of 0 means the lines go after the start line).
function M.hunks(a, b)
  local ta = #a > 0 and (table.concat(a, '\n') .. '\n') or ''
  local tb = #b > 0 and (table.concat(b, '\n') .. '\n') or ''
  return diff(ta, tb, { result_type = 'indices' }) or {}
end

--- The index of the hunk at `lnum` on side 'a' or 'b', or nil.
function M.hunk_at(hunks, lnum, side)
  for i, h in ipairs(hunks) do
    local start, count = h[1], h[2]
    if side == 'b' then
      start, count = h[3], h[4]
    end
    if count == 0 then
      if lnum == start or lnum == start + 1 or (start == 0 and lnum == 1) then
        return i
      end
    elseif lnum >= start and lnum < start + count then
      return i
    end
  end
end

--- Apply `lines` to `buf` hunk by hunk (bottom up, one undo step), so marks and folds outside the
--- changed lines stay.
function M.write_lines(buf, lines)
  local current = api.nvim_buf_get_lines(buf, 0, -1, false)
  local hunks = M.hunks(current, lines)
  api.nvim_buf_call(buf, function()
    for i = #hunks, 1, -1 do
      local h = hunks[i]
      local first = h[2] == 0 and h[1] or h[1] - 1
      local repl = vim.list_slice(lines, h[3], h[3] + h[4] - 1)
      if i < #hunks then
        pcall(vim.cmd.undojoin)
      end
      api.nvim_buf_set_lines(buf, first, first + h[2], false, repl)
    end
  end)
end

local function same(a, b)
  if #a ~= #b then
    return false
  end
  for i = 1, #a do
    if a[i] ~= b[i] then
      return false
    end
  end
  return true
end

---@class dsh.Review
---@field old string[]
---@field new string[]
---@field proposal integer the proposal's buffer
---@field left integer the buffer shown on the left
---@field tab integer
---@field decided boolean
---@field rejected integer hunks taken back out

local function status(rv)
  local hunks = M.hunks(rv.old, api.nvim_buf_get_lines(rv.proposal, 0, -1, false))
  local kept = #api.nvim_buf_get_extmarks(rv.proposal, M.ns, 0, -1, {})
  local k = config.options.keys.review or {}
  local function key(name)
    return config.key(k[name]) or '-'
  end
  -- The keys first; the counts after `%<`, where a narrow window cuts the bar.
  local bar = (' %s keep · %s out · %s all · %s none · %s answer · %s close %%< · %d hunk%s (%d kept, %d out)'):format(
    key('accept'),
    key('reject'),
    key('accept_all'),
    key('reject_all'),
    key('submit'),
    key('close'),
    #hunks,
    #hunks == 1 and '' or 's',
    kept,
    rv.rejected
  )
  for _, win in ipairs(api.nvim_tabpage_list_wins(rv.tab)) do
    if api.nvim_win_get_buf(win) == rv.proposal then
      vim.wo[win].winbar = bar
    end
  end
end

local function goto_hunk(rv, index)
  local hunks = M.hunks(rv.old, api.nvim_buf_get_lines(rv.proposal, 0, -1, false))
  local h = hunks[index] or hunks[#hunks]
  if not h then
    return
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(rv.tab)) do
    if api.nvim_win_get_buf(win) == rv.proposal then
      local line = math.max(1, math.min(h[3] + (h[4] == 0 and 1 or 0), api.nvim_buf_line_count(rv.proposal)))
      api.nvim_set_current_win(win)
      api.nvim_win_set_cursor(win, { line, 0 })
    end
  end
end

--- The hunk under the cursor: its index and the hunks (nil when the cursor is on no hunk).
local function current_hunk(rv)
  local lines = api.nvim_buf_get_lines(rv.proposal, 0, -1, false)
  local hunks = M.hunks(rv.old, lines)
  local buf = api.nvim_get_current_buf()
  local lnum = api.nvim_win_get_cursor(0)[1]
  local i = M.hunk_at(hunks, lnum, buf == rv.proposal and 'b' or 'a')
  return i, hunks
end

local function refresh(rv)
  for _, win in ipairs(api.nvim_tabpage_list_wins(rv.tab)) do
    api.nvim_win_call(win, function()
      vim.cmd('diffupdate')
    end)
  end
  status(rv)
end

--- Keep the hunk under the cursor (marked ✓) and go to the next one.
function M.accept_hunk(rv)
  local i, hunks = current_hunk(rv)
  if not i then
    return notify.notify('no hunk here: ]c goes to the next one')
  end
  local h = hunks[i]
  local row = math.max(0, math.min(h[3] - (h[4] == 0 and 0 or 1), api.nvim_buf_line_count(rv.proposal) - 1))
  api.nvim_buf_set_extmark(rv.proposal, M.ns, row, 0, {
    sign_text = '✓',
    sign_hl_group = 'DshAccepted',
  })
  refresh(rv)
  goto_hunk(rv, i + 1)
end

--- Take the hunk under the cursor back out of the proposal (the file's lines again there).
function M.reject_hunk(rv)
  local i, hunks = current_hunk(rv)
  if not i then
    return notify.notify('no hunk here: ]c goes to the next one')
  end
  local h = hunks[i]
  local first = h[4] == 0 and h[3] or h[3] - 1
  local old = vim.list_slice(rv.old, h[1], h[1] + h[2] - 1)
  api.nvim_buf_set_lines(rv.proposal, first, first + h[4], false, old)
  rv.rejected = rv.rejected + 1
  refresh(rv)
  goto_hunk(rv, i)
end

--- Close the review tab (and its scratch buffers).
local function close(rv)
  if rv.closing then
    return
  end
  rv.closing = true
  if api.nvim_tabpage_is_valid(rv.tab) then
    local tabnr = api.nvim_tabpage_get_number(rv.tab)
    if #api.nvim_list_tabpages() > 1 then
      pcall(vim.cmd, 'tabclose ' .. tabnr)
    end
  end
  for _, buf in ipairs({ rv.proposal, rv.copy }) do
    if buf and api.nvim_buf_is_valid(buf) then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
  if rv.prev_tab and api.nvim_tabpage_is_valid(rv.prev_tab) then
    pcall(api.nvim_set_current_tabpage, rv.prev_tab)
  end
end

--- Close a review whose question went away (answered elsewhere): nothing is decided.
function M.dismiss(rv)
  if rv.decided then
    return
  end
  rv.decided = true
  close(rv)
end

local function decide(rv, decision)
  if rv.decided then
    return
  end
  rv.decided = true
  close(rv)
  rv.on_decision(decision)
end

--- Answer with what the proposal holds now.
function M.submit(rv)
  local lines = api.nvim_buf_get_lines(rv.proposal, 0, -1, false)
  if same(lines, rv.new) then
    return decide(rv, { outcome = 'accept' })
  elseif same(lines, rv.old) then
    return decide(rv, { outcome = 'reject' })
  end
  local text = table.concat(lines, '\n') .. ((#lines > 0 and rv.final_newline) and '\n' or '')
  decide(rv, { outcome = 'partial', lines = lines, text = text, rejected = rv.rejected })
end

function M.accept_all(rv)
  decide(rv, { outcome = 'accept' })
end

function M.reject_all(rv)
  decide(rv, { outcome = 'reject' })
end

local function keys(rv, buf)
  local k = config.options.keys.review or {}
  local actions = {
    accept = { M.accept_hunk, 'keep this hunk' },
    reject = { M.reject_hunk, 'take this hunk out of the proposal' },
    accept_all = { M.accept_all, 'allow the whole proposal' },
    reject_all = { M.reject_all, 'reject the whole proposal' },
    submit = { M.submit, 'answer with what the proposal holds now' },
    close = {
      function()
        close(rv)
      end,
      'close the review (decides nothing)',
    },
  }
  for name, action in pairs(actions) do
    for _, lhs in ipairs(config.lhs_list(k[name])) do
      vim.keymap.set('n', lhs, function()
        action[1](rv)
      end, { buffer = buf, nowait = true, desc = 'dsh review: ' .. action[2] })
    end
  end
end

local function scratch(name, lines, filetype)
  local old = vim.fn.bufnr('^' .. vim.pesc(name) .. '$')
  if old ~= -1 then
    pcall(api.nvim_buf_delete, old, { force = true })
  end
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  pcall(api.nvim_buf_set_name, buf, name)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  return buf
end

--- Open a review. `opts`: {path, label, old_text, new_text, on_decision, on_close?}.
---@return dsh.Review
function M.open(opts)
  local old, new = M.lines_of(opts.old_text), M.lines_of(opts.new_text)
  local rv = {
    old = old,
    new = new,
    label = opts.label or vim.fn.fnamemodify(opts.path or '', ':~:.'),
    rejected = 0,
    decided = false,
    on_decision = opts.on_decision,
    final_newline = (opts.new_text or ''):sub(-1) == '\n',
    prev_tab = api.nvim_get_current_tabpage(),
  }
  local filetype = opts.path and vim.filetype.match({ filename = opts.path }) or nil
  -- The file's own buffer when it holds exactly the text the proposal was made from.
  local left
  local fbuf = opts.path and vim.fn.bufnr(opts.path) or -1
  if fbuf ~= -1 and api.nvim_buf_is_loaded(fbuf) and same(api.nvim_buf_get_lines(fbuf, 0, -1, false), old) then
    left = fbuf
  else
    rv.copy = scratch('dsh://review/' .. rv.label .. ' (current)', old, filetype)
    vim.bo[rv.copy].modifiable = false
    left = rv.copy
  end
  rv.left = left
  rv.proposal = scratch('dsh://review/' .. rv.label .. ' (proposed)', new, filetype)
  vim.cmd('tabnew')
  rv.tab = api.nvim_get_current_tabpage()
  local placeholder = api.nvim_get_current_buf()
  api.nvim_win_set_buf(0, left)
  local lwin = api.nvim_get_current_win()
  vim.cmd('diffthis')
  vim.cmd('rightbelow vsplit')
  local rwin = api.nvim_get_current_win()
  api.nvim_win_set_buf(rwin, rv.proposal)
  vim.cmd('diffthis')
  if api.nvim_buf_is_valid(placeholder) and placeholder ~= left then
    pcall(api.nvim_buf_delete, placeholder, { force = true })
  end
  vim.wo[lwin].winbar = (' %s · as it is  (proposal on the right: ]c / [c move)'):format(rv.label):gsub('%%', '%%%%')
  keys(rv, rv.proposal)
  if rv.copy then
    keys(rv, rv.copy)
  end
  api.nvim_create_autocmd('TextChanged', {
    buffer = rv.proposal,
    callback = function()
      status(rv)
    end,
  })
  api.nvim_create_autocmd('BufWipeout', {
    buffer = rv.proposal,
    once = true,
    callback = function()
      if not rv.decided then
        rv.decided = true
        vim.schedule(function()
          close(rv)
          if opts.on_close then
            opts.on_close()
          end
        end)
      end
    end,
  })
  status(rv)
  goto_hunk(rv, 1)
  return rv
end

return M
