-- What the :Dsh… commands do (their names and attributes are in spec.lua). The first command used
-- sets the plugin up with the defaults when setup() was not called.
local client = require('dsh.client')
local notify = require('dsh.notify')
local sessions = require('dsh.sessions')
local send = require('dsh.send')
local control = require('dsh.control')
local picker = require('dsh.picker')
local permissions = require('dsh.permissions')
local queue = require('dsh.queue')
local edits = require('dsh.edits')
local layout = require('dsh.layout')
local state = require('dsh.state')

local M = {}

local run = {}

function run.Dsh(o)
  sessions.open(function(chat)
    if o.args ~= '' then
      local typed, problems = send.typed_context(chat.root, o.args)
      if #problems > 0 then
        return notify.warn(table.concat(problems, '; '))
      end
      send.send(chat, 'followup', o.args, { context = typed })
    end
  end)
end

function run.DshNew()
  sessions.draft(client.root_for(0))
end

--- :DshToggle: hide the chat shown in this tab, else show this project's chat.
function run.DshToggle()
  local chat = state.lookup(nil, client.root_for(0))
  if chat and layout.visible(chat) then
    layout.close(chat)
    return
  end
  sessions.open()
end

run.DshSteer = send.text_or_selection('steer')
run.DshInject = send.text_or_selection('inject')

function run.DshQueue()
  sessions.with_chat(queue.open)
end

function run.DshStop(o)
  control.stop(not o.bang)
end

run.DshWake = control.wake
run.DshSessions = picker.pick_session

function run.DshResume(o)
  sessions.resume_cmd(o.args)
end

run.DshOlder = sessions.older

function run.DshRename(o)
  sessions.rename(o.args)
end

function run.DshDelete(o)
  sessions.delete(o.args, o.bang)
end

function run.DshAddFile(o)
  send.add_file(o.args, o.bang)
end

run.DshEdits = edits.quickfix

function run.DshPermission()
  permissions.focus(sessions.chat_for(0))
end

--- :DshReview: the edit waiting for permission, hunk by hunk, when one waits and no words are
--- given; else a code review (§19) of the uncommitted changes, `base REF` or `commit REF`.
function run.DshReview(o)
  local chat = sessions.chat_for(0)
  if o.args == '' and permissions.first(chat and chat.id) then
    return permissions.review_first(chat)
  end
  if chat and chat.root and not (client.info(chat.root) or { review = true }).review then
    return notify.warn('this dsh-daemon has no code review (no `review` capability)')
  end
  require('dsh.findings').start(o.args)
end

--- The chat of the current buffer with a session, else nil (said so).
local function session_chat()
  local chat = sessions.chat_for(0)
  if not (chat and chat.id) then
    notify.notify('no session here')
    return nil
  end
  return chat
end

function run.DshReviewList()
  local chat = session_chat()
  if chat then
    require('dsh.findings').list(chat)
  end
end

function run.DshReviewDismiss()
  require('dsh.findings').dismiss()
end

function run.DshDiff()
  local chat = session_chat()
  if not chat then
    return
  end
  if not (client.info(chat.root) or {}).turnDiff then
    return notify.warn("this dsh-daemon has no turn diff (no `turnDiff` capability)")
  end
  require('dsh.turndiff').open(chat)
end

function run.DshDiffUndo()
  require('dsh.turndiff').act('undo')
end

function run.DshDiffKeep()
  require('dsh.turndiff').act('keep')
end

function run.DshMode(o)
  require('dsh.mode').command(o.args)
end

function run.DshModel(o)
  control.set_model(o.args)
end

function run.DshSandbox(o)
  require('dsh.sandbox').command(o.args)
end

function run.DshPlan()
  local chat = sessions.chat_for(0)
  if not (chat and chat.id) then
    return notify.notify('no session here')
  end
  require('dsh.plan').open(chat)
end

function run.DshCost()
  require('dsh.cost').show(sessions.chat_for(0))
end

function run.DshAgents(o)
  local root = client.root_for(0)
  local info = client.info(root)
  if info and not info.namedAgents then
    return notify.warn('this dsh-daemon cannot list named agents (no `namedAgents` capability)')
  end
  require('dsh.agents').command(o.args)
end

function run.DshProcesses()
  local chat = sessions.chat_for(0)
  if not (chat and chat.id) then
    return notify.notify('no session here')
  end
  if not (client.info(chat.root) or {}).processes then
    return notify.warn('this dsh-daemon runs no background processes (no `processes` capability)')
  end
  require('dsh.processes').open(chat)
end

function run.DshNewWorktree(o)
  require('dsh.worktree').new(o.args)
end

function run.DshWorktree(o)
  require('dsh.worktree').command(o.args)
end

function run.DshTrust(o)
  require('dsh.hooks').trust(o.bang)
end

function run.DshRewind(o)
  require('dsh.rewind').rewind(o.args)
end

function run.DshFork(o)
  require('dsh.rewind').fork(o.args)
end

function M.run(name, o)
  require('dsh').ensure_setup()
  return run[name](o)
end

M.handlers = run

return M
