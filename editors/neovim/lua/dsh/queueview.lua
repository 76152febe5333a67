-- What is waiting, always in view: one line per pending item (how it was sent, its first words, the
-- context it carries) as virtual lines under the transcript's last line, and — whenever those lines
-- are not all on screen (the transcript fills the window, or the view is scrolled up) — the same
-- lines in a float docked to the bottom of the transcript window, above the input, titled with the
-- count. The float never takes focus, and never covers the transcript's last line: a window showing
-- that line is scrolled so the virtual lines fit under it instead.
local api = vim.api
local labels = require('dsh.labels')

local M = {}
M.ns = api.nvim_create_namespace('dsh.queue')
M.MAX_LINES = 8

--- The queue as virtual-line chunks: next-step items, next-turn items, attachments of the next prompt.
function M.lines(chat)
  local lines = {}
  local function add(label, message)
    local line = { { label, 'DshQueueLabel' }, { labels.preview(chat.root, message), 'DshQueue' } }
    local ctx = labels.context_summary(chat.root, message.context)
    if ctx ~= '' then
      line[#line + 1] = { '  ' .. ctx, 'DshContext' }
    end
    lines[#lines + 1] = line
  end
  for _, m in ipairs(chat.state.inbox['next-step']) do
    local verb, known = labels.verb_of(m, 'next-step')
    add(known and ('  ⧗ next step · ' .. verb .. '  ') or '  ⧗ next step  ', m)
  end
  for i, m in ipairs(chat.state.inbox['next-turn']) do
    local verb, known = labels.verb_of(m, 'next-turn')
    add(known and ('  ⧗ queued %d · %s  '):format(i, verb) or ('  ⧗ queued %d   '):format(i), m)
  end
  for _, a in ipairs(chat.attachments) do
    lines[#lines + 1] = { { '  ⧗ with next prompt  ', 'DshQueueLabel' }, { '📎 ' .. a.label, 'DshQueue' } }
  end
  if #lines > M.MAX_LINES then
    local more = #lines - (M.MAX_LINES - 1)
    lines = vim.list_slice(lines, 1, M.MAX_LINES - 1)
    lines[#lines + 1] = { { '  ⧗ ', 'DshQueueLabel' }, { ('… %d more (:DshQueue)'):format(more), 'DshQueue' } }
  end
  return lines
end

--- The title of the docked float: how much is waiting.
local function title(chat)
  local turn, step = #chat.state.inbox['next-turn'], #chat.state.inbox['next-step']
  local parts = {}
  if turn > 0 then
    parts[#parts + 1] = turn .. ' queued'
  end
  if step > 0 then
    parts[#parts + 1] = step .. ' for the next step'
  end
  if #chat.attachments > 0 then
    parts[#parts + 1] = #chat.attachments .. ' attached'
  end
  return ' ⧗ ' .. table.concat(parts, ' · ') .. ' '
end

--- The rows `win` has for text (its height counts its window bar).
local function text_rows(win)
  local info = vim.fn.getwininfo(win)[1]
  return api.nvim_win_get_height(win) - (info and info.winbar or 0)
end

--- Whether everything below the top of `win` down to the virtual lines under the last line fits.
local function all_shown(win)
  local top = vim.fn.line('w0', win)
  -- (no end_row: "the very bottom", which counts the virtual lines under the last line)
  local ok, h = pcall(api.nvim_win_text_height, win, { start_row = top - 1 })
  if not ok then
    return true
  end
  return h.all <= text_rows(win)
end

local function close_float(chat)
  local f = chat.qfloat
  if f and f.win and api.nvim_win_is_valid(f.win) then
    pcall(api.nvim_win_close, f.win, true)
  end
  if f then
    f.win = nil
  end
end

--- When `win` shows the transcript's last line, scroll it so the virtual lines under that line fit
--- too (what `zb` on the last line does); true when they then do. The dock would otherwise cover
--- the newest lines of a streaming reply (issue 37.2): it is drawn only over a view scrolled up.
local function show_tail(win)
  local buf = api.nvim_win_get_buf(win)
  local last = api.nvim_buf_line_count(buf)
  if vim.fn.line('w$', win) < last then
    return false -- scrolled up: the window's bottom rows are not the newest lines
  end
  local height = text_rows(win)
  local top = vim.fn.line('w0', win)
  while top < last do
    local ok, h = pcall(api.nvim_win_text_height, win, { start_row = top - 1 })
    if not ok or h.all <= height then
      break
    end
    top = top + 1
  end
  api.nvim_win_call(win, function()
    vim.fn.winrestview({ topline = top })
  end)
  return all_shown(win)
end

--- Show (or update, or hide) the docked float of `chat` in the current tab.
function M.dock(chat, lines)
  lines = lines or M.lines(chat)
  local win = chat:windows()[1]
  if #lines == 0 or not win or all_shown(win) or show_tail(win) then
    return close_float(chat)
  end
  local f = chat.qfloat or {}
  chat.qfloat = f
  if not (f.buf and api.nvim_buf_is_valid(f.buf)) then
    f.buf = api.nvim_create_buf(false, true)
    vim.bo[f.buf].bufhidden = 'hide'
    vim.b[f.buf].dsh_float = 'queue'
  end
  local text, marks = {}, {}
  for i, chunks in ipairs(lines) do
    local s, col = {}, 0
    for _, c in ipairs(chunks) do
      s[#s + 1] = c[1]
      marks[#marks + 1] = { i - 1, col, col + #c[1], c[2] }
      col = col + #c[1]
    end
    text[i] = table.concat(s)
  end
  api.nvim_buf_set_lines(f.buf, 0, -1, false, text)
  api.nvim_buf_clear_namespace(f.buf, M.ns, 0, -1)
  for _, m in ipairs(marks) do
    api.nvim_buf_set_extmark(f.buf, M.ns, m[1], m[2], { end_col = m[3], hl_group = m[4] })
  end
  -- Placed on the editor grid over the transcript window's last text lines (re-placed when windows
  -- move or resize: layout.lua), so the window's own status line stays visible.
  -- (the window's height counts its window bar, not its status line)
  local pos = api.nvim_win_get_position(win)
  local last_row = pos[1] + api.nvim_win_get_height(win) - 1
  local cfg = {
    relative = 'editor',
    anchor = 'NW',
    row = math.max(0, last_row - #text), -- the top border, then the lines down to `last_row`
    col = pos[2],
    width = math.max(10, api.nvim_win_get_width(win)),
    height = #text,
    style = 'minimal',
    focusable = false,
    zindex = 40,
    border = { '', '─', '', '', '', '', '', '' },
    title = title(chat),
    title_pos = 'left',
  }
  if f.win and api.nvim_win_is_valid(f.win) then
    api.nvim_win_set_config(f.win, cfg)
  else
    cfg.noautocmd = true
    f.win = api.nvim_open_win(f.buf, false, cfg)
    vim.wo[f.win].winhighlight = 'Normal:NormalFloat'
    vim.wo[f.win].wrap = false
  end
end

--- Put the virtual lines under the last line and dock the float as needed.
function M.place(chat)
  if not api.nvim_buf_is_valid(chat.buf) then
    return
  end
  local lines = M.lines(chat)
  if #lines == 0 then
    if chat.qmark then
      pcall(api.nvim_buf_del_extmark, chat.buf, M.ns, chat.qmark)
      chat.qmark = nil
    end
  else
    local row = api.nvim_buf_line_count(chat.buf) - 1
    chat.qmark = api.nvim_buf_set_extmark(chat.buf, M.ns, row, 0, { id = chat.qmark, virt_lines = lines })
  end
  M.dock(chat, lines)
end

function M.hide(chat)
  close_float(chat)
end

return M
