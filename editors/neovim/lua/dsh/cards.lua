-- Tool cards, expanded: what each tool call of a chat did (its arguments, the command's output as it
-- streams, the exit code, an edit's diff, the result the model read), kept per call, and a float
-- that shows the card under the cursor (`K` in the transcript) and follows a running command.
local api = vim.api
local labels = require('dsh.labels')
local notify = require('dsh.notify')

local M = {}
-- The transcript's namespace (render.lua makes the same one: namespaces are shared by name).
local NS = api.nvim_create_namespace('dsh.chat')

--- Output kept per call (the daemon caps its own stream at 1,000,000 characters too).
M.MAX_OUTPUT = 1000000
--- Output shown in the float (its end).
M.MAX_SHOWN = 200000

---@class dsh.Tool
---@field callId string
---@field name string
---@field arguments any
---@field parts string[] streamed output
---@field size integer
---@field tail string the last few hundred characters (the card's running line)
---@field result {error: table?, meta: table?, text: string}?

local function tool_of(chat, call_id)
  chat.tools = chat.tools or {}
  local id = call_id or ''
  local tool = chat.tools[id]
  if not tool then
    tool = { callId = id, name = 'tool', parts = {}, size = 0, tail = '' }
    chat.tools[id] = tool
  end
  return tool
end

local refresh

function M.call(chat, op)
  local tool = tool_of(chat, op.callId)
  tool.name, tool.arguments, tool.synthetic = op.name or tool.name, op.arguments, op.synthetic
  refresh(chat, tool.callId)
end

function M.output(chat, op)
  local tool = tool_of(chat, op.callId)
  local text = op.text or ''
  if tool.size < M.MAX_OUTPUT then
    tool.parts[#tool.parts + 1] = text
    tool.size = tool.size + #text
  end
  tool.tail = (tool.tail .. text):sub(-400)
  refresh(chat, tool.callId)
  return tool
end

function M.result(chat, op)
  local tool = tool_of(chat, op.callId)
  tool.name = op.name or tool.name
  tool.result = { error = op.error, meta = op.meta, text = op.text or '' }
  refresh(chat, tool.callId)
end

local function split(text)
  return vim.split((text or ''):gsub('\n$', ''), '\n', { plain = true })
end

--- The float's lines for a call, and its filetype ('diff' when it is an edit's diff).
function M.lines(chat, tool)
  local out = {}
  local args = labels.arguments(tool.arguments) or {}
  local r = tool.result
  local status
  if not r then
    status = tool.synthetic and 'not run' or 'running…'
  elseif r.error then
    status = '✗ ' .. (r.error.code or 'error')
  else
    status = '✓ ok'
    if r.meta and type(r.meta.exitCode) == 'number' then
      status = status .. ' · exit ' .. r.meta.exitCode
    end
  end
  out[#out + 1] = ('⚙ %s  %s'):format(tool.name, status)
  if type(args.command) == 'string' then
    out[#out + 1] = '$ ' .. args.command
  elseif type(args.path) == 'string' then
    -- a path as the model gave it: relative to the session's directory, or absolute
    local absolute = args.path:sub(1, 1) == '/'
    out[#out + 1] = absolute and labels.rel(chat.root, vim.uri_from_fname(args.path)) or args.path
  elseif next(args) then
    out[#out + 1] = vim.json.encode(args)
  end
  local diff = r and r.meta and type(r.meta.diff) == 'string' and r.meta.diff
  if diff then
    out[#out + 1] = ''
    vim.list_extend(out, split(diff))
    if r.meta.diffTruncated then
      out[#out + 1] = ('[diff cut at 4,000 of %s characters]'):format(tostring(r.meta.diffLength or '?'))
    end
    -- What the agent was told beyond "Edited …": new errors from the language server, notes.
    local notes = (r.text or ''):match('^[^\n]*\n(.+)$')
    if notes then
      out[#out + 1] = ''
      vim.list_extend(out, split(notes))
    end
    return out, 'diff'
  end
  local streamed = table.concat(tool.parts)
  out[#out + 1] = ''
  if streamed ~= '' then
    if #streamed > M.MAX_SHOWN then
      out[#out + 1] = ('[… %d earlier characters not shown]'):format(#streamed - M.MAX_SHOWN)
      streamed = streamed:sub(-M.MAX_SHOWN)
    end
    vim.list_extend(out, split(streamed))
    if tool.size >= M.MAX_OUTPUT then
      out[#out + 1] = '[output cut: the rest is in the result the agent read]'
    end
    if r and r.meta and type(r.meta.exitCode) == 'number' then
      out[#out + 1] = '[exit code ' .. r.meta.exitCode .. ']'
    end
  elseif r then
    vim.list_extend(out, split(r.text ~= '' and r.text or '(no output)'))
  else
    out[#out + 1] = '(no output yet)'
  end
  return out, 'dshoutput'
end

--- The call whose card is on `row` of the transcript (or on the row above: its `↳` error line).
function M.at_row(chat, row)
  for _, r in ipairs({ row, row - 1 }) do
    if r >= 0 then
      for _, m in ipairs(api.nvim_buf_get_extmarks(chat.buf, NS, { r, 0 }, { r, -1 }, {})) do
        for call_id, id in pairs(chat.cards or {}) do
          if id == m[1] then
            return call_id
          end
        end
      end
    end
  end
end

local function render_float(chat)
  local d = chat.details
  if not (d and api.nvim_buf_is_valid(d.buf)) then
    return
  end
  local lines, ft = M.lines(chat, tool_of(chat, d.callId))
  local wins = vim.fn.win_findbuf(d.buf)
  local at_end = {}
  for _, win in ipairs(wins) do
    at_end[win] = api.nvim_win_get_cursor(win)[1] >= api.nvim_buf_line_count(d.buf)
  end
  vim.bo[d.buf].modifiable = true
  api.nvim_buf_set_lines(d.buf, 0, -1, false, lines)
  vim.bo[d.buf].modifiable = false
  if vim.bo[d.buf].filetype ~= ft then
    vim.bo[d.buf].filetype = ft
  end
  local want = math.max(3, math.min(#lines, math.floor(vim.o.lines * 0.6)))
  for win, follow in pairs(at_end) do
    if api.nvim_win_is_valid(win) and api.nvim_win_get_height(win) < want then
      pcall(api.nvim_win_set_height, win, want) -- grows with the output, up to 60% of the screen
    end
    if follow and api.nvim_win_is_valid(win) then -- a running command's float follows its output
      pcall(api.nvim_win_set_cursor, win, { #lines, 0 })
    end
  end
end

--- Redraw the open float if it shows `call_id` (at most every 50 ms while output streams).
refresh = function(chat, call_id)
  local d = chat.details
  if not (d and d.callId == call_id) or d.armed then
    return
  end
  d.armed = true
  vim.defer_fn(function()
    d.armed = false
    render_float(chat)
  end, 50)
end

function M.close(chat)
  local d = chat.details
  chat.details = nil
  if d and d.win and api.nvim_win_is_valid(d.win) then
    pcall(api.nvim_win_close, d.win, true)
  end
end

--- `K` in the transcript: the card under the cursor, expanded in a float (q / <Esc> / K close it).
function M.show(chat)
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local call_id = M.at_row(chat, row)
  if not call_id then
    return notify.notify('no tool card here: put the cursor on a ⚙ line')
  end
  M.close(chat)
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  chat.details = { callId = call_id, buf = buf }
  render_float(chat)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local width = 40
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l) + 1)
  end
  width = math.min(width, math.max(40, vim.o.columns - 8))
  local height = math.max(3, math.min(#lines, math.floor(vim.o.lines * 0.6)))
  local win = api.nvim_open_win(buf, true, {
    relative = 'cursor',
    row = 1,
    col = 0,
    width = width,
    height = height,
    style = 'minimal',
    border = 'rounded',
    title = ' ' .. tool_of(chat, call_id).name .. ' ',
    footer = ' q close ',
    footer_pos = 'right',
  })
  vim.wo[win].wrap = false
  chat.details.win = win
  local tool = tool_of(chat, call_id)
  if not tool.result then -- running: follow the output
    api.nvim_win_set_cursor(win, { #lines, 0 })
  end
  for _, lhs in ipairs({ 'q', '<Esc>', 'K' }) do
    vim.keymap.set('n', lhs, function()
      M.close(chat)
    end, { buffer = buf, nowait = true, desc = 'dsh: close' })
  end
  api.nvim_create_autocmd('WinClosed', {
    pattern = tostring(win),
    once = true,
    callback = function()
      if chat.details and chat.details.win == win then
        chat.details = nil
      end
    end,
  })
end

return M
