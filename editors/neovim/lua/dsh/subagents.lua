-- A subagent in the chat (protocol.md §12 "Subagents"): the child a `run_subagent` call started is a
-- nested card under that call, folded by session.lua from `subagent/started`, the child's own events
-- on the parent's stream (`subagent/event`), a question it waits on (`permission/requested` naming
-- it) and `subagent/finished`. The card shows the child's description, its tool calls as they run,
-- the question, then how it ended and its summary; `K` on it folds it to its first line and back.
local api = vim.api
local labels = require('dsh.labels')

local M = {}

M.ns = api.nvim_create_namespace('dsh.subagent')

local SUMMARY_LINES = 6 -- the rest: the call's result (`K` on the run_subagent card)
local BAR = '  │ '

local function state_word(a)
  if a.status == 'running' then
    return a.asking and 'waits for you' or 'running…'
  end
  return a.status
end

--- The card's lines: {text, highlight}. Folded (`a.folded`): the first line alone, with a count.
function M.lines(chat, a)
  local calls = #a.calls
  local head = ('%s subagent “%s”%s · %s'):format(
    a.folded and '▸' or '▾',
    labels.first_line(a.description, 60),
    a.tools and (' (' .. a.tools .. ')') or '',
    state_word(a)
  )
  if a.folded then
    head = head .. (' · %d tool call%s'):format(calls, calls == 1 and '' or 's')
    return { { '  ' .. head, 'DshToolCard' } }
  end
  local out = { { '  ' .. head, 'DshToolCard' } }
  for _, c in ipairs(a.calls) do
    local mark = c.result == 'ok' and '  ✓' or c.result == 'error' and ('  ✗ ' .. tostring((c.error or {}).code or 'error')) or '  …'
    out[#out + 1] = {
      ('%s⚙ %s  %s%s'):format(BAR, tostring(c.name or 'tool'), labels.call_summary(chat.root, c.arguments), mark),
      c.result == 'error' and 'DshToolError' or 'DshNotice',
    }
  end
  if a.asking then
    out[#out + 1] = { BAR .. '⚠ asks: ' .. labels.first_line(a.asking, 100), 'DshPermission' }
  end
  if a.summary and a.status ~= 'running' then
    local lines = vim.split(vim.trim(tostring(a.summary)), '\n', { plain = true })
    for i = 1, math.min(#lines, SUMMARY_LINES) do
      out[#out + 1] = { BAR .. (i == 1 and '↳ ' or '  ') .. lines[i], a.status == 'completed' and 'DshNotice' or 'DshToolError' }
    end
    if #lines > SUMMARY_LINES then
      out[#out + 1] = { ('%s  … %d more lines: K on the run_subagent card'):format(BAR, #lines - SUMMARY_LINES), 'DshNotice' }
    end
  end
  return out
end

--- The card whose lines hold `row` (0-based), if any: its callId.
function M.at_row(chat, row)
  for call_id, b in pairs(chat.subagent_blocks or {}) do
    local pos = api.nvim_buf_get_extmark_by_id(chat.buf, M.ns, b.mark, {})
    if pos[1] and pos[1] <= row and row < pos[1] + b.count then
      return call_id
    end
  end
end

--- `K` on a subagent card: fold it to its first line, or unfold it. False when no card is there.
function M.toggle(chat, row)
  local call_id = M.at_row(chat, row)
  local a = call_id and chat.state.subagents[call_id]
  if not a then
    return false
  end
  a.folded = not a.folded
  chat:render({ op = 'subagent', callId = call_id })
  return true
end

return M
