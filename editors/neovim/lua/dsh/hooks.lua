-- The person's hooks (protocol.md §17) as the chat shows them: a project's hooks waiting for trust
-- (`hooks/untrusted`, or the attach reply's `hooksUntrusted`) as a notice naming them and :DshTrust,
-- a hook that failed (`hook/failed`) as one warning, and :DshTrust itself (`dsh/project/trust`).
--
-- A project's hooks are commands that come with its code: trusting them is the person's act only.
-- :DshTrust names what it trusts and asks first (:DshTrust! does not ask); nothing here sends
-- `dsh/project/trust` on its own.
local labels = require('dsh.labels')
local notify = require('dsh.notify')
local state = require('dsh.state')

local M = {}

local function events_of(d)
  local events = type(d.events) == 'table' and d.events or {}
  return #events > 0 and table.concat(events, ', ') or 'no event'
end

local function count(n)
  n = tonumber(n) or 0
  return ('%d hook%s'):format(n, n == 1 and '' or 's')
end

--- The notice of a `hooks/untrusted` (its data): one line naming the hooks, the file and :DshTrust.
function M.untrusted_line(d)
  local what = d.changed and 'changed since you trusted them, and wait again' or 'do not run until you trust them'
  local text = ('⚠ this project has %s (%s) in %s: they %s · :DshTrust runs them'):format(
    count(d.hooks),
    events_of(d),
    tostring(d.path or (tostring(d.root) .. '/.dsh/config.json')),
    what
  )
  local problems = type(d.problems) == 'table' and d.problems or {}
  if #problems > 0 then
    text = text .. (' · left out: %s'):format(labels.first_line(table.concat(problems, '; '), 120))
  end
  return text
end

--- The warning of a `hook/failed` (its data).
function M.failed_line(d)
  return ('⚠ hook %s (%s%s) failed: %s; it said nothing and the turn went on'):format(
    tostring(d.hook or '?'),
    tostring(d.event or '?'),
    d.origin == 'project' and ", the project's" or '',
    labels.first_line(tostring(d.reason or ''), 160)
  )
end

--- The heading of a message a hook wrote (source kind `hook`): what the model read from it.
function M.message_label(source)
  return ('⚓ hook %s (%s)'):format(tostring(source.hook or '?'), tostring(source.event or '?'))
end

--- The project's hooks waiting for the person's trust, for the chat of the current buffer (or any
--- chat of this project).
local function waiting_for(root)
  local chat = require('dsh.sessions').chat_for(0)
  if chat and chat.state.hooks_untrusted then
    return chat.state.hooks_untrusted, chat
  end
  for _, c in pairs(state.chats) do
    if c.root == root and c.state.hooks_untrusted then
      return c.state.hooks_untrusted, c
    end
  end
end

--- :DshTrust[!]: trust the hooks of the project named in the notice (the chat's), after asking
--- (! without asking). Their sessions here run them from the next event.
function M.trust(force)
  local client = require('dsh.client')
  local root = client.root_for(0)
  local d = waiting_for(root)
  if not d then
    return notify.notify('no project hooks wait for your trust here')
  end
  if not force then
    local question = (
      "Trust the %s of %s?\nEvents: %s\nThey run where the agent's commands run (the sandbox mode), from the next event."
    ):format(
      count(d.hooks),
      tostring(d.path),
      events_of(d)
    )
    if vim.fn.confirm(question, '&Trust them\n&Cancel', 2, 'Question') ~= 1 then
      return notify.notify('not trusted')
    end
  end
  client.request(root, 'dsh/project/trust', { root = d.root }, function(err, res)
    if err then
      return notify.warn('could not trust the hooks: ' .. (err.message or ''))
    end
    for _, c in pairs(state.chats) do
      if c.state.hooks_untrusted and c.state.hooks_untrusted.root == d.root then
        c.state.hooks_untrusted = nil
        c:note(('✓ trusted %s of %s (%s): they run from the next event'):format(
          count(res.hooks),
          tostring(res.root),
          events_of(res)
        ))
      end
    end
  end)
end

--- A `hooks/untrusted` (live, or the attach reply's `hooksUntrusted`): noted once per chat, and
--- kept for :DshTrust.
function M.untrusted(chat, d)
  if type(d) ~= 'table' then
    return
  end
  local key = table.concat({ tostring(d.root), events_of(d), tostring(d.hooks), tostring(d.changed) }, '|')
  chat.state.hooks_untrusted = d
  if chat.hooks_noted == key then
    return
  end
  chat.hooks_noted = key
  chat:note(M.untrusted_line(d), 'DshPermission')
  notify.line(('this project has %s waiting for your trust: :DshTrust'):format(count(d.hooks)), vim.log.levels.WARN)
end

--- A `hook/failed`: one warning per hook and event in this chat (the daemon tells once per session).
function M.failed(chat, d)
  chat.hooks_failed = chat.hooks_failed or {}
  local key = tostring(d.hook) .. '|' .. tostring(d.event)
  if chat.hooks_failed[key] then
    return
  end
  chat.hooks_failed[key] = true
  chat:note(M.failed_line(d), 'DshError')
  notify.line(('hook %s failed: %s'):format(tostring(d.hook), tostring(d.reason or '')), vim.log.levels.WARN)
end

return M
