-- A chat: the transcript buffer (nofile, markdown) that renders one session's events, and the input
-- buffer. A chat shown before its first prompt is a draft: it has no session (`id` nil) until the
-- prompt creates one (`bind`). Writing the buffer is render.lua's job, the windows layout.lua's, the
-- queue lines queueview.lua's; this module reduces events into render operations and keeps the
-- window bar.
local api = vim.api
local session = require('dsh.session')
local state = require('dsh.state')
local config = require('dsh.config')
local labels = require('dsh.labels')
local render = require('dsh.render')
local queueview = require('dsh.queueview')
local cuts = require('dsh.cuts')
local fences = require('dsh.fences')
local layout = require('dsh.layout')
local highlight = require('dsh.highlight')
local permissions = require('dsh.permissions')
local queue = require('dsh.queue')
local plan = require('dsh.plan')
local sandbox = require('dsh.sandbox')

local M = {}
M.ns = render.ns
M.ns_queue = queueview.ns

---@class dsh.Chat
---@field root string
---@field id string? the session (nil: a draft)
---@field short string
---@field state dsh.SessionState
---@field buf integer transcript buffer
---@field input integer input buffer
---@field cards table<string, integer> callId -> extmark id
---@field tools table<string, dsh.Tool> callId -> what the call did (cards.lua)
---@field attachments table[] selections waiting for the next prompt
local Chat = {}
Chat.__index = Chat
M.Chat = Chat

local drafts = 0

local function scratch(name, filetype, chat, kind)
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
  vim.b[buf].dsh_root = chat.root
  vim.b[buf].dsh_session = chat.id
  vim.b[buf].dsh_draft = (not chat.id) and chat.root or nil
  vim.b[buf].dsh_kind = kind
  state.hooks.buffer(chat, buf, kind)
  return buf
end

local function name_of(chat, kind)
  return 'dsh://' .. chat.short .. '/' .. kind
end

--- A chat of `session_id` (nil: a draft, whose session is made by its first prompt).
function Chat.new(root, session_id)
  local self = setmetatable({}, Chat)
  self.root = root
  self.id = session_id
  if not session_id then
    drafts = drafts + 1
    self.short = 'new-' .. drafts
  else
    self.short = session_id:sub(1, 8)
  end
  self.attachments = {}
  self.model = config.model() -- until a request says which model it used
  self.buf = scratch(name_of(self, 'chat'), 'markdown', self, 'chat')
  self.input = scratch(name_of(self, 'input'), 'markdown', self, 'input')
  vim.bo[self.buf].modifiable = false
  self.treesitter = highlight.treesitter(self.buf, config.options.treesitter)
  self:reset()
  return self
end

--- A draft gets its session: the buffers are renamed and marked, and the chat is found by the id.
function Chat:bind(session_id)
  self.id = session_id
  self.short = session_id:sub(1, 8)
  self.state = session.new(session_id)
  for kind, buf in pairs({ chat = self.buf, input = self.input }) do
    if api.nvim_buf_is_valid(buf) then
      vim.b[buf].dsh_session = session_id
      vim.b[buf].dsh_draft = nil
      pcall(api.nvim_buf_set_name, buf, name_of(self, kind))
    end
  end
  self:refresh_bar()
end

--- Forget everything rendered (before a fresh attach replays the history).
function Chat:reset()
  self.state = session.new(self.id or '')
  self.cards = {}
  self.tools = {}
  self.seg = nil
  self.rmark = nil
  self.pending = nil
  self.assistant_header = false
  self.empty = true
  self.qmark = nil
  self.last_op = nil
  self.fence_row = 0 -- the transcript rows fences.lua has looked at
  self.painted = 0 -- the transcript rows tree-sitter has painted (highlight.lua)
  self.seg_row = nil -- the first row of the segment streaming now
  self.older = nil -- {before = turn, mark = extmark} when older transcript turns can be loaded
  self.loading = nil -- events held while a transcript page is on its way
  self.left = nil -- detached when another session was shown instead (attach again to use it)
  self.plan_block = nil -- {turn, mark, count}: the transcript's plan block an update rewrites
  self.subagent_blocks = nil -- callId -> {mark, count}: a subagent's card (subagents.lua)
  self.hooks_noted = nil -- the `hooks/untrusted` noted in this transcript (hooks.lua)
  self.hooks_failed = nil -- hook|event -> true: the `hook/failed` warned of
  if api.nvim_buf_is_valid(self.buf) then
    vim.bo[self.buf].modifiable = true
    api.nvim_buf_clear_namespace(self.buf, render.ns, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, render.ns_soft, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, render.ns_plan, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, render.ns_subagent, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, require('dsh.subagents').ns, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, queueview.ns, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, highlight.ns_md, 0, -1)
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

--- Show the chat in the current tab (transcript + input) and focus the input.
function Chat:open()
  if not api.nvim_buf_is_valid(self.input) then -- wiped by hand: a fresh input
    self.input = scratch(name_of(self, 'input'), 'markdown', self, 'input')
  end
  return layout.open(self)
end

--- The window bar's parts: `dsh · title · state · ⚠ permission · N queued · read-only · ⚠ full-access`
--- (always shown), then `plan 1/3 · ctx 12% · model` (dropped first when the window is narrow).
--- Returns the parts and how many of them must stay.
function Chat:bar_text()
  local st = self.state
  local parts = { 'dsh', labels.title(self.title or (self.id and self.short) or 'new chat', 30) }
  parts[#parts + 1] = self.deleted and 'deleted' or st.status == 'running' and 'running…' or 'idle'
  local asking = self.id and permissions.count(self.id) or 0
  if asking > 0 then
    local key = config.key((config.options.keys.chat or {}).permission)
    parts[#parts + 1] = ('⚠ %s: %s'):format(asking == 1 and 'permission' or (asking .. ' permissions'), key or ':DshPermission')
  end
  local pending = session.pending(st)
  if pending > 0 then
    parts[#parts + 1] = pending .. ' queued'
  end
  if st.read_only then
    parts[#parts + 1] = 'read-only'
  end
  local mode = require('dsh.mode').bar_word(st.mode)
  if mode then -- what the agent may do: always in view
    parts[#parts + 1] = mode
  end
  local _, sb_warn = sandbox.describe(st.sandbox)
  if sb_warn then -- nothing confines commands, or they are refused: always in view
    parts[#parts + 1] = st.sandbox.mode == 'full-access' and '⚠ full-access' or '⚠ no sandbox: commands refused'
  end
  local keep = #parts
  local gauge = plan.gauge(st.plan)
  if gauge then
    parts[#parts + 1] = gauge
  end
  local ctx = M.context_gauge(st)
  if ctx then
    parts[#parts + 1] = ctx
  end
  local model = st.model or self.model
  if model then
    parts[#parts + 1] = model
  end
  return parts, keep
end

--- `ctx 12%` (of the model's window), or `ctx 15.2k` when the window is unknown; nil before any step.
function M.context_gauge(st)
  local c = st.context
  if not c then
    return nil
  end
  if c.window and c.window > 0 then
    return ('ctx %d%%'):format(math.floor(100 * c.used / c.window + 0.5))
  end
  return 'ctx ' .. labels.tokens(c.used)
end

--- The bar for a window `width` cells wide: the parts at the end (model, context gauge) go first
--- when it does not fit, so the state and a waiting permission always show.
local function fit_bar(parts, keep, width)
  local n = #parts
  while n > keep and vim.fn.strdisplaywidth(' ' .. table.concat(parts, ' · ', 1, n)) > width do
    n = n - 1
  end
  local shown = vim.list_slice(parts, 1, n)
  local over = vim.fn.strdisplaywidth(' ' .. table.concat(shown, ' · ')) - width
  if over > 0 then -- still too wide: the title gives way
    shown[2] = labels.title(shown[2], math.max(4, vim.fn.strchars(shown[2]) - over))
  end
  return (' ' .. table.concat(shown, ' · ')):gsub('%%', '%%%%')
end

function Chat:refresh_bar()
  if not api.nvim_buf_is_valid(self.buf) then
    return
  end
  local parts, keep = self:bar_text()
  vim.b[self.buf].dsh_status = self.state.status
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    vim.wo[win].winbar = fit_bar(parts, keep, api.nvim_win_get_width(win))
  end
  state.hooks.changed(self)
end

--- The queue lines and their docked float, after anything changed.
function Chat:refresh_queue()
  queueview.place(self)
end

--- After the transcript changed: the queue's virtual lines move to the new last line.
function Chat:after_change()
  queueview.place(self)
  fences.scan(self, self.treesitter)
end

-- ---- events --------------------------------------------------------------------------------------

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
    self:refresh_bar()
  elseif op.op == 'lease' then
    if op.was and not self.state.read_only then
      self:note('the other dsh-daemon let go: this window drives the session now')
    end
    self:refresh_bar()
  elseif op.op == 'title' then
    if type(op.title) == 'string' and op.title ~= '' then
      self.title = op.title
      self:refresh_bar()
    end
  elseif op.op == 'sandbox' then
    self:refresh_bar()
    pcall(vim.cmd.redrawstatus)
  elseif op.op == 'processes' then
    require('dsh.processes').changed(self)
  elseif op.op == 'plan_state' then
    self:refresh_bar()
    plan.changed(self)
  elseif op.op == 'turn_start' then
    render.flush(self)
    cuts.start(self, op.turn)
  elseif op.op == 'cut_turn' then -- a transcript page's turn a rewind took out of the history
    render.flush(self)
    cuts.mark(self, op.turn)
  elseif op.op == 'inbox' then
    self:refresh_queue()
    self:refresh_bar()
    queue.refresh(self)
  elseif render.ops[op.op] then
    if op.op == 'user' and not self.title then
      self.title = labels.first_line(op.text, 40)
      self:refresh_bar()
    end
    render.apply(self, op)
    if op.op == 'plan' then
      self:refresh_bar()
      plan.changed(self)
    end
  end
end

--- Write what was streamed so far (tests and callers that read the buffer right away).
function Chat:flush()
  render.flush(self)
end

-- ---- transcript pages (dsh/session/transcript) ----------------------------------------------------

local function older_text(before)
  local key = config.key((config.options.keys.chat or {}).older)
  return ('↑ turns before %d not shown: %s:DshOlder loads them'):format(before, key and (key .. ' or ') or '')
end

--- Render a page (newest turn first, as the daemon sends it) at the end of the transcript.
function Chat:render_page(page)
  local turns = page.turns or {}
  for i = #turns, 1, -1 do
    for _, op in ipairs(session.turn_ops(self.state, turns[i])) do
      self:render(op)
    end
  end
  self:flush()
end

--- Show the newest page of a session after an attach with `replay: "none"`: durable events up to
--- the page's `lastSeq` are in it; the events held meanwhile continue it.
function Chat:show_transcript(page)
  local turns = page.turns or {}
  if page.hasMore and turns[#turns] then
    local row = 0
    render.modify(self, function()
      row = render.line(self, older_text(turns[#turns].turn), 'DshNotice')
    end)
    self.older = { before = turns[#turns].turn, mark = api.nvim_buf_set_extmark(self.buf, render.ns, row, 0, {}) }
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
  tmp.after_change = function() end
  tmp.refresh_bar = function() end
  tmp.cards, tmp.tools, tmp.empty, tmp.state = {}, {}, true, session.new(self.id)
  local turns = page.turns or {}
  local again = page.hasMore and turns[#turns] and turns[#turns].turn
  if again then
    render.modify(tmp, function()
      render.line(tmp, older_text(again), 'DshNotice')
    end)
  end
  tmp:render_page(page)
  local lines = api.nvim_buf_get_lines(tmp.buf, 0, -1, false)
  local marks = api.nvim_buf_get_extmarks(tmp.buf, render.ns, 0, -1, { details = true })
  api.nvim_buf_delete(tmp.buf, { force = true })
  local pos = api.nvim_buf_get_extmark_by_id(self.buf, render.ns, older.mark, {})
  local row = pos[1] or 0
  pcall(api.nvim_buf_clear_namespace, self.buf, render.ns, row, row + 1)
  -- The page ends with an empty line: it replaces the empty line after the marker too.
  local after = api.nvim_buf_get_lines(self.buf, row + 1, row + 2, false)[1]
  vim.bo[self.buf].modifiable = true
  local replaced = (after == '' and lines[#lines] == '') and 2 or 1
  api.nvim_buf_set_lines(self.buf, row, row + replaced, false, lines)
  local ids = {}
  for call_id, id in pairs(tmp.cards) do
    ids[id] = call_id
  end
  for _, m in ipairs(marks) do
    local d = m[4]
    local id = api.nvim_buf_set_extmark(self.buf, render.ns, row + m[2], m[3], {
      end_row = d.end_row and (row + d.end_row) or nil,
      end_col = d.end_col,
      hl_group = d.hl_group,
      priority = d.priority,
      virt_text = d.virt_text,
      virt_text_pos = d.virt_text_pos,
    })
    if ids[m[1]] then -- an older card: `K` expands it too
      self.cards[ids[m[1]]] = id
      self.tools[ids[m[1]]] = tmp.tools[ids[m[1]]]
    end
  end
  vim.bo[self.buf].modifiable = false
  fences.scan_range(self, row, row + #lines, self.treesitter)
  self.fence_row = (self.fence_row or 0) + #lines - replaced
  self.painted = (self.painted or 0) + #lines - replaced
  if self.treesitter then
    highlight.paint(self.buf, row, row + #lines)
  end
  self.older = again and { before = again, mark = api.nvim_buf_set_extmark(self.buf, render.ns, row, 0, {}) } or nil
end

--- A plain line in the transcript (notes from the plugin itself).
function Chat:note(text, hl)
  self:render({ op = 'line', text = text, hl = hl or 'DshNotice' })
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
