-- Writing a chat's transcript buffer: `## You` / `## dsh` headings, the streamed reply, reasoning
-- dimmed, tool calls as card lines whose status is an extmark, footers.
--
-- Streamed text is coalesced: deltas collect in `chat.pending` and are written at most once per
-- `render_interval` ms (one buffer change, one cursor move per following window, one redraw), and
-- before any other operation, so the order of what is shown never changes. A streamed line longer
-- than `max_line` bytes is continued on a new line (a soft break, marked in `ns_soft`), since Neovim
-- redraws a very long wrapped line slowly.
local api = vim.api
local config = require('dsh.config')
local labels = require('dsh.labels')
local cards = require('dsh.cards')
local highlight = require('dsh.highlight')
local plan = require('dsh.plan')

local M = {}
M.ns = api.nvim_create_namespace('dsh.chat')
M.ns_soft = api.nvim_create_namespace('dsh.softbreak')
M.ns_plan = api.nvim_create_namespace('dsh.planblock')
M.ns_subagent = api.nvim_create_namespace('dsh.subagentblock')

-- ---- buffer writing ------------------------------------------------------------------------------

--- Run `fn` with the transcript modifiable; windows whose cursor was on the last line follow the end.
function M.modify(chat, fn)
  local buf = chat.buf
  if not api.nvim_buf_is_valid(buf) then
    return
  end
  local last = api.nvim_buf_line_count(buf)
  local follow = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if api.nvim_win_get_cursor(win)[1] >= last then
      follow[#follow + 1] = win
    end
  end
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn)
  vim.bo[buf].modifiable = false
  local n = api.nvim_buf_line_count(buf)
  for _, win in ipairs(follow) do
    pcall(api.nvim_win_set_cursor, win, { n, 0 })
  end
  chat:after_change()
  highlight.later(chat)
  if not ok then
    error(err)
  end
end

local function last(chat)
  local row = api.nvim_buf_line_count(chat.buf) - 1
  return row, api.nvim_buf_get_lines(chat.buf, row, row + 1, false)[1] or ''
end

--- Append `text` at the very end; returns the range it covers (0-based, end exclusive).
local function append(chat, text)
  text = text:gsub('\r\n?', '\n')
  local row, line = last(chat)
  local col = #line
  local lines = vim.split(text, '\n', { plain = true })
  api.nvim_buf_set_text(chat.buf, row, col, row, col, lines)
  chat.empty = false
  local erow = row + #lines - 1
  local ecol = #lines == 1 and col + #lines[1] or #lines[#lines]
  return row, col, erow, ecol
end
M.append = append

--- Where to break a line of `have` bytes that `text` continues: the byte count of `text` that still
--- fits under `max` (at a space when there is one near the end, never inside a UTF-8 character).
local function fit(text, have, max)
  local room = max - have
  if room <= 0 then
    return 0
  end
  local cut = room
  while cut > 0 and cut < #text and bit.band(text:byte(cut + 1), 0xC0) == 0x80 do
    cut = cut - 1 -- the next byte continues a character: cut before that character
  end
  local space = text:sub(1, cut):match('.*()%s')
  if space and space > cut - 200 and space > 1 then
    cut = space
  end
  return cut
end

--- Append streamed `text`, continuing lines longer than `max_line` on the next line.
local function append_wrapped(chat, text)
  local max = config.options.max_line or 0
  if max <= 0 then
    return append(chat, text)
  end
  local srow, scol, erow, ecol
  local function piece(t)
    local r1, c1, r2, c2 = append(chat, t)
    if not srow then
      srow, scol = r1, c1
    end
    erow, ecol = r2, c2
  end
  for segment, nl in text:gmatch('([^\n]*)(\n?)') do
    if segment == '' and nl == '' then
      break
    end
    local _, line = last(chat)
    local have = #line
    while have + #segment > max do
      local cut = fit(segment, have, max)
      if cut == 0 and have == 0 then
        cut = math.min(#segment, max) -- one unbreakable run: cut it anyway
      end
      piece(segment:sub(1, cut) .. '\n')
      local row = api.nvim_buf_line_count(chat.buf) - 2
      api.nvim_buf_set_extmark(chat.buf, M.ns_soft, row, 0, {
        virt_text = { { '↩', 'DshSoftBreak' } },
        virt_text_pos = 'eol',
      })
      segment = segment:sub(cut + 1)
      have = 0
    end
    piece(segment .. nl)
  end
  return srow, scol, erow, ecol
end

--- Make sure the end is at the start of an empty line.
local function bol(chat)
  if chat.empty then
    return
  end
  local _, line = last(chat)
  if line ~= '' then
    append(chat, '\n')
  end
end

--- Make sure an empty line separates what comes next from what is there.
local function blank(chat)
  if chat.empty then
    return
  end
  bol(chat)
  local row = api.nvim_buf_line_count(chat.buf) - 1
  if row >= 1 and api.nvim_buf_get_lines(chat.buf, row - 1, row, false)[1] ~= '' then
    append(chat, '\n')
  end
end

--- A whole line (highlighted with `hl`); returns its row.
local function line(chat, text, hl)
  bol(chat)
  local row, _, erow, ecol = append(chat, (text:gsub('\n', ' ')))
  if hl then
    api.nvim_buf_set_extmark(chat.buf, M.ns, row, 0, { end_row = erow, end_col = ecol, hl_group = hl })
  end
  append(chat, '\n')
  return row
end
M.line = line

local function end_segment(chat)
  if chat.seg == 'reasoning' then
    blank(chat)
  elseif chat.seg == 'text' then
    bol(chat)
  end
  chat.seg = nil
  chat.seg_row = nil
  chat.rmark = nil
end

-- ---- operations ----------------------------------------------------------------------------------

local R = {}

function R.user(chat, op)
  end_segment(chat)
  blank(chat)
  if chat.last_op ~= 'user' then -- several prompts entering one step share a heading
    line(chat, '## You')
  end
  append(chat, op.text)
  append(chat, '\n')
  local c = op.command
  if type(c) == 'table' then -- a custom command: the daemon sent its prompt in the line's place
    local whose = c.origin == 'project' and "the project's" or 'your'
    line(chat, ('↳ %s command /%s (%s)'):format(whose, tostring(c.name), tostring(c.path or '')), 'DshNotice')
  end
  chat.assistant_header = false
end

function R.context(chat, op)
  end_segment(chat)
  if chat.last_op == 'turn_end' then
    blank(chat)
  end
  line(chat, '📎 ' .. labels.context_label(chat.root, op.source), 'DshContext')
end

function R.notice(chat, op)
  end_segment(chat)
  local source = op.source or {}
  if source.kind == 'hook' then -- context or a reason one of the person's hooks gave the model (§17)
    line(chat, require('dsh.hooks').message_label(source) .. ': ' .. labels.first_line(op.text, 100), 'DshNotice')
    return
  end
  line(chat, 'ℹ ' .. labels.first_line(op.text, 100), 'DshNotice')
end

local function assistant_header(chat)
  if not chat.assistant_header then
    end_segment(chat)
    blank(chat)
    line(chat, '## dsh')
    chat.assistant_header = true
  end
end

local function assistant(chat, kind, text)
  assistant_header(chat)
  if chat.seg ~= kind then
    end_segment(chat)
    bol(chat)
    chat.seg = kind
    chat.seg_row = api.nvim_buf_line_count(chat.buf) - 1 -- tree-sitter paints it once it ends
    if kind == 'reasoning' then
      local row, l = last(chat)
      chat.rmark = { row = row, col = #l }
    end
  end
  local _, _, erow, ecol = append_wrapped(chat, text)
  if kind == 'reasoning' and chat.rmark and erow then
    chat.rmark.id = api.nvim_buf_set_extmark(chat.buf, M.ns, chat.rmark.row, chat.rmark.col, {
      id = chat.rmark.id,
      end_row = erow,
      end_col = ecol,
      hl_group = 'DshReasoning',
      priority = 300,
    })
  end
end

function R.text(chat, op)
  assistant(chat, 'text', op.text)
end

function R.reasoning(chat, op)
  assistant(chat, 'reasoning', op.text)
end

function R.assistant_end(chat, op)
  if op.interrupted then
    end_segment(chat)
    line(chat, '(interrupted)', 'DshNotice')
  end
end

function R.tool_call(chat, op)
  assistant_header(chat)
  end_segment(chat)
  local row = line(chat, ('⚙ %s  %s'):format(op.name or 'tool', labels.call_summary(chat.root, op.arguments)), 'DshToolCard')
  local id = op.callId or ''
  chat.cards[id] = api.nvim_buf_set_extmark(chat.buf, M.ns, row, 0, {
    virt_text = { { op.synthetic and '  not run' or '  running…', 'DshToolRunning' } },
    virt_text_pos = 'eol',
  })
  cards.call(chat, op)
end

function R.tool_output(chat, op)
  local tool = cards.output(chat, op)
  local id = chat.cards[op.callId or '']
  local pos = id and api.nvim_buf_get_extmark_by_id(chat.buf, M.ns, id, {}) or {}
  if not pos[1] then
    return
  end
  local last_line = ''
  for l in tool.tail:gmatch('[^\n]+') do
    if vim.trim(l) ~= '' then
      last_line = l
    end
  end
  api.nvim_buf_set_extmark(chat.buf, M.ns, pos[1], pos[2], {
    id = id,
    virt_text = { { '  running… ', 'DshToolRunning' }, { labels.first_line(last_line, 60), 'DshNotice' } },
    virt_text_pos = 'eol',
  })
end

--- What the language server told the agent, from a tool result's meta (protocol.md §9): the note
--- (`'2 new errors'`, `'no language server'`) and its highlight, or nil. The words the model got are
--- for the model and may change, so they are never matched.
function M.tool_note(meta)
  meta = meta or {}
  local new_errors = tonumber(meta.newErrors)
  if new_errors and new_errors > 0 then
    return ('%d new error%s'):format(new_errors, new_errors == 1 and '' or 's'), 'DshToolError'
  elseif meta.noLanguageServer == true then
    return 'no language server', 'DshNotice'
  end
end

--- The status at the end of a card line: `✓ ok +3 −1`, `✓ ok · exit 1`, `✗ REJECTED`.
local function card_status(op)
  if op.error then
    return { { '  ✗ ' .. (op.error.code or 'error'), 'DshToolError' } }
  end
  local extra = ''
  local meta = op.meta or {}
  if meta.diff then
    local add, del = labels.diff_counts(meta.diff)
    extra = (' +%d −%d'):format(add, del)
  elseif type(meta.exitCode) == 'number' then
    extra = ' · exit ' .. meta.exitCode
  end
  local out = { { '  ✓ ok' .. extra, 'DshToolOk' } }
  local note, hl = M.tool_note(meta)
  if note then
    out[#out + 1] = { ' · ' .. note, hl }
  end
  return out
end

function R.tool_result(chat, op)
  cards.result(chat, op)
  local vt = card_status(op)
  local id = chat.cards[op.callId or '']
  local pos = id and api.nvim_buf_get_extmark_by_id(chat.buf, M.ns, id, {}) or {}
  if pos[1] then
    api.nvim_buf_set_extmark(chat.buf, M.ns, pos[1], pos[2], { id = id, virt_text = vt, virt_text_pos = 'eol' })
  else
    end_segment(chat)
    local row = line(chat, ('⚙ %s'):format(op.name or 'tool'), 'DshToolCard')
    chat.cards[op.callId or ''] =
      api.nvim_buf_set_extmark(chat.buf, M.ns, row, 0, { virt_text = vt, virt_text_pos = 'eol' })
  end
  if op.error then
    local msg = labels.first_line(op.text, 100)
    if msg ~= '' then
      line(chat, '  ↳ ' .. msg, 'DshToolError')
    end
  end
end

function R.turn_end(chat, op)
  end_segment(chat)
  blank(chat)
  local reason = op.reason or {}
  local head = reason.kind or '?'
  if reason.cause then
    head = head .. ' (' .. reason.cause .. ')'
  end
  local parts = { head }
  if reason.error then
    parts[#parts + 1] = (reason.error.code or 'error') .. ': ' .. labels.first_line(reason.error.message, 100)
  end
  if reason.kind == 'budget' then -- agent.budget stopped the turn before its next request (protocol.md §7)
    line(chat, M.budget_words(reason.budget), 'DshFooterError')
  end
  local u = op.usage
  if u then
    parts[#parts + 1] = ('%s in · %s out'):format(labels.tokens(u.inputTokens), labels.tokens(u.outputTokens))
    if (tonumber(u.cacheReadTokens) or 0) > 0 then
      parts[#parts + 1] = labels.tokens(u.cacheReadTokens) .. ' cached'
    end
    local cost = tonumber(u.costUsd)
    if cost then
      parts[#parts + 1] = cost >= 0.01 and ('$%.2f'):format(cost) or ('$%.6f'):format(cost)
    end
  end
  local ok = reason.kind == 'completed'
  line(chat, '── ' .. table.concat(parts, ' · ') .. ' ──', ok and 'DshFooter' or 'DshFooterError')
  chat.assistant_header = false
end

local BUDGET_UNITS = {
  costUsd = function(n)
    return (n >= 0.01 or n == 0) and ('$%.2f'):format(n) or ('$%.6f'):format(n) -- as the footer's cost
  end,
  tokens = function(n)
    return labels.tokens(n) .. ' tokens'
  end,
  steps = function(n)
    return ('%d model request%s'):format(n, n == 1 and '' or 's')
  end,
}

--- A `budget` turn end in words: which cap, what the turn used of it, what to do.
function M.budget_words(b)
  b = type(b) == 'table' and b or {}
  local limit = tostring(b.limit or '?')
  local unit = BUDGET_UNITS[limit] or function(n)
    return tostring(n) .. ' ' .. limit
  end
  local cap = type(b.cap) == 'number' and unit(b.cap) or '?'
  local used
  if type(b.used) == 'number' then
    used = 'used ' .. unit(b.used)
  elseif limit == 'costUsd' then
    used = 'the model has no price, so its cost is unknown'
  else
    used = 'used: unknown'
  end
  return ("⏹ Stopped: the turn's budget of %s is spent (%s) — raise agent.budget.%s to go on, or send a prompt to continue"):format(
    cap,
    used,
    limit
  )
end

--- The plan block: one per turn, at the turn's first plan update; each later update of that turn
--- rewrites it in place (a new turn's first update starts a new block below).
function R.plan(chat, op)
  local lines = plan.lines(op.plan)
  local texts = vim.tbl_map(function(l)
    return l[1]
  end, lines)
  local turn = type(op.plan) == 'table' and op.plan.turn or nil
  local b = chat.plan_block
  local row
  local pos = b and b.turn == turn and api.nvim_buf_get_extmark_by_id(chat.buf, M.ns_plan, b.mark, {}) or {}
  if pos[1] then
    row = pos[1]
    highlight.dirty(chat, row)
    api.nvim_buf_clear_namespace(chat.buf, M.ns_plan, row, row + b.count)
    api.nvim_buf_set_lines(chat.buf, row, row + b.count, false, texts)
    if chat.rmark and chat.rmark.row > row then -- an open reasoning segment below moved
      chat.rmark.row = chat.rmark.row + #texts - b.count
    end
  else
    end_segment(chat)
    if chat.last_op == 'turn_end' then -- after a turn's footer (a resumed chat): set apart
      blank(chat)
    end
    bol(chat)
    row = api.nvim_buf_line_count(chat.buf) - 1
    append(chat, table.concat(texts, '\n') .. '\n')
  end
  for i, l in ipairs(lines) do
    api.nvim_buf_set_extmark(chat.buf, M.ns_plan, row + i - 1, 0, { end_col = #l[1], hl_group = l[2] })
  end
  local mark = api.nvim_buf_set_extmark(chat.buf, M.ns_plan, row, 0, { right_gravity = false })
  chat.plan_block = { turn = turn, mark = mark, count = #lines }
end

--- A subagent's card (subagents.lua): written below its run_subagent card when the child starts,
--- rewritten in place as the child runs and when it ends.
function R.subagent(chat, op)
  local a = chat.state.subagents[op.callId or '']
  if not a then
    return
  end
  local subagents = require('dsh.subagents')
  local lines = subagents.lines(chat, a)
  local texts = vim.tbl_map(function(l)
    return l[1]
  end, lines)
  chat.subagent_blocks = chat.subagent_blocks or {}
  local b = chat.subagent_blocks[op.callId]
  local pos = b and api.nvim_buf_get_extmark_by_id(chat.buf, subagents.ns, b.mark, {}) or {}
  local row
  if pos[1] then
    row = pos[1]
    highlight.dirty(chat, row)
    api.nvim_buf_clear_namespace(chat.buf, M.ns_subagent, row, row + b.count)
    api.nvim_buf_set_lines(chat.buf, row, row + b.count, false, texts)
    if chat.rmark and chat.rmark.row > row then -- an open reasoning segment below moved
      chat.rmark.row = chat.rmark.row + #texts - b.count
    end
    api.nvim_buf_del_extmark(chat.buf, subagents.ns, b.mark)
  else
    end_segment(chat)
    bol(chat)
    row = api.nvim_buf_line_count(chat.buf) - 1
    append(chat, table.concat(texts, '\n') .. '\n')
  end
  for i, l in ipairs(lines) do
    api.nvim_buf_set_extmark(chat.buf, M.ns_subagent, row + i - 1, 0, { end_col = #l[1], hl_group = l[2] })
  end
  -- Right gravity: a card rewritten just above (children run at once) pushes this one down, never
  -- into its own lines.
  local mark = api.nvim_buf_set_extmark(chat.buf, subagents.ns, row, 0, { right_gravity = true })
  chat.subagent_blocks[op.callId] = { mark = mark, count = #lines }
end

--- A widening the person granted (`sandbox/widened`, protocol.md §16).
function R.widened(chat, op)
  end_segment(chat)
  local w = op.widened or {}
  local what = {}
  if type(w.writable) == 'table' and #w.writable > 0 then
    what[#what + 1] = 'writable: ' .. table.concat(w.writable, ', ')
  end
  if type(w.network) == 'table' and #w.network > 0 then
    what[#what + 1] = 'network: ' .. table.concat(w.network, ', ')
  end
  if w.unconfined then
    what[#what + 1] = 'unconfined'
  end
  local scope = w.scope == 'session' and 'for this session' or 'for this command'
  line(chat, ('⛨ sandbox widened %s: %s'):format(scope, table.concat(what, '; ')), 'DshNotice')
end

function R.retry(chat, op)
  end_segment(chat)
  local e = op.error or {}
  line(
    chat,
    ('↻ retry %s in %.1fs: %s %s'):format(op.retry or '?', (op.delayMs or 0) / 1000, e.code or '', labels.first_line(e.message, 80)),
    'DshNotice'
  )
end

function R.error(chat, op)
  end_segment(chat)
  local e = op.error or {}
  line(chat, '✗ ' .. (e.code or 'error') .. ': ' .. labels.first_line(e.message, 120), 'DshError')
end

function R.line(chat, op)
  end_segment(chat)
  line(chat, op.text, op.hl)
end

M.ops = R

-- ---- coalesced streaming -------------------------------------------------------------------------

--- Write the streamed text collected so far.
function M.flush(chat)
  local pending = chat.pending
  if not pending then
    return
  end
  chat.pending = nil
  if not api.nvim_buf_is_valid(chat.buf) then
    return
  end
  M.modify(chat, function()
    assistant(chat, pending.kind, table.concat(pending.parts))
  end)
  chat.last_op = pending.kind
end

--- Collect streamed text of `kind` ('text' | 'reasoning'); it is written within `render_interval`.
function M.stream(chat, kind, text)
  local pending = chat.pending
  if pending and pending.kind ~= kind then
    M.flush(chat)
    pending = nil
  end
  if not pending then
    pending = { kind = kind, parts = {} }
    chat.pending = pending
  end
  pending.parts[#pending.parts + 1] = text
  local interval = config.options.render_interval or 0
  if interval <= 0 then
    return M.flush(chat)
  end
  if not chat.flush_timer then
    chat.flush_timer = vim.uv.new_timer()
  end
  if not chat.flush_armed then
    chat.flush_armed = true
    chat.flush_timer:start(interval, 0, function()
      vim.schedule(function()
        chat.flush_armed = false
        M.flush(chat)
      end)
    end)
  end
end

--- Apply one render operation that writes to the buffer (streamed text is collected instead).
function M.apply(chat, op)
  if op.op == 'text' or op.op == 'reasoning' then
    return M.stream(chat, op.op, op.text)
  end
  M.flush(chat)
  M.modify(chat, function()
    R[op.op](chat, op)
  end)
  chat.last_op = op.op
end

return M
