-- :DshRewind [turn] and :DshFork [turn] (daemons with the `rewind` flag, protocol.md §15): a preview
-- of the files a rewind restores (dsh/session/checkpoints) and a choice of what to rewind, conflicts
-- offered for overwriting, a fork shown in the chat; and the notes a rewind's events leave in the
-- transcript.
local client = require('dsh.client')
local notify = require('dsh.notify')
local sessions = require('dsh.sessions')

local M = {}

local function relative(root, path)
  if vim.startswith(path, root .. '/') then
    return path:sub(#root + 2)
  end
  return path
end

local function names(root, paths, limit)
  limit = limit or 6
  local out = {}
  for i, p in ipairs(paths) do
    if i > limit then
      out[#out + 1] = ('and %d more'):format(#paths - limit)
      break
    end
    out[#out + 1] = relative(root, p)
  end
  return table.concat(out, ', ')
end

--- The chat of the current window with a session, or nil (said).
local function current()
  local chat = sessions.chat_for(0)
  if not (chat and chat.id) then
    notify.notify('no session here')
    return nil
  end
  return chat
end

--- `turn` (a number typed) or the session's latest turn, then `cb(turn)`.
local function with_turn(chat, arg, cb)
  local typed = tonumber(arg and arg:match('^#?(%d+)$') or nil)
  if arg and arg ~= '' and not typed then
    return notify.warn('give a turn number, e.g. :DshRewind 3')
  end
  if typed then
    return cb(typed)
  end
  client.request(chat.root, 'dsh/session/transcript', { sessionId = chat.id, limit = 1 }, function(err, page)
    local turn = not err and page and page.turns and page.turns[1] and page.turns[1].turn
    if not turn then
      return notify.notify('this session has no turn yet')
    end
    cb(turn)
  end)
end

--- What the rewind to before `turn` would touch: (restored, deleted, unrestorable commands).
local function preview(res, turn)
  local seen, restored, deleted, lost, commands = {}, {}, {}, {}, 0
  for _, t in ipairs(res.turns or {}) do
    if t.turn >= turn then
      commands = commands + (t.unrestorableCommands or 0)
      for _, f in ipairs(t.files or {}) do
        if not seen[f.path] then
          seen[f.path] = true
          local list = f.dropped and lost or (f.created and deleted or restored)
          list[#list + 1] = f.path
        end
      end
    end
  end
  return restored, deleted, lost, commands
end

local function report(chat, turn, res, conversation, retry)
  local conflicts = res.conflicts or {}
  if #conflicts > 0 then
    local paths = vim.tbl_map(function(c)
      return c.path or '?'
    end, conflicts)
    local answer = vim.fn.confirm(
      ('Nothing was rewound: %d file(s) changed since the agent changed them:\n%s\nOverwrite them?'):format(
        #conflicts,
        names(chat.root, paths, 10)
      ),
      '&Overwrite\n&Cancel',
      2
    )
    if answer == 1 then
      retry()
    end
    return
  end
  for _, p in ipairs(res.notRestorable or {}) do
    notify.warn(('not restored%s: %s%s'):format(
      p.turn and (' (turn ' .. p.turn .. ')') or '',
      p.path and (relative(chat.root, p.path) .. ': ') or '',
      p.reason
    ))
  end
  local parts = {}
  if #(res.restored or {}) > 0 then
    parts[#parts + 1] = 'restored ' .. names(chat.root, res.restored)
  end
  if #(res.deleted or {}) > 0 then
    parts[#parts + 1] = 'deleted ' .. names(chat.root, res.deleted)
  end
  if conversation and res.cutSeq then
    parts[#parts + 1] = 'the conversation cut'
  end
  notify.notify(('rewound to before turn %d: %s'):format(turn, #parts > 0 and table.concat(parts, '; ') or 'nothing to do'))
end

--- :DshRewind [turn]: back to before `turn` (default: the latest turn), after a preview of the files.
function M.rewind(arg)
  local chat = current()
  if not chat then
    return
  end
  with_turn(chat, arg, function(turn)
    client.request(chat.root, 'dsh/session/checkpoints', { sessionId = chat.id }, function(err, res)
      if err then
        return notify.error('could not read the checkpoints: ' .. (err.message or ''))
      end
      local restored, deleted, lost, commands = preview(res, turn)
      local lines = { ('Rewind the dsh session to before turn %d?'):format(turn) }
      if #restored > 0 then
        lines[#lines + 1] = 'Restored: ' .. names(chat.root, restored, 10)
      end
      if #deleted > 0 then
        lines[#lines + 1] = 'Deleted (the agent created them): ' .. names(chat.root, deleted, 10)
      end
      if #lost > 0 then
        lines[#lines + 1] = 'Not restorable (checkpoint dropped): ' .. names(chat.root, lost, 10)
      end
      if commands > 0 then
        lines[#lines + 1] = ('%d command(s) ran outside git: what they changed stays'):format(commands)
      end
      if #restored + #deleted == 0 then
        lines[#lines + 1] = 'No file to restore.'
      end
      local answer = vim.fn.confirm(
        table.concat(lines, '\n'),
        '&Both (files and conversation)\n&Files only\nC&onversation only\n&Cancel',
        4
      )
      if answer < 1 or answer > 3 then
        return
      end
      local files, conversation = answer ~= 3, answer ~= 2
      local function go(force)
        local params = { sessionId = chat.id, beforeTurn = turn, files = files, conversation = conversation, force = force }
        client.request(chat.root, 'dsh/session/rewind', params, function(rerr, result)
          if rerr then
            return notify.warn('rewind refused: ' .. (rerr.message or ''))
          end
          report(chat, turn, result, conversation, function()
            go(true)
          end)
        end)
      end
      go(false)
    end)
  end)
end

--- :DshFork [turn]: a new session with turns 1…turn (default: all), shown in this chat.
function M.fork(arg)
  local chat = current()
  if not chat then
    return
  end
  with_turn(chat, arg, function(turn)
    client.request(chat.root, 'dsh/session/fork', { sessionId = chat.id, atTurn = turn }, function(err, res)
      if err then
        return notify.warn('fork refused: ' .. (err.message or ''))
      end
      notify.notify(('forked at turn %d: session %s'):format(turn, res.sessionId:sub(1, 8)))
      sessions.resume(chat.root, res.sessionId)
    end)
  end)
end

--- The transcript's note for a rewind's durable events (nil: nothing to show).
function M.note(chat, ev)
  local d = ev.data or {}
  if ev.type == 'conversation/cut' then
    return ('── rewound to before turn %d: the turns since are out of the model\'s history ──'):format(d.beforeTurn)
  end
  if d.phase == 'done' then
    local changed = vim.list_extend(vim.list_extend({}, d.restored or {}), d.deleted or {})
    return ('── files rewound to before turn %d: %s ──'):format(
      d.beforeTurn,
      #changed > 0 and names(chat.root, changed) or 'none changed'
    )
  elseif d.phase == 'interrupted' then
    return ('✗ a rewind to before turn %d was interrupted: not restored: %s (:DshRewind %d finishes it)'):format(
      d.beforeTurn,
      names(chat.root, d.untouched or {}),
      d.beforeTurn
    )
  end
end

return M
