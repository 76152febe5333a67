-- Loaded by the test init.lua: `T` reads what a person sees (buffer lines, virtual lines, winbar,
-- floats) so the Python tests can assert on it.
local api = vim.api
local T = {}
_G.T = T

function T.dsh()
  return require('dsh')
end

--- The chat of the current project root (its session's, else its draft), or the only one.
function T.chat()
  local state = require('dsh.state')
  local root = require('dsh.client').root_for(0)
  local sid = state.current[root]
  if sid and state.chats[sid] then
    return state.chats[sid]
  end
  if state.drafts[root] then
    return state.drafts[root]
  end
  for _, c in pairs(state.chats) do
    return c
  end
end

local function virt_text(chunks)
  local out = {}
  for _, c in ipairs(chunks or {}) do
    out[#out + 1] = c[1]
  end
  return table.concat(out)
end

--- Everything visible about the chat.
function T.snapshot()
  local c = T.chat()
  if not c then
    return vim.NIL
  end
  c:flush() -- streamed text waiting for the next redraw
  local ns = require('dsh.render').ns
  local nsq = require('dsh.queueview').ns
  local marks = api.nvim_buf_get_extmarks(c.buf, ns, 0, -1, { details = true })
  local cards, hls = {}, {}
  for _, m in ipairs(marks) do
    local d = m[4]
    if d.virt_text then
      cards[#cards + 1] = { row = m[2], text = virt_text(d.virt_text), hl = d.virt_text[1][2] }
    end
    if d.hl_group then
      hls[#hls + 1] = { row = m[2], col = m[3], end_row = d.end_row, end_col = d.end_col, hl = d.hl_group }
    end
  end
  local queue, queue_row = {}, vim.NIL
  for _, m in ipairs(api.nvim_buf_get_extmarks(c.buf, nsq, 0, -1, { details = true })) do
    for _, vl in ipairs(m[4].virt_lines or {}) do
      queue[#queue + 1] = virt_text(vl)
    end
    queue_row = m[2]
  end
  local win = c:windows()[1]
  return {
    id = c.id or vim.NIL,
    lines = api.nvim_buf_get_lines(c.buf, 0, -1, false),
    status = c.state.status,
    pending = require('dsh.session').pending(c.state),
    queue = queue,
    queue_row = queue_row,
    cards = cards,
    hls = hls,
    winbar = win and vim.wo[win].winbar or '',
    cursor = win and api.nvim_win_get_cursor(win) or vim.NIL,
    line_count = api.nvim_buf_line_count(c.buf),
    input = api.nvim_buf_get_lines(c.input, 0, -1, false),
    filetype = vim.bo[c.buf].filetype,
    buftype = vim.bo[c.buf].buftype,
  }
end

--- The open floating windows: their buffer lines, filetype, title, footer.
function T.floats()
  local out = {}
  for _, win in ipairs(api.nvim_list_wins()) do
    local cfg = api.nvim_win_get_config(win)
    if cfg.relative and cfg.relative ~= '' then
      local buf = api.nvim_win_get_buf(win)
      local function text(x)
        if type(x) == 'table' then
          return virt_text(x)
        end
        return x or ''
      end
      out[#out + 1] = {
        win = win,
        kind = vim.b[buf].dsh_float or '',
        focusable = cfg.focusable,
        lines = api.nvim_buf_get_lines(buf, 0, -1, false),
        filetype = vim.bo[buf].filetype,
        title = text(cfg.title),
        footer = text(cfg.footer),
        current = api.nvim_get_current_win() == win,
      }
    end
  end
  return out
end

--- The screen as a person sees it (the composed grid: windows, floats, virtual text), one string a
--- row, after a redraw; tests quote it and write it to a capture file.
function T.screen()
  vim.cmd('redraw')
  local rows = {}
  for r = 1, vim.o.lines do
    local cells = {}
    for c = 1, vim.o.columns do
      cells[#cells + 1] = vim.fn.screenstring(r, c)
    end
    rows[r] = (table.concat(cells):gsub('%s+$', ''))
  end
  return rows
end

--- Where the transcript's last line and the docked queue are on the screen (1-based rows; 0: not
--- on screen): the dock must never cover that line.
function T.tail_and_dock()
  local c = T.chat()
  local win = vim.fn.win_findbuf(c.buf)[1]
  local last = api.nvim_buf_line_count(c.buf)
  local len = #(api.nvim_buf_get_lines(c.buf, last - 1, last, false)[1] or '')
  local pos = vim.fn.screenpos(win, last, math.max(1, len))
  local out = { tail_row = pos.row, win_top = vim.fn.win_screenpos(win)[1], dock_top = 0 }
  for _, w in ipairs(api.nvim_list_wins()) do
    if vim.b[api.nvim_win_get_buf(w)].dsh_float == 'queue' then
      out.dock_top = vim.fn.win_screenpos(w)[1] - 1 -- its top border
    end
  end
  return out
end

--- A synchronous request to the daemon of the current root (for checks).
function T.request(method, params)
  local entry = require('dsh.client').roots[require('dsh.client').root_for(0)]
  local res = entry.client:request_sync(method, params, 5000)
  if not res then
    error('no answer to ' .. method)
  end
  if res.err then
    error(vim.inspect(res.err))
  end
  return res.result
end

function T.inbox()
  local c = T.chat()
  return T.request('dsh/inbox/list', { sessionId = c.id })
end

function T.messages()
  return api.nvim_exec2('messages', { output = true }).output
end

return T
