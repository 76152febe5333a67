-- :DshSessions: pick a session of this project — a list of the sessions that have something in them
-- (newest first) and, beside it, a preview of the one under the cursor (its last turns, from
-- `dsh/session/transcript`). <CR> resumes it; q / <Esc> close. `picker = 'select'` uses
-- vim.ui.select instead (no preview).
local api = vim.api
local config = require('dsh.config')
local client = require('dsh.client')
local labels = require('dsh.labels')
local notify = require('dsh.notify')
local sessions = require('dsh.sessions')

local M = {}
M.ns = api.nvim_create_namespace('dsh.picker')

--- A transcript page as plain lines (oldest turn first).
function M.page_lines(root, page)
  local out = {}
  local turns = page.turns or {}
  for i = #turns, 1, -1 do
    local turn = turns[i]
    local said = false
    for _, item in ipairs(turn.items or {}) do
      if item.type == 'message' and (item.source or {}).kind == 'user' then
        out[#out + 1] = '## You'
        vim.list_extend(out, vim.split(item.text or '', '\n', { plain = true }))
        said = false
      elseif item.type == 'message' and (item.source or {}).kind == 'editor' then
        out[#out + 1] = '📎 ' .. labels.context_label(root, item.source)
      elseif item.type == 'assistant' and type(item.text) == 'string' and item.text ~= '' then
        if not said then
          out[#out + 1] = '## dsh'
          said = true
        end
        vim.list_extend(out, vim.split(item.text, '\n', { plain = true }))
      elseif item.type == 'tool' then
        out[#out + 1] = ('⚙ %s  %s'):format(item.name or 'tool', labels.call_summary(root, item.arguments))
      end
    end
    if turn['end'] then
      out[#out + 1] = '── ' .. (turn['end'].kind or '?') .. ' ──'
    end
    out[#out + 1] = ''
  end
  return out
end

local function close(p)
  for _, win in ipairs({ p.list_win, p.preview_win }) do
    if win and api.nvim_win_is_valid(win) then
      pcall(api.nvim_win_close, win, true)
    end
  end
end

local function show_preview(p, s)
  if not (p.preview_buf and api.nvim_buf_is_valid(p.preview_buf)) then
    return
  end
  local function fill(lines)
    if api.nvim_buf_is_valid(p.preview_buf) and p.showing == s.sessionId then
      vim.bo[p.preview_buf].modifiable = true
      api.nvim_buf_set_lines(p.preview_buf, 0, -1, false, lines)
      vim.bo[p.preview_buf].modifiable = false
      if p.preview_win and api.nvim_win_is_valid(p.preview_win) then
        api.nvim_win_set_cursor(p.preview_win, { math.max(1, #lines), 0 })
      end
    end
  end
  p.showing = s.sessionId
  if p.cache[s.sessionId] then
    return fill(p.cache[s.sessionId])
  end
  fill({ '(loading…)' })
  local params = { sessionId = s.sessionId, limit = 3 }
  client.request(p.root, 'dsh/session/transcript', params, function(err, page)
    local lines = err and { 'no preview: ' .. (err.message or '') } or M.page_lines(p.root, page or {})
    p.cache[s.sessionId] = lines
    fill(lines)
  end)
end

--- Open the picker over `list` (sessions); `on_choice(session)`.
function M.float(root, list, on_choice)
  local p = { root = root, cache = {} }
  local width = math.max(60, math.floor(vim.o.columns * 0.8))
  local height = math.max(8, math.floor(vim.o.lines * 0.6))
  local row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1)
  local col = math.max(0, math.floor((vim.o.columns - width) / 2))
  local lw = math.floor(width * 0.45)
  p.list_buf = api.nvim_create_buf(false, true)
  p.preview_buf = api.nvim_create_buf(false, true)
  for _, b in ipairs({ p.list_buf, p.preview_buf }) do
    vim.bo[b].bufhidden = 'wipe'
  end
  vim.b[p.list_buf].dsh_float = 'picker'
  vim.b[p.preview_buf].dsh_float = 'picker-preview'
  api.nvim_buf_set_lines(p.list_buf, 0, -1, false, vim.tbl_map(sessions.describe, list))
  vim.bo[p.list_buf].modifiable = false
  vim.bo[p.preview_buf].filetype = 'markdown'
  p.preview_win = api.nvim_open_win(p.preview_buf, false, {
    relative = 'editor',
    row = row,
    col = col + lw + 2,
    width = math.max(10, width - lw - 2),
    height = height,
    border = 'rounded',
    title = ' preview ',
    style = 'minimal',
    zindex = 60,
  })
  vim.wo[p.preview_win].wrap = true
  p.list_win = api.nvim_open_win(p.list_buf, true, {
    relative = 'editor',
    row = row,
    col = col,
    width = lw,
    height = height,
    border = 'rounded',
    title = ' dsh sessions ',
    footer = ' <CR> resume · q close ',
    footer_pos = 'center',
    style = 'minimal',
    zindex = 60,
  })
  vim.wo[p.list_win].cursorline = true
  vim.cmd.stopinsert()
  local function current()
    return list[api.nvim_win_get_cursor(p.list_win)[1]]
  end
  local timer
  api.nvim_create_autocmd('CursorMoved', {
    buffer = p.list_buf,
    callback = function()
      if timer then
        timer:stop()
      end
      timer = vim.defer_fn(function()
        if api.nvim_win_is_valid(p.list_win) and current() then
          show_preview(p, current())
        end
      end, 60)
    end,
  })
  api.nvim_create_autocmd('WinLeave', {
    buffer = p.list_buf,
    once = true,
    callback = function()
      vim.schedule(function()
        close(p)
      end)
    end,
  })
  local function map(lhs, fn)
    vim.keymap.set('n', lhs, fn, { buffer = p.list_buf, nowait = true })
  end
  map('<CR>', function()
    local s = current()
    close(p)
    if s then
      on_choice(s)
    end
  end)
  for _, lhs in ipairs({ 'q', '<Esc>' }) do
    map(lhs, function()
      close(p)
    end)
  end
  show_preview(p, list[1])
  return p
end

--- :DshSessions / \r in the chat: pick a session of this project and resume it.
function M.pick_session()
  local root = client.root_for(0)
  sessions.list(root, function(list)
    if #list == 0 then
      return notify.notify('no session in ' .. root)
    end
    local function chosen(s)
      if s then
        sessions.resume(root, s.sessionId, s)
      end
    end
    if config.options.picker == 'select' then
      return vim.ui.select(list, { prompt = 'dsh sessions', format_item = sessions.describe }, chosen)
    end
    M.float(root, list, chosen)
  end)
end

return M
