-- Inline review of a proposed edit in the file's own buffer (as avante and claudecode.nvim users
-- expect): each hunk drawn over the text — the lines it replaces marked (DshInlineDelete), the
-- proposed lines as virtual lines under them (DshInlineAdd), a header naming the keys — and a keep
-- or reject key on each (config `keys.inline`, the cursor on the hunk). The buffer's text is never
-- changed by the overlay; once every hunk is decided the decision goes to `on_decision` with
-- review.lua's contract (accept / reject / partial with the text of the kept hunks), and the daemon
-- then writes the edit through workspace/applyEdit as for any allowed edit. The diff tab
-- (review.lua) stays the other way to review.
local api = vim.api
local config = require('dsh.config')
local notify = require('dsh.notify')
local review = require('dsh.review')

local M = {}
M.ns = api.nvim_create_namespace('dsh.inline')

local ACTIONS = {
  keep = 'keep this hunk of the proposed edit',
  reject = 'reject this hunk of the proposed edit',
  keep_all = 'keep every hunk still open',
  reject_all = 'reject every hunk still open',
}

--- A normal window of this tab showing `buf`, else one showing a file, else a new split.
local function window_for(buf)
  local fallback
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_config(w).relative == '' then
      local b = api.nvim_win_get_buf(w)
      if b == buf then
        return w
      end
      if not fallback and vim.bo[b].buftype == '' and not vim.b[b].dsh_kind then
        fallback = w
      end
    end
  end
  if fallback then
    return fallback
  end
  vim.cmd('topleft vsplit')
  return api.nvim_get_current_win()
end

local function key(name)
  return config.key((config.options.keys.inline or {})[name]) or '-'
end

--- The lines the proposal holds with the kept hunks applied and the others left as they are.
local function result_lines(rv)
  local out, at = {}, 1
  for i, h in ipairs(rv.hunks) do
    local upto = h[2] == 0 and h[1] or h[1] - 1
    vim.list_extend(out, rv.old, at, upto)
    at = upto + 1
    if rv.state[i] == 'keep' then
      vim.list_extend(out, rv.new, h[3], h[3] + h[4] - 1)
      at = at + h[2]
    end
  end
  vim.list_extend(out, rv.old, at, #rv.old)
  return out
end

--- The row (0-based) a hunk's header and proposed lines hang from, and whether they go above it.
local function anchor(rv, h)
  if h[2] > 0 then
    return h[1] + h[2] - 2, false, h[1] - 1
  end
  if h[1] == 0 then -- inserted before the first line
    return 0, true, 0
  end
  return h[1] - 1, false, h[1] - 1
end

local function draw(rv)
  if not api.nvim_buf_is_valid(rv.buf) then
    return
  end
  api.nvim_buf_clear_namespace(rv.buf, M.ns, 0, -1)
  local n = #rv.hunks
  for i, h in ipairs(rv.hunks) do
    local row, above, head = anchor(rv, h)
    local st = rv.state[i]
    local title
    if st == 'keep' then
      title = ('✓ dsh hunk %d/%d kept'):format(i, n)
    elseif st == 'reject' then
      title = ('✗ dsh hunk %d/%d rejected'):format(i, n)
    else
      title = ('◆ dsh hunk %d/%d · %s keep · %s reject'):format(i, n, key('keep'), key('reject'))
    end
    api.nvim_buf_set_extmark(rv.buf, M.ns, head, 0, {
      virt_text = { { ' ' .. title, st == 'reject' and 'DshRejected' or st == 'keep' and 'DshAccepted' or 'DshKey' } },
      virt_text_pos = 'eol',
    })
    if st ~= 'reject' then
      for r = h[1] - 1, h[1] + h[2] - 2 do
        if h[2] > 0 then
          api.nvim_buf_set_extmark(rv.buf, M.ns, r, 0, {
            line_hl_group = st == 'keep' and 'DshInlineGone' or 'DshInlineDelete',
            sign_text = '-',
            sign_hl_group = 'DshInlineDelete',
          })
        end
      end
      local virt = {}
      for _, l in ipairs(vim.list_slice(rv.new, h[3], h[3] + h[4] - 1)) do
        virt[#virt + 1] = { { '+ ' .. l, 'DshInlineAdd' } }
      end
      if #virt > 0 then
        api.nvim_buf_set_extmark(rv.buf, M.ns, row, 0, { virt_lines = virt, virt_lines_above = above })
      end
    end
  end
end

local function unmap(rv)
  if not api.nvim_buf_is_valid(rv.buf) then
    return
  end
  for _, lhs in ipairs(rv.mapped) do
    pcall(vim.keymap.del, 'n', lhs, { buffer = rv.buf })
  end
  for _, m in ipairs(rv.saved_maps) do -- the person's own buffer-local maps on those keys, back
    vim.fn.mapset('n', false, m)
  end
end

local function finish(rv)
  rv.decided = true
  unmap(rv)
  if api.nvim_buf_is_valid(rv.buf) then
    api.nvim_buf_clear_namespace(rv.buf, M.ns, 0, -1)
  end
  M.active[rv.buf] = nil
end

--- Close a review whose question went away (answered elsewhere): nothing is decided.
function M.dismiss(rv)
  if not rv.decided then
    finish(rv)
  end
end

local function decide_if_done(rv)
  local kept, open = 0, 0
  for i = 1, #rv.hunks do
    if rv.state[i] == 'keep' then
      kept = kept + 1
    elseif not rv.state[i] then
      open = open + 1
    end
  end
  draw(rv)
  if open > 0 then
    return
  end
  finish(rv)
  if kept == #rv.hunks then
    return rv.on_decision({ outcome = 'accept' })
  elseif kept == 0 then
    return rv.on_decision({ outcome = 'reject' })
  end
  local lines = result_lines(rv)
  local text = table.concat(lines, '\n') .. ((#lines > 0 and rv.final_newline) and '\n' or '')
  rv.on_decision({ outcome = 'partial', lines = lines, text = text, rejected = #rv.hunks - kept })
end

--- The open hunk under the cursor, or the next open one; nil when none is open.
local function hunk_here(rv)
  local lnum = api.nvim_win_get_cursor(0)[1]
  local i = review.hunk_at(rv.hunks, lnum, 'a')
  if i and not rv.state[i] then
    return i
  end
  return nil
end

local function next_open(rv, from)
  for i = from, #rv.hunks do
    if not rv.state[i] then
      return i
    end
  end
  for i = 1, from - 1 do
    if not rv.state[i] then
      return i
    end
  end
end

local function go(rv, i)
  local h = i and rv.hunks[i]
  if h and api.nvim_get_current_buf() == rv.buf then
    local line = math.max(1, math.min(h[2] == 0 and h[1] or h[1], api.nvim_buf_line_count(rv.buf)))
    api.nvim_win_set_cursor(0, { line, 0 })
  end
end

function M.mark(rv, verdict)
  local i = hunk_here(rv)
  if not i then
    return notify.notify('no open hunk here: the ◆ lines are the proposed edit')
  end
  rv.state[i] = verdict
  go(rv, next_open(rv, i + 1))
  decide_if_done(rv)
end

function M.mark_all(rv, verdict)
  for i = 1, #rv.hunks do
    rv.state[i] = rv.state[i] or verdict
  end
  decide_if_done(rv)
end

M.active = {} -- buffer -> its open inline review

--- Open an inline review (review.open's `opts` and decision contract); falls back to the diff tab
--- when the file's buffer does not hold the text the proposal was made from.
function M.open(opts)
  local old, new = review.lines_of(opts.old_text), review.lines_of(opts.new_text)
  local path = opts.path
  local buf = path and vim.fn.bufadd(path) or -1
  if buf > 0 then
    vim.fn.bufload(buf)
  end
  if buf <= 0 or not vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), old) or M.active[buf] then
    notify.notify('the file differs from what the edit was made from: reviewing it in a diff tab')
    return review.open(opts)
  end
  vim.bo[buf].buflisted = true
  local win = window_for(buf)
  api.nvim_set_current_win(win)
  api.nvim_win_set_buf(win, buf)
  local rv = {
    kind = 'inline',
    buf = buf,
    old = old,
    new = new,
    hunks = review.hunks(old, new),
    state = {},
    mapped = {},
    saved_maps = {},
    on_decision = opts.on_decision,
    final_newline = (opts.new_text or ''):sub(-1) == '\n',
  }
  M.active[buf] = rv
  local actions = {
    keep = function()
      M.mark(rv, 'keep')
    end,
    reject = function()
      M.mark(rv, 'reject')
    end,
    keep_all = function()
      M.mark_all(rv, 'keep')
    end,
    reject_all = function()
      M.mark_all(rv, 'reject')
    end,
  }
  local keys = config.options.keys.inline or {}
  for name, fn in pairs(actions) do
    for _, lhs in ipairs(config.lhs_list(keys[name])) do
      local existing = vim.fn.maparg(lhs, 'n', false, true)
      if existing.buffer == 1 then
        rv.saved_maps[#rv.saved_maps + 1] = existing
      end
      vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, desc = 'dsh: ' .. ACTIONS[name] })
      rv.mapped[#rv.mapped + 1] = lhs
    end
  end
  draw(rv)
  go(rv, 1)
  notify.notify(('%d hunk%s proposed in %s: %s keep · %s reject on each (%s / %s: all)'):format(
    #rv.hunks,
    #rv.hunks == 1 and '' or 's',
    vim.fn.fnamemodify(path, ':t'),
    key('keep'),
    key('reject'),
    key('keep_all'),
    key('reject_all')
  ))
  return rv
end

return M
