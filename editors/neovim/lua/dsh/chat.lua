-- The chat: a transcript buffer (nofile, markdown) that renders a session's events, and an input
-- buffer below it. Deltas are appended with nvim_buf_set_text; windows whose cursor was on the last
-- line follow the end. Reasoning is dimmed, tool calls are cards whose status is an extmark, each
-- turn ends with a footer (stop reason, tokens, cost), and the queue is shown as virtual lines under
-- the last line.
local api = vim.api
local session = require('dsh.session')
local config = require('dsh.config')

local M = {}
M.ns = api.nvim_create_namespace('dsh.chat')
M.ns_queue = api.nvim_create_namespace('dsh.queue')

function M.highlights()
  local function link(name, to)
    api.nvim_set_hl(0, name, { link = to, default = true })
  end
  link('DshReasoning', 'Comment')
  link('DshToolCard', 'Special')
  link('DshToolRunning', 'DiagnosticWarn')
  link('DshToolOk', 'DiagnosticOk')
  link('DshToolError', 'DiagnosticError')
  link('DshFooter', 'NonText')
  link('DshFooterError', 'DiagnosticError')
  link('DshContext', 'Directory')
  link('DshNotice', 'Comment')
  link('DshQueue', 'Comment')
  link('DshQueueLabel', 'DiagnosticHint')
  link('DshError', 'DiagnosticError')
  link('DshEditFlash', 'DiffText')
end

---@class dsh.Chat
---@field root string
---@field id string
---@field short string
---@field state dsh.SessionState
---@field buf integer transcript buffer
---@field input integer input buffer
---@field cards table<string, integer> callId -> extmark id
---@field attachments table[] selections waiting for the next prompt
local Chat = {}
Chat.__index = Chat
M.Chat = Chat

local function scratch(name, filetype, root, sid)
  local old = vim.fn.bufnr('^' .. vim.pesc(name) .. '$')
  if old ~= -1 then
    pcall(api.nvim_buf_delete, old, { force = true })
  end
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  pcall(api.nvim_buf_set_name, buf, name)
  vim.bo[buf].filetype = filetype
  vim.b[buf].dsh_root = root
  vim.b[buf].dsh_session = sid
  return buf
end

function Chat.new(root, session_id)
  local self = setmetatable({}, Chat)
  self.root = root
  self.id = session_id
  self.short = session_id:sub(1, 8)
  self.attachments = {}
  self.buf = scratch('dsh://' .. self.short .. '/chat', 'markdown', root, session_id)
  self.input = scratch('dsh://' .. self.short .. '/input', 'markdown', root, session_id)
  vim.b[self.buf].dsh_kind = 'chat'
  vim.b[self.input].dsh_kind = 'input'
  vim.bo[self.buf].modifiable = false
  self:reset()
  require('dsh').chat_keys(self, self.buf, false)
  require('dsh').chat_keys(self, self.input, true)
  return self
end

--- Forget everything rendered (before a fresh attach replays the history).
function Chat:reset()
  self.state = session.new(self.id)
  self.cards = {}
  self.seg = nil
  self.rmark = nil
  self.assistant_header = false
  self.empty = true
  self.qmark = nil
  self.last_op = nil
  self.older = nil -- {before = turn, mark = extmark} when older transcript turns can be loaded
  self.loading = nil -- events held while a transcript page is on its way
  self.left = nil -- detached when another session was shown instead (attach again to use it)
  if api.nvim_buf_is_valid(self.buf) then
    vim.bo[self.buf].modifiable = true
    api.nvim_buf_clear_namespace(self.buf, M.ns, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, M.ns_queue, 0, -1)
    api.nvim_buf_set_lines(self.buf, 0, -1, false, {})
    vim.bo[self.buf].modifiable = false
  end
end

-- ---- windows -------------------------------------------------------------------------------------

function Chat:windows()
  local wins = {}
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == self.buf then
      wins[#wins + 1] = win
    end
  end
  return wins
end

local function input_window(self)
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == self.input then
      return win
    end
  end
end

--- Show the chat in the current tab (transcript + input) and focus the input.
function Chat:open()
  local opts = config.options
  if not api.nvim_buf_is_valid(self.input) then -- wiped by hand: a fresh input
    self.input = scratch('dsh://' .. self.short .. '/input', 'markdown', self.root, self.id)
    vim.b[self.input].dsh_kind = 'input'
    require('dsh').chat_keys(self, self.input, true)
  end
  local win = self:windows()[1]
  if not win then
    -- Another chat shown in this tab: show this one in its windows instead of opening more.
    for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
      local b = api.nvim_win_get_buf(w)
      if vim.b[b].dsh_kind == 'chat' then
        api.nvim_win_set_buf(w, self.buf)
        win = w
      elseif vim.b[b].dsh_kind == 'input' then
        api.nvim_win_set_buf(w, self.input)
      end
    end
  end
  if not win then
    if opts.layout == 'tab' then
      vim.cmd('tab sbuffer ' .. self.buf)
    elseif opts.layout == 'split' then
      vim.cmd('botright sbuffer ' .. self.buf)
      api.nvim_win_set_height(0, math.max(8, math.floor(vim.o.lines * opts.height)))
    else
      vim.cmd('botright vertical sbuffer ' .. self.buf)
      api.nvim_win_set_width(0, math.max(30, math.floor(vim.o.columns * opts.width)))
    end
    win = api.nvim_get_current_win()
    local wo = vim.wo[win]
    wo.wrap, wo.linebreak, wo.number, wo.relativenumber = true, true, false, false
    wo.signcolumn, wo.foldcolumn, wo.spell, wo.list = 'no', '0', false, false
    wo.conceallevel = 2
    local n = api.nvim_buf_line_count(self.buf)
    api.nvim_win_set_cursor(win, { n, 0 })
  end
  local iwin = input_window(self)
  if not iwin then
    api.nvim_set_current_win(win)
    vim.cmd('belowright sbuffer ' .. self.input)
    iwin = api.nvim_get_current_win()
    api.nvim_win_set_height(iwin, opts.input_height)
    local wo = vim.wo[iwin]
    wo.winfixheight, wo.number, wo.relativenumber, wo.signcolumn = true, false, false, 'no'
    wo.winbar = ' <CR> send · <M-CR> steer · <C-c> stop · gq queue'
  end
  self:_winbar()
  api.nvim_set_current_win(iwin)
end

function Chat:_winbar()
  local st = self.state
  local parts = { 'dsh', self.title or self.short }
  parts[#parts + 1] = self.deleted and 'deleted' or st.status == 'running' and 'running…' or 'idle'
  local pending = session.pending(st)
  if pending > 0 then
    parts[#parts + 1] = pending .. ' queued'
  end
  if st.read_only then
    parts[#parts + 1] = 'read-only'
  end
  local bar = ' ' .. table.concat(parts, ' · '):gsub('%%', '%%%%')
  vim.b[self.buf].dsh_status = st.status
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    vim.wo[win].winbar = bar
  end
end

-- ---- buffer writing ------------------------------------------------------------------------------

--- Run `fn` with the transcript modifiable; windows whose cursor was on the last line follow the end.
function Chat:_modify(fn)
  local buf = self.buf
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
  self:_place_queue()
  if not ok then
    error(err)
  end
end

function Chat:_last()
  local row = api.nvim_buf_line_count(self.buf) - 1
  return row, api.nvim_buf_get_lines(self.buf, row, row + 1, false)[1] or ''
end

--- Append `text` at the very end; returns the range it covers (0-based, end exclusive).
function Chat:_append(text)
  text = text:gsub('\r\n?', '\n')
  local row, line = self:_last()
  local col = #line
  local lines = vim.split(text, '\n', { plain = true })
  api.nvim_buf_set_text(self.buf, row, col, row, col, lines)
  self.empty = false
  local erow = row + #lines - 1
  local ecol = #lines == 1 and col + #lines[1] or #lines[#lines]
  return row, col, erow, ecol
end

--- Make sure the end is at the start of an empty line.
function Chat:_bol()
  if self.empty then
    return
  end
  local _, line = self:_last()
  if line ~= '' then
    self:_append('\n')
  end
end

--- Make sure an empty line separates what comes next from what is there.
function Chat:_blank()
  if self.empty then
    return
  end
  self:_bol()
  local row = api.nvim_buf_line_count(self.buf) - 1
  if row >= 1 and api.nvim_buf_get_lines(self.buf, row - 1, row, false)[1] ~= '' then
    self:_append('\n')
  end
end

--- A whole line (highlighted with `hl`); returns its row.
function Chat:_line(text, hl)
  self:_bol()
  local row, _, erow, ecol = self:_append((text:gsub('\n', ' ')))
  if hl then
    api.nvim_buf_set_extmark(self.buf, M.ns, row, 0, { end_row = erow, end_col = ecol, hl_group = hl })
  end
  self:_append('\n')
  return row
end

function Chat:_end_segment()
  if self.seg == 'reasoning' then
    self:_blank()
  elseif self.seg == 'text' then
    self:_bol()
  end
  self.seg = nil
  self.rmark = nil
end

-- ---- labels --------------------------------------------------------------------------------------

local function rel(root, uri)
  local ok, path = pcall(vim.uri_to_fname, uri or '')
  if not ok or not path or path == '' then
    return uri or '?'
  end
  if root and vim.startswith(path, root .. '/') then
    return path:sub(#root + 2)
  end
  return vim.fn.fnamemodify(path, ':~')
end
M.rel = rel

local function first_line(text, width)
  local line = vim.trim(((text or ''):match('^%s*([^\n]*)') or ''))
  if width and vim.fn.strchars(line) > width then
    line = vim.fn.strcharpart(line, 0, width - 1) .. '…'
  end
  return line
end
M.first_line = first_line

--- Where an editor context message points: `path[:lines]` (a range ending at character 0 does not
--- count the line it ends on).
local function context_where(root, source)
  local where = rel(root, source.uri)
  local r = source.range
  if r and r.start and r['end'] then
    local l1, l2 = r.start.line + 1, r['end'].line + 1
    if r['end'].character == 0 and l2 > l1 then
      l2 = l2 - 1
    end
    where = where .. ':' .. (l1 == l2 and tostring(l1) or (l1 .. '-' .. l2))
  end
  return where
end

--- A one-line label for an editor context message.
function M.context_label(root, source, _text)
  local kind = source.contextKind or 'context'
  local where = context_where(root, source)
  if kind == 'snapshot' then
    return 'editor snapshot (' .. where .. ')'
  end
  return kind .. ' ' .. where
end

local SHORT_KIND = { selection = 'sel', file = 'file', diagnostics = 'diag', snapshot = 'snapshot' }

--- The context a queued item carries, compactly: `+ sel app.py:10-14, file notes.md` ('' for none).
function M.context_summary(root, context)
  if type(context) ~= 'table' or #context == 0 then
    return ''
  end
  local parts = {}
  for _, m in ipairs(context) do
    local source = m.source or {}
    local kind = source.contextKind or source.kind or 'context'
    parts[#parts + 1] = (SHORT_KIND[kind] or kind) .. ' ' .. context_where(root, source)
  end
  return '+ ' .. table.concat(parts, ', ')
end

--- How a pending item was sent (`verb` of the inbox item; older daemons: inferred from the list).
function M.verb_of(message, target)
  if type(message.verb) == 'string' then
    return message.verb, true
  end
  local source = message.source or {}
  if target == 'next-turn' then
    return 'followup', false
  elseif source.kind == 'editor' then
    return 'context', false
  end
  return message.wakeup == true and 'steer' or 'inject', false
end

--- A one-line preview of a pending message.
function M.preview(root, message, width)
  local source = message.source or { kind = 'user' }
  local text = session.text_of(message)
  if source.kind == 'editor' then
    return '📎 ' .. M.context_label(root, source, text)
  end
  return first_line(text, width or 72)
end

local function summary(root, arguments)
  local args = arguments
  if type(args) == 'string' then
    local ok, decoded = pcall(vim.json.decode, args)
    args = ok and decoded or args
  end
  if type(args) == 'table' then
    local main = args.path or args.command or args.pattern or args.glob or args.query
    if type(main) == 'string' then
      if args.path and root and vim.startswith(main, root .. '/') then
        main = main:sub(#root + 2)
      end
      return first_line(main, 80)
    end
    return first_line(vim.json.encode(args), 60)
  end
  return first_line(tostring(args or ''), 60)
end

local function fmt_tokens(n)
  n = tonumber(n) or 0
  if n >= 10000 then
    return ('%.1fk'):format(n / 1000)
  end
  return tostring(n)
end

-- ---- render operations ---------------------------------------------------------------------------

local R = {}

function R.user(self, op)
  self:_end_segment()
  self:_blank()
  if self.last_op ~= 'user' then -- several prompts entering one step share a heading
    self:_line('## You')
  end
  self:_append(op.text)
  self:_append('\n')
  self.assistant_header = false
end

function R.context(self, op)
  self:_end_segment()
  if self.last_op == 'turn_end' then
    self:_blank()
  end
  self:_line('📎 ' .. M.context_label(self.root, op.source, op.text), 'DshContext')
end

function R.notice(self, op)
  self:_end_segment()
  self:_line('ℹ ' .. first_line(op.text, 100), 'DshNotice')
end

local assistant_header

local function assistant(self, kind, text)
  assistant_header(self)
  if self.seg ~= kind then
    self:_end_segment()
    self:_bol()
    self.seg = kind
    if kind == 'reasoning' then
      local row, line = self:_last()
      self.rmark = { row = row, col = #line }
    end
  end
  local _, _, erow, ecol = self:_append(text)
  if kind == 'reasoning' and self.rmark then
    self.rmark.id = api.nvim_buf_set_extmark(self.buf, M.ns, self.rmark.row, self.rmark.col, {
      id = self.rmark.id,
      end_row = erow,
      end_col = ecol,
      hl_group = 'DshReasoning',
      priority = 300,
    })
  end
end

function R.text(self, op)
  assistant(self, 'text', op.text)
end

function R.reasoning(self, op)
  assistant(self, 'reasoning', op.text)
end

function R.assistant_end(self, op)
  if op.interrupted then
    self:_end_segment()
    self:_line('(interrupted)', 'DshNotice')
  end
end

function assistant_header(self)
  if not self.assistant_header then
    self:_end_segment()
    self:_blank()
    self:_line('## dsh')
    self.assistant_header = true
  end
end

function R.tool_call(self, op)
  assistant_header(self)
  self:_end_segment()
  local row = self:_line(('⚙ %s  %s'):format(op.name or 'tool', summary(self.root, op.arguments)), 'DshToolCard')
  self.cards[op.callId or ''] = api.nvim_buf_set_extmark(self.buf, M.ns, row, 0, {
    virt_text = { { op.synthetic and '  not run' or '  running…', 'DshToolRunning' } },
    virt_text_pos = 'eol',
  })
end

local function diff_counts(diff)
  local add, del = 0, 0
  for line in (diff or ''):gmatch('[^\n]+') do
    if line:match('^%+') and not line:match('^%+%+%+') then
      add = add + 1
    elseif line:match('^%-') and not line:match('^%-%-%-') then
      del = del + 1
    end
  end
  return add, del
end

function R.tool_output(self, op)
  local id = self.cards[op.callId or '']
  local pos = id and api.nvim_buf_get_extmark_by_id(self.buf, M.ns, id, {}) or {}
  if not pos[1] then
    return
  end
  self.outputs = self.outputs or {}
  local tail = ((self.outputs[op.callId] or '') .. (op.text or '')):sub(-400)
  self.outputs[op.callId] = tail
  local last = ''
  for line in tail:gmatch('[^\n]+') do
    if vim.trim(line) ~= '' then
      last = line
    end
  end
  api.nvim_buf_set_extmark(self.buf, M.ns, pos[1], pos[2], {
    id = id,
    virt_text = { { '  running… ', 'DshToolRunning' }, { first_line(last, 60), 'DshNotice' } },
    virt_text_pos = 'eol',
  })
end

function R.tool_result(self, op)
  local vt
  if op.error then
    vt = { { '  ✗ ' .. (op.error.code or 'error'), 'DshToolError' } }
  else
    local extra = ''
    if op.meta and op.meta.diff then
      local add, del = diff_counts(op.meta.diff)
      extra = (' +%d −%d'):format(add, del)
    end
    vt = { { '  ✓ ok' .. extra, 'DshToolOk' } }
  end
  local id = self.cards[op.callId or '']
  local pos = id and api.nvim_buf_get_extmark_by_id(self.buf, M.ns, id, {}) or {}
  if pos[1] then
    api.nvim_buf_set_extmark(self.buf, M.ns, pos[1], pos[2], { id = id, virt_text = vt, virt_text_pos = 'eol' })
  else
    self:_end_segment()
    local row = self:_line(('⚙ %s'):format(op.name or 'tool'), 'DshToolCard')
    self.cards[op.callId or ''] =
      api.nvim_buf_set_extmark(self.buf, M.ns, row, 0, { virt_text = vt, virt_text_pos = 'eol' })
  end
  if op.error then
    local msg = first_line(op.text, 100)
    if msg ~= '' then
      self:_line('  ↳ ' .. msg, 'DshToolError')
    end
  end
end

function R.turn_end(self, op)
  self:_end_segment()
  self:_blank()
  local reason = op.reason or {}
  local head = reason.kind or '?'
  if reason.cause then
    head = head .. ' (' .. reason.cause .. ')'
  end
  local parts = { head }
  if reason.error then
    parts[#parts + 1] = (reason.error.code or 'error') .. ': ' .. first_line(reason.error.message, 100)
  end
  local u = op.usage
  if u then
    parts[#parts + 1] = ('%s in · %s out'):format(fmt_tokens(u.inputTokens), fmt_tokens(u.outputTokens))
    if (tonumber(u.cacheReadTokens) or 0) > 0 then
      parts[#parts + 1] = fmt_tokens(u.cacheReadTokens) .. ' cached'
    end
    local cost = tonumber(u.costUsd)
    if cost then
      parts[#parts + 1] = cost >= 0.01 and ('$%.2f'):format(cost) or ('$%.6f'):format(cost)
    end
  end
  local ok = reason.kind == 'completed'
  self:_line('── ' .. table.concat(parts, ' · ') .. ' ──', ok and 'DshFooter' or 'DshFooterError')
  self.assistant_header = false
end

function R.retry(self, op)
  self:_end_segment()
  local e = op.error or {}
  self:_line(
    ('↻ retry %s in %.1fs: %s %s'):format(op.retry or '?', (op.delayMs or 0) / 1000, e.code or '', first_line(e.message, 80)),
    'DshNotice'
  )
end

function R.error(self, op)
  self:_end_segment()
  local e = op.error or {}
  self:_line('✗ ' .. (e.code or 'error') .. ': ' .. first_line(e.message, 120), 'DshError')
end

function R.line(self, op)
  self:_end_segment()
  self:_line(op.text, op.hl)
end

--- Apply one `dsh/event` to this chat (held while a transcript page is being fetched).
function Chat:on_event(ev)
  if self.loading then
    table.insert(self.loading, ev)
    return
  end
  local ops = session.reduce(self.state, ev)
  for _, op in ipairs(ops) do
    self:render(op)
  end
end

function Chat:render(op)
  if not api.nvim_buf_is_valid(self.buf) then
    return
  end
  if op.op == 'status' then
    self:_winbar()
  elseif op.op == 'lease' then
    if op.was and not self.state.read_only then
      self:note('the other dsh-daemon let go: this window drives the session now')
    end
    self:_winbar()
  elseif op.op == 'title' then
    if type(op.title) == 'string' and op.title ~= '' then
      self.title = op.title
      self:_winbar()
    end
  elseif op.op == 'inbox' then
    self:_place_queue()
    self:_winbar()
    require('dsh.queue').refresh(self)
  elseif R[op.op] then
    if op.op == 'user' and not self.title then
      self.title = first_line(op.text, 40)
      self:_winbar()
    end
    self:_modify(function()
      R[op.op](self, op)
    end)
    self.last_op = op.op
  end
end

-- ---- transcript pages (dsh/session/transcript) ----------------------------------------------------

local function older_text(before)
  return ('↑ turns before %d not shown: go (or :DshOlder) loads them'):format(before)
end

--- Render a page (newest turn first, as the daemon sends it) at the end of the transcript.
function Chat:render_page(page)
  local turns = page.turns or {}
  for i = #turns, 1, -1 do
    for _, op in ipairs(session.turn_ops(self.state, turns[i])) do
      self:render(op)
    end
  end
end

--- Show the newest page of a session after an attach with `replay: "none"`: durable events up to
--- the page's `lastSeq` are in it; the events held meanwhile continue it.
function Chat:show_transcript(page)
  local turns = page.turns or {}
  if page.hasMore and turns[#turns] then
    local row = 0
    self:_modify(function()
      row = self:_line(older_text(turns[#turns].turn), 'DshNotice')
    end)
    self.older = { before = turns[#turns].turn, mark = api.nvim_buf_set_extmark(self.buf, M.ns, row, 0, {}) }
  end
  self:render_page(page)
  self.state.rendered_seq = tonumber(page.lastSeq)
end

--- Put an older page above what is shown: it is rendered in a scratch chat, then its lines and
--- highlights replace the "turns before N" line at the top.
function Chat:prepend_page(page)
  local older = self.older
  if not older or not api.nvim_buf_is_valid(self.buf) then
    return
  end
  local tmp = setmetatable({
    root = self.root,
    id = self.id,
    title = self.title or self.short,
    short = self.short,
    attachments = {},
    buf = api.nvim_create_buf(false, true),
  }, Chat)
  tmp.cards, tmp.empty, tmp.state = {}, true, session.new(self.id)
  local turns = page.turns or {}
  local again = page.hasMore and turns[#turns] and turns[#turns].turn
  if again then
    tmp:_modify(function()
      tmp:_line(older_text(again), 'DshNotice')
    end)
  end
  tmp:render_page(page)
  local lines = api.nvim_buf_get_lines(tmp.buf, 0, -1, false)
  local marks = api.nvim_buf_get_extmarks(tmp.buf, M.ns, 0, -1, { details = true })
  api.nvim_buf_delete(tmp.buf, { force = true })
  local pos = api.nvim_buf_get_extmark_by_id(self.buf, M.ns, older.mark, {})
  local row = pos[1] or 0
  pcall(api.nvim_buf_clear_namespace, self.buf, M.ns, row, row + 1)
  -- The page ends with an empty line: it replaces the empty line after the marker too.
  local after = api.nvim_buf_get_lines(self.buf, row + 1, row + 2, false)[1]
  vim.bo[self.buf].modifiable = true
  api.nvim_buf_set_lines(self.buf, row, (after == '' and lines[#lines] == '') and row + 2 or row + 1, false, lines)
  for _, m in ipairs(marks) do
    local d = m[4]
    api.nvim_buf_set_extmark(self.buf, M.ns, row + m[2], m[3], {
      end_row = d.end_row and (row + d.end_row) or nil,
      end_col = d.end_col,
      hl_group = d.hl_group,
      priority = d.priority,
      virt_text = d.virt_text,
      virt_text_pos = d.virt_text_pos,
    })
  end
  vim.bo[self.buf].modifiable = false
  self.older = again and { before = again, mark = api.nvim_buf_set_extmark(self.buf, M.ns, row, 0, {}) } or nil
end

--- A plain line in the transcript (notes from the plugin itself).
function Chat:note(text, hl)
  self:render({ op = 'line', text = text, hl = hl or 'DshNotice' })
end

-- ---- the queue as virtual lines ------------------------------------------------------------------

local MAX_QUEUE_LINES = 8

function Chat:queue_lines()
  local lines = {}
  local function add(label, message)
    local line = { { label, 'DshQueueLabel' }, { M.preview(self.root, message), 'DshQueue' } }
    local ctx = M.context_summary(self.root, message.context)
    if ctx ~= '' then
      line[#line + 1] = { '  ' .. ctx, 'DshContext' }
    end
    lines[#lines + 1] = line
  end
  for _, m in ipairs(self.state.inbox['next-step']) do
    local verb, known = M.verb_of(m, 'next-step')
    add(known and ('  ⧗ next step · ' .. verb .. '  ') or '  ⧗ next step  ', m)
  end
  for i, m in ipairs(self.state.inbox['next-turn']) do
    local verb, known = M.verb_of(m, 'next-turn')
    add(known and ('  ⧗ queued %d · %s  '):format(i, verb) or ('  ⧗ queued %d   '):format(i), m)
  end
  for _, a in ipairs(self.attachments) do
    lines[#lines + 1] = { { '  ⧗ with next prompt  ', 'DshQueueLabel' }, { '📎 ' .. a.label, 'DshQueue' } }
  end
  if #lines > MAX_QUEUE_LINES then
    local more = #lines - (MAX_QUEUE_LINES - 1)
    lines = vim.list_slice(lines, 1, MAX_QUEUE_LINES - 1)
    lines[#lines + 1] = { { '  ⧗ ', 'DshQueueLabel' }, { ('… %d more (gq opens the queue)'):format(more), 'DshQueue' } }
  end
  return lines
end

function Chat:_place_queue()
  if not api.nvim_buf_is_valid(self.buf) then
    return
  end
  local lines = self:queue_lines()
  if #lines == 0 then
    if self.qmark then
      pcall(api.nvim_buf_del_extmark, self.buf, M.ns_queue, self.qmark)
      self.qmark = nil
    end
    return
  end
  local row = api.nvim_buf_line_count(self.buf) - 1
  self.qmark = api.nvim_buf_set_extmark(self.buf, M.ns_queue, row, 0, { id = self.qmark, virt_lines = lines })
end

-- ---- input ---------------------------------------------------------------------------------------

--- The input text (trimmed), clearing the input buffer; nil when empty.
function Chat:take_input()
  local text = vim.trim(table.concat(api.nvim_buf_get_lines(self.input, 0, -1, false), '\n'))
  if text == '' then
    return nil
  end
  api.nvim_buf_set_lines(self.input, 0, -1, false, { '' })
  return text
end

--- Put text back into the input (a send that failed must not lose what was typed).
function Chat:restore_input(text)
  local current = table.concat(api.nvim_buf_get_lines(self.input, 0, -1, false), '\n')
  local lines = vim.split(text, '\n', { plain = true })
  if vim.trim(current) ~= '' then
    vim.list_extend(lines, vim.split(current, '\n', { plain = true }))
  end
  api.nvim_buf_set_lines(self.input, 0, -1, false, lines)
end

--- The transcript as lines (tests and debugging).
function Chat:lines()
  return api.nvim_buf_get_lines(self.buf, 0, -1, false)
end

return M
