-- Sessions shown in this Neovim: which chat a buffer means, drafts and the session their first prompt
-- makes, reopening the latest session of a project, resuming (attach + a transcript page), older
-- pages, rename, delete, the picker's list.
--
-- Invariants kept here:
-- * A chat is shown per project root at a time (`state.current` / `state.drafts`); showing another
--   detaches the session left (`dsh/session/detach`), so this window neither follows nor leases it.
-- * `:Dsh` never makes an empty session: it shows the latest session of the project that has
--   something in it, else a draft; a session is created by the draft's first prompt (or anything
--   else that needs one), exactly once however many requests wait for it.
local api = vim.api
local config = require('dsh.config')
local client = require('dsh.client')
local session = require('dsh.session')
local state = require('dsh.state')
local notify = require('dsh.notify')
local permissions = require('dsh.permissions')
local queue = require('dsh.queue')
local chat_mod = require('dsh.chat')
local layout = require('dsh.layout')
local labels = require('dsh.labels')

local M = {}

--- The chat of `session_id` (made when it has none or its transcript was wiped).
function M.get_chat(session_id, root)
  local chat = state.chats[session_id]
  if not chat or not api.nvim_buf_is_valid(chat.buf) then
    chat = chat_mod.Chat.new(root, session_id)
    state.chats[session_id] = chat
  end
  return chat
end

--- Another session (or a draft: `next_id` nil) is shown for `root` instead of its current one:
--- detach that one; it is attached again when used.
local function leave_current(root, next_id)
  local prev = state.current[root]
  if not prev or prev == next_id then
    return
  end
  local chat = state.chats[prev]
  if chat then
    chat.left = true
  end
  if not (client.info(root) or {}).detach then
    return
  end
  client.request(root, 'dsh/session/detach', { sessionId = prev }, function(err)
    if err then
      notify.warn('detach failed: ' .. (err.message or ''))
    end
  end)
end

--- Chats whose session was deleted, once another chat is shown for `root`: forgotten, and their
--- buffers wiped unless a window still shows them.
function M.forget_deleted(root)
  for sid, chat in pairs(state.chats) do
    if chat.deleted and chat.root == root then
      state.chats[sid] = nil
      for _, buf in ipairs({ chat.buf, chat.input }) do
        if api.nvim_buf_is_valid(buf) and #vim.fn.win_findbuf(buf) == 0 then
          pcall(api.nvim_buf_delete, buf, { force = true })
        end
      end
    end
  end
end

--- Show a draft for `root` (a chat without a session; its first prompt makes one).
function M.draft(root, keep_focus)
  leave_current(root, nil)
  state.current[root] = nil
  local chat = state.drafts[root]
  if not (chat and api.nvim_buf_is_valid(chat.buf)) then
    chat = chat_mod.Chat.new(root, nil)
    state.drafts[root] = chat
  end
  local win = api.nvim_get_current_win()
  chat:open()
  M.forget_deleted(root)
  if keep_focus and api.nvim_win_is_valid(win) then
    api.nvim_set_current_win(win)
  end
  return chat
end

--- Give a draft its session (once; later callers wait for the same one), then `cb(chat)`.
function M.materialize(chat, cb, fail)
  if chat.id then
    return cb(chat)
  end
  if chat.waiting then
    table.insert(chat.waiting, { cb = cb, fail = fail })
    return
  end
  chat.waiting = { { cb = cb, fail = fail } }
  -- :DshNewWorktree's draft: its session gets a git worktree of its own (protocol.md §20).
  client.request(chat.root, 'dsh/session/new', { cwd = chat.root, worktree = chat.worktree }, function(err, res)
    local waiting = chat.waiting
    chat.waiting = nil
    if err then
      notify.error('could not start a session: ' .. (err.message or ''))
      for _, w in ipairs(waiting) do
        if w.fail then
          w.fail(err.message or 'could not start a session')
        end
      end
      return
    end
    leave_current(chat.root, res.sessionId)
    chat:bind(res.sessionId)
    state.chats[res.sessionId] = chat
    state.current[chat.root] = res.sessionId
    if state.drafts[chat.root] == chat then
      state.drafts[chat.root] = nil
    end
    M.forget_deleted(chat.root)
    for _, w in ipairs(waiting) do
      w.cb(chat)
    end
  end)
end

--- The chat of a buffer: its own, else the current one (or draft) of its root; a chat whose
--- transcript was wiped, or that was left for another session, is attached again first.
function M.chat_for(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local chat = state.lookup(buf, client.root_for(buf))
  if chat and chat.id and not api.nvim_buf_is_valid(chat.buf) then
    state.chats[chat.id] = nil
    chat = M.resume(chat.root, chat.id, { title = chat.title })
  elseif chat and chat.id and chat.left then
    chat = M.resume(chat.root, chat.id, { title = chat.title })
  elseif chat and not chat.id and not api.nvim_buf_is_valid(chat.buf) then
    state.drafts[chat.root] = nil
    chat = nil
  end
  return chat
end

--- Whether a listed session has anything in it (pickers and :Dsh skip empty ones).
function M.has_content(s)
  return (type(s.title) == 'string' and s.title ~= '')
    or (type(s.lastPrompt) == 'string' and s.lastPrompt ~= '')
    or (tonumber(s.pending) or 0) > 0
end

function M.list(root, cb)
  client.request(root, 'dsh/session/list', { cwd = root }, function(err, res)
    if err then
      return notify.error('could not list sessions: ' .. (err.message or ''))
    end
    cb(vim.tbl_filter(M.has_content, res.sessions or {}))
  end)
end

--- `cb(chat)` with the chat of `buf`'s project: the one shown, else the latest session with
--- something in it (resumed), else a draft. `keep_focus`: stay in the current window.
function M.with_chat(cb, buf, keep_focus)
  local chat = M.chat_for(buf)
  if chat then
    return cb(chat)
  end
  local root = client.root_for(buf or 0)
  M.list(root, function(sessions)
    local again = state.lookup(nil, root) -- made meanwhile (a second command typed quickly)
    if again then
      return cb(again)
    end
    if sessions[1] then
      return cb(M.resume(root, sessions[1].sessionId, sessions[1], keep_focus))
    end
    cb(M.draft(root, keep_focus))
  end)
end

--- The attach reply's sandbox (the last `sandbox/status`) and plan (the daemon's fold of the whole
--- log, absent when there is none: protocol.md §3).
function M.apply_meta(chat, res)
  if type(res.sandbox) == 'table' then
    chat.state.sandbox = res.sandbox
  end
  chat.state.plan = type(res.plan) == 'table' and res.plan or nil
  chat.state.plan_unknown = nil
  if type(res.mode) == 'string' then
    chat.state.mode = res.mode
  end
  require('dsh.plan').changed(chat)
  if type(res.hooksUntrusted) == 'table' then
    require('dsh.hooks').untrusted(chat, res.hooksUntrusted)
  else
    chat.state.hooks_untrusted = nil
  end
end

--- What an attach reply says about the session: its queue, status and whether it is read-only.
local function apply_attach(chat, res)
  session.set_inbox(chat.state, res.inbox)
  chat.state.status = res.status or chat.state.status
  chat.state.last_seq = math.max(chat.state.last_seq, tonumber(res.lastSeq) or -1)
  chat.state.read_only = res.readOnly or nil
  if type(res.title) == 'string' and res.title ~= '' then -- the daemon's ("… (fork)" for a fork)
    chat.title = res.title
  end
  M.apply_meta(chat, res)
  if res.readOnly then
    local holder = res.holder or {}
    chat:note(('read-only: driven by another dsh-daemon (pid %s on %s)'):format(
      tostring(holder.holderPid or '?'),
      tostring(holder.holderHost or '?')
    ))
  end
  chat:render({ op = 'inbox' })
  chat:refresh_bar()
  queue.refresh(chat)
  M.reopen_permissions(chat, res)
  if (client.info(chat.root) or {}).review then -- its live review findings, where they point (§19)
    require('dsh.findings').refetch(chat)
  end
end

--- Permission requests the daemon still has open for a chat that attached again (daemons with
--- `permissionEvents`): announced unless this Neovim has them already.
function M.reopen_permissions(chat, res)
  if not (client.info(chat.root) or {}).permissionEvents or res.readOnly then
    return
  end
  for _, params in ipairs(res.permissionRequests or {}) do
    if type(params) == 'table' and params.callId then
      params.sessionId = params.sessionId or chat.id
      permissions.reopen(chat.root, params)
    end
  end
end

--- Reattach a session. With a daemon that renders transcripts: attach without replay, then show
--- the newest page of turns (older pages on demand) and continue with the live events after it;
--- otherwise the whole history is replayed as events. The queue comes from the attach reply.
function M.resume(root, session_id, info, keep_focus)
  leave_current(root, session_id)
  local chat = M.get_chat(session_id, root)
  chat:reset()
  chat.detached = nil
  chat.title = info and info.title ~= '' and info.title or chat.title
  state.current[root] = session_id
  local win = api.nvim_get_current_win()
  chat:open()
  M.forget_deleted(root)
  if keep_focus and api.nvim_win_is_valid(win) then
    api.nvim_set_current_win(win)
  end
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
        if session.plan_steps(chat.state.plan) and not chat.plan_block then -- the page does not show plans
          chat:render({ op = 'plan', plan = chat.state.plan })
        end
      end)
    end)
  end)
  return chat
end

--- A daemon (re)started for `root`: chats whose daemon went away attach their session again and
--- receive what they missed (events after the last one shown).
function M.reattach_all(root, lsp_client)
  for _, chat in pairs(state.chats) do
    if chat.root == root and chat.detached and not chat.left and not chat.deleted and api.nvim_buf_is_valid(chat.buf) then
      chat.detached = nil
      local params = { sessionId = chat.id, afterSeq = chat.state.last_seq }
      lsp_client:request('dsh/session/attach', params, function(err, res)
        if err then
          return chat:note('attach failed: ' .. (err.message or ''), 'DshError')
        end
        session.set_inbox(chat.state, res.inbox)
        chat.state.status = res.status or chat.state.status
        M.apply_meta(chat, res)
        chat:render({ op = 'inbox' })
        M.reopen_permissions(chat, res)
      end)
    end
  end
end

--- :Dsh: the chat of this project (the one shown, else the latest session with something in it,
--- else a draft), opened; then `cb(chat)`.
function M.open(cb)
  M.with_chat(function(chat)
    if not layout.visible(chat) then
      chat:open()
    end
    if cb then
      cb(chat)
    end
  end)
end

--- `go` / :DshOlder: load the turns before the oldest one shown.
function M.older()
  local chat = M.chat_for(0)
  if not (chat and chat.id) then
    return notify.notify('no chat here')
  end
  local older = chat.older
  if not older then
    return notify.notify('no older turns')
  end
  if older.loading then
    return
  end
  older.loading = true
  local params = { sessionId = chat.id, beforeTurn = older.before, limit = config.options.page_turns }
  client.request(chat.root, 'dsh/session/transcript', params, function(err, page)
    older.loading = nil
    if err then
      return notify.error('could not load older turns: ' .. (err.message or ''))
    end
    if chat.older == older then
      chat:prepend_page(page)
    end
  end)
end

--- :DshRename [title]: rename the chat's session (asks for the title when none is given).
function M.rename(title)
  local chat = M.chat_for(0)
  if not (chat and chat.id) then
    return notify.notify('no session here (send a prompt first)')
  end
  local function apply(t)
    if not t or vim.trim(t) == '' then
      return
    end
    client.request(chat.root, 'dsh/session/rename', { sessionId = chat.id, title = t }, function(err)
      if err then
        return notify.error('rename failed: ' .. (err.message or ''))
      end
      chat.title = vim.trim((t:gsub('%s+', ' ')))
      chat:refresh_bar()
    end)
  end
  if title and title ~= '' then
    return apply(title)
  end
  vim.ui.input({ prompt = 'dsh: rename session: ', default = chat.title or '' }, apply)
end

--- The session of the chat shown in (or for) the current buffer, without attaching it again.
local function current_session()
  local buf = api.nvim_get_current_buf()
  local chat = state.lookup(buf, client.root_for(buf))
  if chat and chat.id and not chat.deleted then
    return chat.root, chat.id, chat.title
  end
end

--- A session was deleted: its chat says so, and the next prompt (there, or :Dsh) starts a new one.
local function deleted(root, session_id)
  if state.current[root] == session_id then
    state.current[root] = nil
  end
  local chat = state.chats[session_id]
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
        return notify.notify(
          ('%s %s: %s'):format(busy and 'cannot delete the session' or 'delete failed:', session_id:sub(1, 8), err.message or ''),
          busy and vim.log.levels.WARN or vim.log.levels.ERROR
        )
      end
      deleted(root, session_id)
      notify.notify('deleted session ' .. session_id:sub(1, 8) .. ((title and title ~= '') and (' (' .. title .. ')') or ''))
    end)
  end
  if id and id ~= '' then
    local root = client.root_for(0)
    return client.request(root, 'dsh/session/list', vim.empty_dict(), function(err, res)
      if err then
        return notify.error('could not list sessions: ' .. (err.message or ''))
      end
      local found = {}
      for _, s in ipairs(res.sessions or {}) do
        if vim.startswith(s.sessionId, id) then
          found[#found + 1] = s
        end
      end
      if #found > 1 then
        return notify.warn(('%d sessions start with %s: give more of the id'):format(#found, id))
      end
      go(root, found[1] and found[1].sessionId or id, found[1] and found[1].title)
    end)
  end
  local root, session_id, title = current_session()
  if not session_id then
    return notify.notify('no session here to delete')
  end
  go(root, session_id, title)
end

--- :DshResume [id]: that session, else the latest one of this project.
function M.resume_cmd(id)
  local root = client.root_for(0)
  M.list(root, function(sessions)
    if id and id ~= '' then
      for _, s in ipairs(sessions) do
        if vim.startswith(s.sessionId, id) then
          return M.resume(root, s.sessionId, s)
        end
      end
      return M.resume(root, id)
    end
    if #sessions == 0 then
      return notify.notify('no session in ' .. root)
    end
    M.resume(root, sessions[1].sessionId, sessions[1])
  end)
end

--- A one-line description of a listed session.
function M.describe(s)
  local when = os.date('%Y-%m-%d %H:%M', math.floor((s.updatedAt or 0) / 1000))
  local pending = (s.pending or 0) > 0 and (' · ' .. s.pending .. ' queued') or ''
  if type(s.lastPrompt) == 'string' and s.lastPrompt ~= '' and s.lastPrompt ~= s.title then
    pending = pending .. ' · last: ' .. labels.first_line(s.lastPrompt, 40)
  end
  local tree = type(s.worktree) == 'table' and ('  ' .. require('dsh.worktree').words(s.worktree)) or ''
  return ('%s  %s  %s%s%s%s'):format(
    s.sessionId:sub(1, 8),
    when,
    s.title ~= '' and s.title or '(untitled)',
    s.status == 'running' and ' · running' or '',
    pending,
    tree
  )
end

return M
