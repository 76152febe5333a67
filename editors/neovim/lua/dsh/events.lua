-- What the daemon sends, routed: `dsh/event`s to their chat (and the permission prompts they
-- close), a daemon that exited or (re)started, `dsh/requestPermission`, `workspace/applyEdit`.
-- Registered as the client's listeners by init.lua.
local api = vim.api
local state = require('dsh.state')
local permissions = require('dsh.permissions')
local sessions = require('dsh.sessions')
local edits = require('dsh.edits')
local editor = require('dsh.editor')

local M = {}

function M.event(_root, ev)
  local chat = state.chats[ev.sessionId]
  if not chat then
    return
  end
  chat:on_event(ev)
  if ev.type == 'tool/result' then
    local d = ev.data or {}
    local call_id = d.callId or vim.tbl_get(d, 'message', 'source', 'callId')
    if call_id then
      permissions.resolved(ev.sessionId, call_id)
    end
  elseif ev.type == 'permission/resolved' then -- answered here, elsewhere, timed out or cancelled
    local call_id = (ev.data or {}).callId
    if call_id then
      permissions.resolved(ev.sessionId, call_id, true)
    end
  elseif ev.type == 'turn/end' then
    permissions.resolved(ev.sessionId)
  elseif ev.type == 'hooks/untrusted' then -- live: the project's hooks wait for the person (§17)
    require('dsh.hooks').untrusted(chat, ev.data)
  elseif ev.type == 'hook/failed' then
    require('dsh.hooks').failed(chat, ev.data or {})
  elseif ev.type:match('^review/') then
    require('dsh.findings').on_event(chat, ev)
  elseif ev.type == 'turn/diff' then
    require('dsh.turndiff').on_event(chat, ev)
  elseif ev.type == 'rewind/files' or ev.type == 'conversation/cut' then
    if ev.type == 'conversation/cut' then
      require('dsh.findings').on_event(chat, ev)
      require('dsh.cuts').cut_from(chat, (ev.data or {}).beforeTurn)
    end
    if chat.state.plan_unknown then -- cut back past the turns this chat saw
      require('dsh.plan').refetch(chat)
    end
    local note = require('dsh.rewind').note(chat, ev)
    if note then
      chat:note(note, ev.data.phase == 'interrupted' and 'DshError' or nil)
    end
  end
end

function M.exit(root, code, signal)
  for _, chat in pairs(state.chats) do
    if chat.root == root and api.nvim_buf_is_valid(chat.buf) and not state.exiting then
      chat.detached = true
      chat.state.status = 'idle'
      chat:note(('daemon exited (code %s%s); the next command starts it again'):format(
        tostring(code),
        (signal and signal ~= 0) and (', signal ' .. signal) or ''
      ))
      chat:refresh_bar()
    end
  end
end

function M.ready(root, lsp_client)
  sessions.reattach_all(root, lsp_client)
end

function M.register(client)
  client.on.event = function(...)
    return M.event(...)
  end
  client.on.exit = function(...)
    return M.exit(...)
  end
  client.on.ready = function(...)
    return M.ready(...)
  end
  client.on.permission = function(...)
    return permissions.request(...)
  end
  client.on.apply_edit = function(...)
    return edits.apply(...)
  end
  client.on.editor = function(...)
    return editor.handle(...)
  end
  client.on.offers = function()
    return editor.capabilities()
  end
end

return M
