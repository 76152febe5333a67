-- The state of one session, reduced from `dsh/event` notifications. `reduce` updates the state and
-- returns render operations for the chat; it knows nothing about buffers.
local M = {}

---@class dsh.SessionState
---@field id string
---@field status 'idle'|'running'
---@field last_seq integer highest durable seq applied (-1: none)
---@field inbox table<string, table[]> pending messages by target ('next-turn', 'next-step')
---@field live_steps table<string, boolean> steps whose text arrived as live deltas without offsets
---@field shown table<string, integer> 'turn:step:type' -> UTF-16 units of that block rendered
---@field chunk_pos table<string, integer> 'turn:step:type' -> UTF-16 units the stored chunks covered
---@field ahead table<string, table[]> 'turn:step:type' -> deltas past a gap, held until it is filled
---@field usage table<integer, table> turn -> usage
---@field calls table<string, table> callId -> {name, status}
---@field turn integer?
---@field read_only boolean?
---@field rendered_seq integer? durable events up to this seq are shown from a transcript page
---@field context {used: integer, window: integer?}? the last `context/usage`
---@field model string? the model of the last request (`request/header`)
---@field sandbox table? the last `sandbox/status` (or the attach reply's `sandbox`)
---@field plan table? the current plan: the `plan/updated` data that stands (nil: none)
---@field plan_at_turn table<integer, table|false> the plan when each turn seen began (false: none)
---@field plan_unknown boolean? a `conversation/cut` went back before the turns seen: ask the daemon
---@field subagents table<string, dsh.Subagent> the parent's `run_subagent` callId -> its child's card

function M.new(session_id)
  return {
    id = session_id,
    status = 'idle',
    last_seq = -1,
    inbox = { ['next-turn'] = {}, ['next-step'] = {} },
    live_steps = {},
    shown = {},
    chunk_pos = {},
    ahead = {},
    usage = {},
    calls = {},
    plan_at_turn = {},
    processes = {},
    subagents = {},
  }
end

--- The text of a message (`content` is a string or a list of blocks).
function M.text_of(message)
  local content = message and message.content
  if type(content) == 'string' then
    return content
  end
  local parts = {}
  for _, block in ipairs(content or {}) do
    if type(block) == 'table' then
      if (block.type == 'text' or block.type == 'reasoning') and type(block.text) == 'string' then
        parts[#parts + 1] = block.text
      elseif block.type == 'tool-result' then
        parts[#parts + 1] = M.text_of(block)
      end
    end
  end
  return table.concat(parts, '\n')
end

--- Whether a message is a notice meant for the model (e.g. "changed since you read it"): the person
--- does not see those.
function M.model_facing(source)
  return type(source) == 'table' and source.kind == 'plugin' and source.form == 'notice'
end

--- What the person typed for a prompt the daemon expanded from a custom command (`source.command`,
--- protocol.md §18): `/name arguments`; a review's (§19) in words; nil for any other prompt.
function M.as_typed(source)
  if type(source) == 'table' and type(source.review) == 'table' then -- :DshReview's (§19): not its diff
    return require('dsh.findings').describe(source.review)
  end
  local approved = type(source) == 'table' and source.approvedPlan
  if type(approved) == 'table' then -- the plan the person approved (§3), not something they typed
    return ('approved plan (%s)'):format(approved.mode == 'accept-edits' and 'accept edits' or 'ask')
  end
  local c = type(source) == 'table' and source.command
  if type(c) ~= 'table' or type(c.name) ~= 'string' then
    return nil
  end
  local args = type(c.arguments) == 'string' and c.arguments or ''
  return '/' .. c.name .. (args ~= '' and (' ' .. args) or '')
end

local function step_key(d)
  return tostring(d.turn) .. ':' .. tostring(d.step)
end

--- Set the pending lists from an attach/list reply ({nextTurn, nextStep}).
function M.set_inbox(st, inbox)
  st.inbox = {
    ['next-turn'] = vim.deepcopy((inbox and inbox.nextTurn) or {}),
    ['next-step'] = vim.deepcopy((inbox and inbox.nextStep) or {}),
  }
end

function M.pending(st)
  return #st.inbox['next-turn'] + #st.inbox['next-step']
end

--- Find a pending message: returns target, index (1-based), message.
function M.find(st, message_id)
  for _, target in ipairs({ 'next-turn', 'next-step' }) do
    for i, m in ipairs(st.inbox[target]) do
      if m.id == message_id then
        return target, i, m
      end
    end
  end
end

--- Length of `text` in UTF-16 code units (the unit of `assistant/delta` offsets).
local function utf16_len(text)
  return vim.str_utfindex(text, 'utf-16')
end
M.utf16_len = utf16_len

--- `text` without its first `units` UTF-16 code units.
local function drop_utf16(text, units)
  if units <= 0 then
    return text
  end
  local ok, byte = pcall(vim.str_byteindex, text, 'utf-16', units, false)
  if not ok or not byte then
    return ''
  end
  return text:sub(byte + 1)
end

--- Render the part of a block's text at `offset` (UTF-16 units within the step's block `key`) that
--- is not shown yet: a duplicate (a delta already in a replayed chunk, a chunk already streamed) is
--- dropped, an overlap is cut, and text past a gap is held until the text before it arrives.
local function feed(st, key, kind, offset, text, ops)
  local shown = st.shown[key] or 0
  local len = utf16_len(text)
  if offset > shown then
    local held = st.ahead[key] or {}
    held[#held + 1] = { offset = offset, text = text }
    st.ahead[key] = held
    return
  end
  if offset + len <= shown then
    return
  end
  local tail = drop_utf16(text, shown - offset)
  if tail ~= '' then
    ops[#ops + 1] = { op = kind, text = tail }
  end
  st.shown[key] = offset + len
  local held = st.ahead[key]
  if held then
    st.ahead[key] = nil
    table.sort(held, function(a, b)
      return a.offset < b.offset
    end)
    for _, h in ipairs(held) do
      feed(st, key, kind, h.offset, h.text, ops)
    end
  end
end

local function splice(st, d)
  local list = st.inbox[d.target]
  if not list then
    return
  end
  local start = tonumber(d.start) or 0
  for _ = 1, tonumber(d.removedCount) or 0 do
    table.remove(list, start + 1)
  end
  for i, m in ipairs(d.inserted or {}) do
    table.insert(list, start + i, m)
  end
end

--- What the window bar shows besides the status: the context gauge and the model.
function M.reduce_meta(st, t, d)
  if t == 'context/usage' then
    if type(d.used) == 'number' then
      st.context = { used = d.used, window = type(d.window) == 'number' and d.window or nil }
      return { { op = 'status' } }
    end
  else
    local model = vim.tbl_get(d, 'header', 'config', 'model')
    if type(model) == 'string' and model ~= '' and model ~= st.model then
      st.model = model
      return { { op = 'status' } }
    end
  end
  return {}
end

--- The plan, folded as the daemon folds it (protocol.md §7 `plan/updated`): the latest update not
--- taken back by a `conversation/cut`, which puts back the plan that stood when its turn began. A cut
--- to before the turns this chat saw cannot be folded here: `plan_unknown` asks for the daemon's.
--- Every such event counts, those a transcript page already shows too. `shown`: the event is in the
--- page rendered (the plan block is not redrawn for it).
local function fold_plan(st, t, d, shown)
  if t == 'plan/updated' then
    st.plan = d
    st.plan_unknown = nil
    return { { op = shown and 'plan_state' or 'plan', plan = d } }
  elseif t == 'turn/start' and type(d.turn) == 'number' then
    st.plan_at_turn[d.turn] = st.plan or false
  elseif t == 'conversation/cut' and type(d.beforeTurn) == 'number' then
    local before = st.plan_at_turn[d.beforeTurn]
    if before == nil then
      st.plan_unknown = true
    else
      st.plan = before or nil
    end
    return { { op = 'plan_state' } }
  end
  return {}
end

--- Steps of a plan (nil: no plan, or one cleared with no steps).
function M.plan_steps(plan)
  local steps = type(plan) == 'table' and plan.steps
  if type(steps) == 'table' and #steps > 0 then
    return steps
  end
end

---@class dsh.Subagent
---@field callId string the parent's `run_subagent` call
---@field childId string?
---@field description string
---@field tools string? its tool set: explore | edit | all
---@field status string running | completed | budget | error | cancelled | interrupted
---@field summary string? what the parent's model got (`subagent/finished`)
---@field calls table[] the child's tool calls, in order: {callId, name, arguments, result?: 'ok'|'error', error?}
---@field asking string? the title of the child's permission request waiting for the person

local function subagent_of(st, call_id)
  local a = st.subagents[call_id]
  if not a then
    a = { callId = call_id, description = '', status = 'running', calls = {}, by_call = {} }
    st.subagents[call_id] = a
  end
  return a
end

--- A child session's events as its parent's stream carries them (protocol.md §12 "Subagents"):
--- its card keeps its tool calls, a question it waits on, how it ended. Its text stays out (the
--- summary says what it found). Returns the render operations (nil: nothing the card shows).
local function reduce_subagent(st, t, d)
  if t == 'subagent/started' then
    local a = subagent_of(st, d.callId)
    a.childId, a.description, a.tools = d.childId, tostring(d.description or ''), d.tools
    return { { op = 'subagent', callId = d.callId } }
  elseif t == 'subagent/finished' then
    local a = subagent_of(st, d.callId)
    a.status, a.summary, a.asking = tostring(d.status or 'completed'), d.summary, nil
    return { { op = 'subagent', callId = d.callId } }
  elseif t == 'subagent/event' then
    local a = subagent_of(st, d.callId)
    local inner = type(d.event) == 'table' and d.event or {}
    local e = type(inner.data) == 'table' and inner.data or {}
    if inner.type == 'tool/call' and e.callId then
      if not a.by_call[e.callId] then
        local call = { callId = e.callId, name = e.name, arguments = e.arguments }
        a.by_call[e.callId] = call
        a.calls[#a.calls + 1] = call
      end
    elseif inner.type == 'tool/result' and a.by_call[e.callId or ''] then
      local call = a.by_call[e.callId]
      call.result = e.error and 'error' or 'ok'
      call.error = e.error
    else
      return nil
    end
    return { { op = 'subagent', callId = d.callId } }
  elseif t == 'permission/requested' and type(d.subagent) == 'table' and d.subagent.callId then
    local a = subagent_of(st, d.subagent.callId)
    a.asking, a.asking_call = tostring(d.title or d.tool or 'permission'), d.callId
    return { { op = 'subagent', callId = a.callId } }
  elseif t == 'permission/resolved' then
    for _, a in pairs(st.subagents) do
      if a.asking_call == d.callId then
        a.asking, a.asking_call = nil, nil
        return { { op = 'subagent', callId = a.callId } }
      end
    end
  end
end

--- A durable event drawn as a line of its own, live or from a transcript page's `event` item: a
--- background process started or ended (§12), words about the session itself (an MCP server, the
--- sandbox).
local function line_event(st, t, d)
  if t == 'process/started' or t == 'process/exited' then
    local text = require('dsh.processes').event_line(st.processes, t, d)
    return { { op = 'line', text = text, hl = 'DshNotice' }, { op = 'processes' } }
  elseif t == 'session/notice' then
    if d.kind == 'lease' or type(d.message) ~= 'string' then
      return {} -- the lease has its own line (`session/lease`)
    end
    local mark = d.kind == 'sandbox' and '⛨ ' or 'ℹ '
    return { { op = 'line', text = mark .. d.message, hl = d.level == 'warning' and 'DshPermission' or 'DshNotice' } }
  end
  return {}
end

--- Apply one event; returns a list of render operations.
---@param st dsh.SessionState
---@param ev {sessionId: string, seq: integer?, type: string, data: table?}
---@return table[]
function M.reduce(st, ev)
  local seq = ev.seq
  if type(seq) == 'number' and seq <= st.last_seq then
    return {} -- already applied (a repeated attach)
  end
  local shown = type(seq) == 'number' and st.rendered_seq ~= nil and seq <= st.rendered_seq
  local pre = fold_plan(st, ev.type, ev.data or {}, shown)
  local ops = M.reduce_one(st, ev)
  return #pre > 0 and vim.list_extend(pre, ops) or ops
end

function M.reduce_one(st, ev)
  local seq = ev.seq
  local t, d = ev.type, ev.data or {}
  if type(seq) == 'number' then
    if seq <= st.last_seq then
      return {} -- already applied (a repeated attach)
    end
    st.last_seq = seq
    if t == 'process/started' then -- what an exit names, also when the start is in the page shown
      st.processes[tostring(d.processId)] = d
    end
    if st.rendered_seq and seq <= st.rendered_seq and t ~= 'agent/inbox/spliced' then
      -- Already in the transcript page shown (the inbox came from the attach reply, older than it).
      if t == 'turn/usage' then
        st.usage[d.turn] = d.usage
      elseif t == 'context/usage' or t == 'request/header' then
        return M.reduce_meta(st, t, d)
      elseif t == 'tool/call' then
        st.calls[d.callId] = st.calls[d.callId] or { name = d.name, status = 'running' }
      elseif t == 'session/title' then
        return { { op = 'title', title = d.title } }
      end
      return {}
    end
  end
  local nested = reduce_subagent(st, t, d)
  if nested then
    return nested
  elseif t == 'agent/inbox/spliced' then
    splice(st, d)
    return { { op = 'inbox' } }
  elseif t == 'agent/status' then
    st.status = d.status
    return { { op = 'status' } }
  elseif t == 'turn/start' then
    st.turn = d.turn
    return { { op = 'turn_start', turn = d.turn } }
  elseif t == 'user/message' then
    local source = d.source or { kind = 'user' }
    local text = M.text_of(d)
    if M.model_facing(source) then
      return {}
    elseif source.kind == 'user' then
      return {
        { op = 'user', text = M.as_typed(source) or text, id = d.id, command = source.command, review = source.review },
      }
    elseif source.kind == 'editor' then
      return { { op = 'context', source = source, text = text } }
    else
      return { { op = 'notice', source = source, text = text } }
    end
  elseif t == 'assistant/delta' then
    local delta = d.delta or {}
    if not ((delta.type == 'text' or delta.type == 'reasoning') and type(delta.text) == 'string') then
      return {}
    end
    if type(d.offset) ~= 'number' then -- a daemon without offsets: trust the live stream alone
      st.live_steps[step_key(d)] = true
      return delta.text ~= '' and { { op = delta.type, text = delta.text } } or {}
    end
    local ops = {}
    feed(st, step_key(d) .. ':' .. delta.type, delta.type, d.offset, delta.text, ops)
    return ops
  elseif t == 'assistant/chunk' then
    if st.live_steps[step_key(d)] then
      return {} -- already shown from the live deltas
    end
    local ops = {}
    for _, delta in ipairs(d.deltas or {}) do
      if (delta.type == 'text' or delta.type == 'reasoning') and type(delta.text) == 'string' then
        local key = step_key(d) .. ':' .. delta.type
        local pos = st.chunk_pos[key] or 0
        st.chunk_pos[key] = pos + utf16_len(delta.text)
        feed(st, key, delta.type, pos, delta.text, ops)
      end
    end
    return ops
  elseif t == 'assistant/message' then
    return { { op = 'assistant_end', interrupted = d.interrupted } }
  elseif t == 'tool/call' then
    st.calls[d.callId] = { name = d.name, status = 'running' }
    return { { op = 'tool_call', callId = d.callId, name = d.name, arguments = d.arguments, synthetic = d.synthetic } }
  elseif t == 'tool/output' then
    return { { op = 'tool_output', callId = d.callId, text = d.text } }
  elseif t == 'tool/result' then
    local message = d.message or {}
    local call_id = d.callId -- top level since the daemon's deltaOffsets/inboxItems release
    if not call_id then
      call_id = (message.source or {}).callId
      if not call_id and type(message.content) == 'table' and message.content[1] then
        call_id = message.content[1].toolCallId
      end
    end
    local call = st.calls[call_id or ''] or {}
    call.status = d.error and 'error' or 'ok'
    return {
      {
        op = 'tool_result',
        callId = call_id,
        name = d.name or call.name,
        error = d.error,
        meta = d.meta,
        text = M.text_of(message),
      },
    }
  elseif t == 'turn/usage' then
    st.usage[d.turn] = d.usage
    return {}
  elseif t == 'context/usage' or t == 'request/header' then
    return M.reduce_meta(st, t, d)
  elseif t == 'turn/end' then
    return { { op = 'turn_end', turn = d.turn, reason = d.reason or {}, usage = st.usage[d.turn] } }
  elseif t == 'llm/retry' then
    return { { op = 'retry', retry = d.retry, delayMs = d.delayMs, error = d.error or {} } }
  elseif t == 'agent/error' then
    return { { op = 'error', error = d.error or {} } }
  elseif t == 'session/title' then
    return { { op = 'title', title = d.title } }
  elseif t == 'sandbox/status' then -- live: where commands run now (protocol.md §16)
    st.sandbox = d
    return { { op = 'sandbox' } }
  elseif t == 'process/started' or t == 'process/exited' or t == 'session/notice' then
    return line_event(st, t, d)
  elseif t == 'sandbox/widened' then
    return { { op = 'widened', widened = d } }
  elseif t == 'session/mode' then -- dsh/session/setMode, or a plan's approval (protocol.md §3)
    st.mode = d.mode
    return { { op = 'status' } }
  elseif t == 'session/lease' then -- a read-only attach: who drives the session now
    local was = st.read_only
    st.read_only = d.readOnly and true or nil
    return { { op = 'lease', was = was, holder = d.holder } }
  end
  return {}
end

--- Render operations for one turn of a `dsh/session/transcript` page; the state learns what live
--- events continue (tool calls, usage, how much of a streaming step is shown).
function M.turn_ops(st, turn)
  local ops = {}
  local n = turn.turn
  ops[#ops + 1] = { op = 'turn_start', turn = n }
  for _, item in ipairs(turn.items or {}) do
    if item.type == 'message' then
      local source = item.source or { kind = 'user' }
      local text = item.text or ''
      if M.model_facing(source) then
        -- not shown to the person
      elseif source.kind == 'user' then
        ops[#ops + 1] = { op = 'user', text = M.as_typed(source) or text, id = item.id, command = source.command }
      elseif source.kind == 'editor' then
        ops[#ops + 1] = { op = 'context', source = source, text = text }
      else
        ops[#ops + 1] = { op = 'notice', source = source, text = text }
      end
    elseif item.type == 'assistant' then
      for _, kind in ipairs({ 'reasoning', 'text' }) do
        local text = item[kind]
        if type(text) == 'string' and text ~= '' then
          ops[#ops + 1] = { op = kind, text = text }
        end
        if item.partial then -- the streaming step: its live deltas and chunks continue from here
          local key = tostring(n) .. ':' .. tostring(item.step) .. ':' .. kind
          local len = type(text) == 'string' and utf16_len(text) or 0
          st.shown[key], st.chunk_pos[key] = len, len
        end
      end
      if item.interrupted then
        ops[#ops + 1] = { op = 'assistant_end', interrupted = true }
      end
    elseif item.type == 'event' and type(item.event) == 'string' then
      local d = type(item.data) == 'table' and item.data or {}
      -- A subagent's card: its description, how it ended, its summary (its steps: the child's transcript).
      vim.list_extend(ops, reduce_subagent(st, item.event, d) or line_event(st, item.event, d))
    elseif item.type == 'tool' then
      local r = item.result
      local err = r and (r.error or (r.isError and { code = 'error' }) or nil)
      st.calls[item.callId or ''] = { name = item.name, status = r and (err and 'error' or 'ok') or 'running' }
      ops[#ops + 1] =
        { op = 'tool_call', callId = item.callId, name = item.name, arguments = item.arguments, synthetic = item.synthetic }
      if r then
        ops[#ops + 1] =
          { op = 'tool_result', callId = item.callId, name = item.name, error = err, meta = r.meta, text = r.output or '' }
      end
    end
  end
  if turn['end'] then
    st.usage[n] = turn.usage
    ops[#ops + 1] = { op = 'turn_end', turn = n, reason = turn['end'], usage = turn.usage }
  else
    st.turn = n
  end
  if turn.cut then
    ops[#ops + 1] = { op = 'cut_turn', turn = n }
  end
  return ops
end

return M
