-- dsh.nvim: a chat with the dsh-daemon agent on Neovim's built-in LSP client.
--   require('dsh').setup{ cmd = {'dsh-daemon'}, init_options = {...} }
-- See editors/neovim/README.md for keys and commands.
local api = vim.api
local config = require('dsh.config')
local client = require('dsh.client')
local session = require('dsh.session')

local M = {}

---@type table<string, dsh.Chat> sessionId -> chat
M.chats = {}
---@type table<string, string> root -> sessionId of its current chat
M.current = {}

local function notify(msg, level)
  vim.notify('dsh: ' .. msg, level or vim.log.levels.INFO)
end

-- ---- chats ---------------------------------------------------------------------------------------

function M.get_chat(session_id, root)
  local chat = M.chats[session_id]
  if not chat or not api.nvim_buf_is_valid(chat.buf) then
    chat = require('dsh.chat').Chat.new(root, session_id)
    M.chats[session_id] = chat
  end
  return chat
end

--- The chat of a buffer: its own (chat/input/queue buffers), else the current one of its root.
function M.chat_for(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local sid = vim.b[buf].dsh_session
  local chat = sid and M.chats[sid]
  if chat and chat.deleted then
    chat = nil -- its session is gone: the current one of the root (none: the next prompt makes one)
  end
  if not chat then
    local current = M.current[client.root_for(buf)]
    chat = current and M.chats[current]
  end
  if chat and not api.nvim_buf_is_valid(chat.buf) then
    -- The transcript was wiped by hand: attach again, which renders it anew.
    M.chats[chat.id] = nil
    chat = M.resume(chat.root, chat.id, { title = chat.title })
  elseif chat and chat.left then
    -- Detached when another session was shown: attach again before using it.
    chat = M.resume(chat.root, chat.id, { title = chat.title })
  end
  return chat
end

--- Another session is shown for `root` instead of its current one: detach that one, so this
--- window neither follows it nor keeps it leased (another window may drive it); it is attached
--- again when used.
local function leave_current(root, next_id)
  local prev = M.current[root]
  if not prev or prev == next_id or not (client.info(root) or {}).detach then
    return
  end
  client.request(root, 'dsh/session/detach', { sessionId = prev }, function(err)
    if err then
      notify('detach failed: ' .. (err.message or ''), vim.log.levels.WARN)
    end
  end)
  local chat = M.chats[prev]
  if chat then
    chat.left = true
  end
end

--- Start a new session for `root` and show its chat (`keep_focus`: stay in the current window).
function M.new_session(root, cb, keep_focus)
  client.request(root, 'dsh/session/new', { cwd = root }, function(err, res)
    if err then
      return notify('could not start a session: ' .. (err.message or ''), vim.log.levels.ERROR)
    end
    leave_current(root, res.sessionId)
    local chat = M.get_chat(res.sessionId, root)
    M.current[root] = res.sessionId
    local win = api.nvim_get_current_win()
    chat:open()
    M.forget_deleted(root)
    if keep_focus and api.nvim_win_is_valid(win) then
      api.nvim_set_current_win(win)
    end
    if cb then
      cb(chat)
    end
  end)
end

--- Call `cb(chat)` with the chat of the current buffer, starting a session when there is none.
function M.with_chat(cb, buf, keep_focus)
  local chat = M.chat_for(buf)
  if chat then
    return cb(chat)
  end
  M.new_session(client.root_for(buf or 0), cb, keep_focus)
end

-- ---- events from the daemon ----------------------------------------------------------------------

function M.on_event(_root, ev)
  local chat = M.chats[ev.sessionId]
  if not chat then
    return
  end
  chat:on_event(ev)
  if ev.type == 'tool/result' then
    local d = ev.data or {}
    local call_id = d.callId or vim.tbl_get(d, 'message', 'source', 'callId')
    if call_id then
      require('dsh.permissions').resolved(ev.sessionId, call_id)
    end
  elseif ev.type == 'permission/resolved' then -- answered here, elsewhere, timed out or cancelled
    local call_id = (ev.data or {}).callId
    if call_id then
      require('dsh.permissions').resolved(ev.sessionId, call_id, true)
    end
  elseif ev.type == 'turn/end' then
    require('dsh.permissions').resolved(ev.sessionId)
  end
end

--- Permission requests the daemon still has open for a chat that attached again (daemons with
--- `permissionEvents`): shown unless this Neovim shows them already.
local function reopen_permissions(chat, res)
  if not (client.info(chat.root) or {}).permissionEvents or res.readOnly then
    return
  end
  for _, params in ipairs(res.permissionRequests or {}) do
    if type(params) == 'table' and params.callId then
      params.sessionId = params.sessionId or chat.id
      require('dsh.permissions').reopen(chat.root, params)
    end
  end
end

function M.on_client_exit(root, code, signal)
  for _, chat in pairs(M.chats) do
    if chat.root == root and api.nvim_buf_is_valid(chat.buf) and not M.exiting then
      chat.detached = true
      chat.state.status = 'idle'
      chat:note(('daemon exited (code %s%s); the next command starts it again'):format(
        tostring(code),
        (signal and signal ~= 0) and (', signal ' .. signal) or ''
      ))
      chat:_winbar()
    end
  end
end

--- A daemon (re)started for `root`: chats whose daemon went away attach their session again and
--- receive what they missed (events after the last one shown).
function M.on_client_ready(root, lsp_client)
  for _, chat in pairs(M.chats) do
    if chat.root == root and chat.detached and not chat.left and not chat.deleted and api.nvim_buf_is_valid(chat.buf) then
      chat.detached = nil
      local params = { sessionId = chat.id, afterSeq = chat.state.last_seq }
      lsp_client:request('dsh/session/attach', params, function(err, res)
        if err then
          return chat:note('attach failed: ' .. (err.message or ''), 'DshError')
        end
        session.set_inbox(chat.state, res.inbox)
        chat.state.status = res.status or chat.state.status
        chat:render({ op = 'inbox' })
        reopen_permissions(chat, res)
      end)
    end
  end
end

-- ---- sending -------------------------------------------------------------------------------------

--- Run requests one after another (the daemon must see them in this order); `done(err, i)` names
--- the step that failed (the ones after it were not sent).
local function run_steps(root, steps, done)
  local i = 0
  local function step()
    i = i + 1
    local s = steps[i]
    if not s then
      return done and done(nil)
    end
    client.request(root, s.method, s.params, function(err, result)
      if err then
        return done and done(err, i)
      end
      if s.after then
        s.after(result)
      end
      step()
    end)
  end
  step()
end

--- Whether the daemon of `root` reads `context` on a send (protocol.md §4): then a prompt's
--- attachments are queued with it as one item instead of being injected ahead of it.
function M.send_context(root)
  return (client.info(root) or {}).sendContext == true
end

--- The ContextRef of an attachment the daemon reads itself (nil for a message the plugin wrote).
local function context_ref(att)
  if att.message then
    return nil
  end
  return { uri = att.uri, kind = att.kind or 'selection', range = att.range }
end

--- The request that delivers an attachment on its own as `delivery` ('inject' | 'steer' | 'followup').
local function attachment_step(chat, att, delivery)
  if att.message then
    return { method = 'dsh/' .. delivery, params = { sessionId = chat.id, message = att.message }, atts = { att } }
  end
  return {
    method = 'dsh/context/add',
    params = { sessionId = chat.id, uri = att.uri, kind = att.kind or 'selection', range = att.range, delivery = delivery },
    atts = { att },
  }
end

--- Send text as 'followup' | 'steer' | 'inject'. A followup or steer takes the attachments waiting
--- for the next prompt with it; `opts.context` adds attachments for this message only. With a daemon
--- that reads `context` on a send they travel in the same request (one queued item: a prompt queued
--- behind a running turn keeps its selection out of that turn); attachments the plugin wrote itself
--- (blocks, buffers without a file), and all of them with an older daemon, go first as injected context.
function M.send(chat, kind, text, opts)
  opts = opts or {}
  local atts, waiting = {}, {}
  if kind == 'followup' or kind == 'steer' then
    for _, att in ipairs(chat.attachments) do
      atts[#atts + 1] = att
      waiting[att] = true
    end
    if #chat.attachments > 0 then
      chat.attachments = {}
      chat:_place_queue()
    end
  end
  vim.list_extend(atts, opts.context or {})
  local function failed(message, unsent)
    notify(kind .. ' failed: ' .. message, vim.log.levels.ERROR)
    if opts.from_input then
      chat:restore_input(text)
    end
    -- Attachments that were not delivered wait for the next prompt again.
    local back = vim.tbl_filter(function(att)
      return waiting[att] and unsent[att]
    end, atts)
    if #back > 0 then
      chat.attachments = vim.list_extend(back, chat.attachments)
      chat:_place_queue()
    end
  end
  client.ensure(chat.root, function()
    local steps, refs, carried = {}, {}, {}
    local with_context = M.send_context(chat.root)
    for _, att in ipairs(atts) do
      local ref = with_context and context_ref(att)
      if ref then
        refs[#refs + 1] = ref
        carried[#carried + 1] = att
      else
        steps[#steps + 1] = attachment_step(chat, att, 'inject')
      end
    end
    local params = { sessionId = chat.id, message = { content = text } }
    if #refs > 0 then
      params.context = refs
    end
    steps[#steps + 1] = { method = 'dsh/' .. kind, params = params, atts = carried }
    run_steps(chat.root, steps, function(err, at)
      if err then
        local unsent = {}
        for i = at, #steps do
          for _, att in ipairs(steps[i].atts or {}) do
            unsent[att] = true
          end
        end
        failed(err.message or vim.inspect(err), unsent)
      end
    end)
  end, function(message)
    local unsent = {}
    for _, att in ipairs(atts) do
      unsent[att] = true
    end
    failed(message, unsent)
  end)
end

local function send_input(kind)
  return function()
    local gone = M.chats[vim.b.dsh_session or '']
    if gone and gone.deleted then
      -- The chat's session was deleted: what is typed in its input starts a new session (with the
      -- attachments that were waiting for it).
      local text = gone:take_input()
      if not text then
        return
      end
      return M.new_session(gone.root, function(chat)
        chat.attachments = vim.list_extend(gone.attachments or {}, chat.attachments)
        M.send(chat, kind, text, { from_input = true })
      end)
    end
    local chat = M.chat_for(0)
    if not chat then
      return
    end
    local text = chat:take_input()
    if text then
      M.send(chat, kind, text, { from_input = true })
    end
  end
end

--- A range that ends at the start of a line (a selected line break) ends instead at the end of the
--- line before, so the daemon's "lines A-B" label names only the selected lines.
local function trim_eol(sel)
  local r = sel.range
  if r['end'].character == 0 and r['end'].line > r.start.line then
    local line = api.nvim_buf_get_lines(sel.buf, r['end'].line - 1, r['end'].line, false)[1] or ''
    local chars = require('dsh.selection').utf16(line, #line)
    return { start = r.start, ['end'] = { line = r['end'].line - 1, character = chars } }
  end
  return r
end

local function attachment_for(sel)
  if sel.mode == '\22' or not vim.startswith(sel.uri, 'file:') then
    return { label = sel.label, message = require('dsh.selection').message(sel) }
  end
  return { label = sel.label, uri = sel.uri, range = trim_eol(sel), kind = 'selection' }
end

--- Deliver a selection: 'steer' | 'inject' now, or 'attach' it to the next prompt. A steer takes
--- `text` (else what is typed in the chat input) as its message, with the selection as its context
--- in the same request; without a text the selection is sent alone (dsh/context/add).
function M.send_selection(delivery, sel, text)
  sel = sel or require('dsh.selection').current()
  if not sel then
    return notify('no selection', vim.log.levels.WARN)
  end
  local root = client.root_for(sel.buf)
  -- The daemon builds the message from its copy of the buffer: make sure it has it (unsaved text).
  client.attach(root, sel.buf)
  M.with_chat(function(chat)
    local att = attachment_for(sel)
    if delivery == 'attach' then
      table.insert(chat.attachments, att)
      chat:_place_queue()
      return notify('attached ' .. att.label .. ' to the next prompt')
    end
    local from_input = false
    if not text and delivery == 'steer' then
      text = chat:take_input()
      from_input = text ~= nil
    end
    if text then
      return M.send(chat, delivery, text, { context = { att }, from_input = from_input })
    end
    run_steps(chat.root, { attachment_step(chat, att, delivery) }, function(err)
      if err then
        notify(delivery .. ' failed: ' .. (err.message or ''), vim.log.levels.ERROR)
      end
    end)
  end, sel.buf, true)
end

-- ---- control -------------------------------------------------------------------------------------

function M.stop(keep_inbox)
  local chat = M.chat_for(0)
  if not chat then
    return notify('no chat here')
  end
  client.request(chat.root, 'dsh/cancel', { sessionId = chat.id, keepInbox = keep_inbox })
end

function M.wake()
  local chat = M.chat_for(0)
  if not chat then
    return notify('no chat here')
  end
  client.request(chat.root, 'dsh/wake', { sessionId = chat.id }, function(err, res)
    if not err and res and not res.started then
      notify(session.pending(chat.state) == 0 and 'nothing queued' or 'already running')
    end
  end)
end

--- What an attach reply says about the session: its queue, status and whether it is read-only.
local function apply_attach(chat, res)
  session.set_inbox(chat.state, res.inbox)
  chat.state.status = res.status or chat.state.status
  chat.state.last_seq = math.max(chat.state.last_seq, tonumber(res.lastSeq) or -1)
  chat.state.read_only = res.readOnly or nil
  if res.readOnly then
    local holder = res.holder or {}
    chat:note(('read-only: driven by another dsh-daemon (pid %s on %s)'):format(
      tostring(holder.holderPid or '?'),
      tostring(holder.holderHost or '?')
    ))
  end
  chat:render({ op = 'inbox' })
  chat:_winbar()
  require('dsh.queue').refresh(chat)
  reopen_permissions(chat, res)
end

--- Reattach a session. With a daemon that renders transcripts: attach without replay, then show
--- the newest page of turns (older pages on demand) and continue with the live events after it;
--- otherwise the whole history is replayed as events. The queue comes from the attach reply.
function M.resume(root, session_id, info)
  leave_current(root, session_id)
  local chat = M.get_chat(session_id, root)
  chat:reset()
  chat.detached = nil
  chat.title = info and info.title ~= '' and info.title or chat.title
  M.current[root] = session_id
  chat:open()
  client.ensure(root, function()
    if not (client.info(root) or {}).transcript then
      return client.request(root, 'dsh/session/attach', { sessionId = session_id }, function(err, res)
        if err then
          return chat:note('attach failed: ' .. (err.message or ''), 'DshError')
        end
        apply_attach(chat, res)
      end)
    end
    chat.loading = {} -- live events wait for the page they continue
    client.request(root, 'dsh/session/attach', { sessionId = session_id, replay = 'none' }, function(err, res)
      if err then
        chat.loading = nil
        return chat:note('attach failed: ' .. (err.message or ''), 'DshError')
      end
      local params = { sessionId = session_id, limit = config.options.page_turns }
      client.request(root, 'dsh/session/transcript', params, function(terr, page)
        local held = chat.loading or {}
        chat.loading = nil
        if terr then
          chat:note('transcript failed: ' .. (terr.message or ''), 'DshError')
        else
          chat:show_transcript(page)
        end
        apply_attach(chat, res)
        for _, ev in ipairs(held) do
          chat:on_event(ev)
        end
      end)
    end)
  end)
  return chat
end

--- `go` / :DshOlder: load the turns before the oldest one shown.
function M.older()
  local chat = M.chat_for(0)
  if not chat then
    return notify('no chat here')
  end
  local older = chat.older
  if not older then
    return notify('no older turns')
  end
  if older.loading then
    return
  end
  older.loading = true
  local params = { sessionId = chat.id, beforeTurn = older.before, limit = config.options.page_turns }
  client.request(chat.root, 'dsh/session/transcript', params, function(err, page)
    older.loading = nil
    if err then
      return notify('could not load older turns: ' .. (err.message or ''), vim.log.levels.ERROR)
    end
    if chat.older == older then
      chat:prepend_page(page)
    end
  end)
end

--- :DshRename [title]: rename the chat's session (asks for the title when none is given).
function M.rename(title)
  local chat = M.chat_for(0)
  if not chat then
    return notify('no chat here')
  end
  local function apply(t)
    if not t or vim.trim(t) == '' then
      return
    end
    client.request(chat.root, 'dsh/session/rename', { sessionId = chat.id, title = t }, function(err)
      if err then
        return notify('rename failed: ' .. (err.message or ''), vim.log.levels.ERROR)
      end
      chat.title = vim.trim((t:gsub('%s+', ' ')))
      chat:_winbar()
    end)
  end
  if title and title ~= '' then
    return apply(title)
  end
  vim.ui.input({ prompt = 'dsh: rename session: ', default = chat.title or '' }, apply)
end

--- Chats whose session was deleted, once another chat is shown for `root`: forgotten, and their
--- buffers wiped unless a window still shows them.
function M.forget_deleted(root)
  for sid, chat in pairs(M.chats) do
    if chat.deleted and chat.root == root then
      M.chats[sid] = nil
      for _, buf in ipairs({ chat.buf, chat.input }) do
        if api.nvim_buf_is_valid(buf) and #vim.fn.win_findbuf(buf) == 0 then
          pcall(api.nvim_buf_delete, buf, { force = true })
        end
      end
    end
  end
end

--- The session of the chat shown in (or for) the current buffer, without attaching it again.
local function current_session()
  local buf = api.nvim_get_current_buf()
  local sid = vim.b[buf].dsh_session
  local chat = sid and M.chats[sid]
  if chat and not chat.deleted then
    return chat.root, sid, chat.title
  end
  local root = client.root_for(buf)
  sid = M.current[root]
  chat = sid and M.chats[sid]
  if chat and not chat.deleted then
    return root, sid, chat.title
  end
end

--- A session was deleted: its chat says so, and the next prompt (there, or :Dsh) starts a new one.
local function deleted(root, session_id)
  if M.current[root] == session_id then
    M.current[root] = nil
  end
  local chat = M.chats[session_id]
  if not chat then
    return
  end
  chat.deleted = true
  chat.loading = nil
  session.set_inbox(chat.state, nil)
  chat.state.status = 'idle'
  if api.nvim_buf_is_valid(chat.buf) then
    chat:note('✗ this session was deleted; the next prompt starts a new session', 'DshError')
    chat:render({ op = 'inbox' })
  end
end

--- :DshDelete [id] (a prefix of one of this project's sessions; default: the chat's session),
--- after a confirmation unless `force` (:DshDelete!). A session a turn is running in, or that
--- another dsh-daemon drives, is refused (`session_busy`): the notification says which.
function M.delete(id, force)
  local function go(root, session_id, title)
    if not force then
      local label = session_id:sub(1, 8) .. ((title and title ~= '') and (' "' .. title .. '"') or '')
      local answer = vim.fn.confirm(
        ('Delete the dsh session %s? Its transcript and queue are removed for good.'):format(label),
        '&Delete\n&Cancel',
        2
      )
      if answer ~= 1 then
        return
      end
    end
    client.request(root, 'dsh/session/delete', { sessionId = session_id }, function(err)
      if err then
        local busy = vim.tbl_get(err, 'data', 'code') == 'session_busy'
        return notify(
          ('%s %s: %s'):format(busy and 'cannot delete the session' or 'delete failed:', session_id:sub(1, 8), err.message or ''),
          busy and vim.log.levels.WARN or vim.log.levels.ERROR
        )
      end
      deleted(root, session_id)
      notify('deleted session ' .. session_id:sub(1, 8) .. ((title and title ~= '') and (' (' .. title .. ')') or ''))
    end)
  end
  if id and id ~= '' then
    local root = client.root_for(0)
    return client.request(root, 'dsh/session/list', vim.empty_dict(), function(err, res)
      if err then
        return notify('could not list sessions: ' .. (err.message or ''), vim.log.levels.ERROR)
      end
      local found = {}
      for _, s in ipairs(res.sessions or {}) do
        if vim.startswith(s.sessionId, id) then
          found[#found + 1] = s
        end
      end
      if #found > 1 then
        return notify(('%d sessions start with %s: give more of the id'):format(#found, id), vim.log.levels.WARN)
      end
      go(root, found[1] and found[1].sessionId or id, found[1] and found[1].title)
    end)
  end
  local root, session_id, title = current_session()
  if not session_id then
    return notify('no session here to delete')
  end
  go(root, session_id, title)
end

local function list_sessions(root, cb)
  client.request(root, 'dsh/session/list', { cwd = root }, function(err, res)
    if err then
      return notify('could not list sessions: ' .. (err.message or ''), vim.log.levels.ERROR)
    end
    cb(res.sessions or {})
  end)
end

--- :DshResume [id]: that session, else the latest one of this project.
function M.resume_cmd(id)
  local root = client.root_for(0)
  if id and id ~= '' then
    list_sessions(root, function(sessions)
      for _, s in ipairs(sessions) do
        if vim.startswith(s.sessionId, id) then
          return M.resume(root, s.sessionId, s)
        end
      end
      M.resume(root, id)
    end)
    return
  end
  list_sessions(root, function(sessions)
    if #sessions == 0 then
      return notify('no session in ' .. root)
    end
    M.resume(root, sessions[1].sessionId, sessions[1])
  end)
end

--- :DshSessions / gr: pick a session of this project and resume it.
function M.pick_session()
  local root = client.root_for(0)
  list_sessions(root, function(sessions)
    if #sessions == 0 then
      return notify('no session in ' .. root)
    end
    vim.ui.select(sessions, {
      prompt = 'dsh sessions',
      format_item = function(s)
        local when = os.date('%Y-%m-%d %H:%M', math.floor((s.updatedAt or 0) / 1000))
        local pending = (s.pending or 0) > 0 and (' · ' .. s.pending .. ' queued') or ''
        if type(s.lastPrompt) == 'string' and s.lastPrompt ~= '' and s.lastPrompt ~= s.title then
          pending = pending .. ' · last: ' .. require('dsh.chat').first_line(s.lastPrompt, 40)
        end
        return ('%s  %s  %s%s%s'):format(
          s.sessionId:sub(1, 8),
          when,
          s.title ~= '' and s.title or '(untitled)',
          s.status == 'running' and ' · running' or '',
          pending
        )
      end,
    }, function(choice)
      if choice then
        M.resume(root, choice.sessionId, choice)
      end
    end)
  end)
end

--- :DshAddFile [path]: attach a file (default: the current buffer) to the next prompt, read when
--- the prompt is sent; `now` (:DshAddFile!), or a daemon without `context` on sends: add it at once
--- as context for the next model request.
function M.add_file(path, now)
  local buf
  if path and path ~= '' then
    path = vim.fn.fnamemodify(vim.fn.expand(path), ':p')
    buf = vim.fn.bufnr(path)
  else
    buf = api.nvim_get_current_buf()
    path = api.nvim_buf_get_name(buf)
    if path == '' or vim.bo[buf].buftype ~= '' then
      return notify('this buffer is not a file', vim.log.levels.WARN)
    end
  end
  local root = client.root_for(buf > 0 and buf or 0)
  if buf > 0 then
    client.attach(root, buf)
  end
  M.with_chat(function(chat)
    client.ensure(chat.root, function()
      local uri = vim.uri_from_fname(path)
      if not now and M.send_context(chat.root) then
        local label = 'file ' .. vim.fn.fnamemodify(path, ':~:.')
        table.insert(chat.attachments, { label = label, uri = uri, kind = 'file' })
        chat:_place_queue()
        return notify('attached ' .. label .. ' to the next prompt')
      end
      client.request(chat.root, 'dsh/context/add', { sessionId = chat.id, uri = uri, kind = 'file', delivery = 'inject' })
    end)
  end, buf > 0 and buf or nil, true)
end

-- ---- keys and commands ---------------------------------------------------------------------------

--- Buffer-local keys of a chat's transcript and input buffers.
function M.chat_keys(_chat, buf, _is_input)
  local function map(modes, lhs, fn, desc)
    vim.keymap.set(modes, lhs, fn, { buffer = buf, desc = 'dsh: ' .. desc, nowait = true })
  end
  map('n', '<CR>', send_input('followup'), 'send (queued while busy)')
  map({ 'n', 'i' }, '<C-s>', send_input('followup'), 'send (queued while busy)')
  map({ 'n', 'i' }, '<M-CR>', send_input('steer'), 'steer the running turn')
  map({ 'n', 'i' }, '<C-c>', function()
    M.stop(true)
  end, 'stop, keep the queue')
  map('n', 'gq', function()
    M.with_chat(require('dsh.queue').open)
  end, 'open the queue')
  map('n', 'gr', M.pick_session, 'resume a session')
  map('n', 'go', M.older, 'load older turns')
end

local function text_or_selection(delivery)
  return function(o)
    if o.range > 0 then -- the selection, with the text (if any) as the message it goes with
      return M.send_selection(delivery, require('dsh.selection').last(), o.args ~= '' and o.args or nil)
    end
    if o.args ~= '' then
      return M.with_chat(function(chat)
        M.send(chat, delivery, o.args)
      end)
    end
    local chat = M.chat_for(0)
    local text = chat and chat:take_input()
    if not text then
      return notify('nothing to ' .. delivery .. ': give a text, a range, or type in the chat input')
    end
    M.send(chat, delivery, text, { from_input = true })
  end
end

local function commands()
  local cmd = api.nvim_create_user_command
  cmd('Dsh', function(o)
    M.with_chat(function(chat)
      chat:open()
      if o.args ~= '' then
        M.send(chat, 'followup', o.args)
      end
    end)
  end, { nargs = '*', desc = 'dsh: open the chat, or send a prompt' })
  cmd('DshNew', function()
    M.new_session(client.root_for(0))
  end, { desc = 'dsh: a new session' })
  cmd('DshSteer', text_or_selection('steer'), { nargs = '*', range = true, desc = 'dsh: steer the running turn' })
  cmd('DshInject', text_or_selection('inject'), { nargs = '*', range = true, desc = 'dsh: context for the next request' })
  cmd('DshQueue', function()
    M.with_chat(require('dsh.queue').open)
  end, { desc = 'dsh: edit the queue' })
  cmd('DshStop', function(o)
    M.stop(not o.bang)
  end, { bang = true, desc = 'dsh: stop the turn (! also clears the queue)' })
  cmd('DshWake', M.wake, { desc = 'dsh: run what is queued' })
  cmd('DshSessions', M.pick_session, { desc = 'dsh: pick a session' })
  cmd('DshResume', function(o)
    M.resume_cmd(o.args)
  end, { nargs = '?', desc = 'dsh: reattach a session (the latest by default)' })
  cmd('DshOlder', M.older, { desc = 'dsh: load the turns before the oldest one shown' })
  cmd('DshRename', function(o)
    M.rename(o.args)
  end, { nargs = '*', desc = 'dsh: rename the session' })
  cmd('DshDelete', function(o)
    M.delete(o.args, o.bang)
  end, { nargs = '?', bang = true, desc = "dsh: delete a session (the chat's by default; ! without asking)" })
  cmd('DshAddFile', function(o)
    M.add_file(o.args, o.bang)
  end, { nargs = '?', bang = true, complete = 'file', desc = 'dsh: attach a file to the next prompt (! add it now)' })
  cmd('DshEdits', function()
    require('dsh.edits').quickfix()
  end, { desc = 'dsh: files the agent edited (quickfix)' })
end

local function keys()
  if config.options.keys == false then
    return
  end
  local function map(lhs, delivery, desc)
    vim.keymap.set('x', lhs, function()
      M.send_selection(delivery)
    end, { desc = 'dsh: ' .. desc })
  end
  map('<leader>ds', 'steer', 'steer with the selection')
  map('<leader>di', 'inject', 'inject the selection')
  map('<leader>da', 'attach', 'attach the selection to the next prompt')
end

function M.setup(opts)
  config.set(opts)
  require('dsh.chat').highlights()
  commands()
  keys()
  local group = api.nvim_create_augroup('dsh', { clear = true })
  api.nvim_create_autocmd('ColorScheme', { group = group, callback = require('dsh.chat').highlights })
  require('dsh.ambient').setup(group)
  api.nvim_create_autocmd('VimLeavePre', {
    group = group,
    callback = function()
      M.exiting = true
      client.stop_all(config.options.exit_timeout)
    end,
  })
  M.did_setup = true
  return M
end

return M
