-- The session's mode (protocol.md §3 `dsh/session/setMode`, flag `modes`): ask, accept-edits or plan.
-- :DshMode [mode] sets it for the chat's session (no argument: a vim.ui.select); the mode comes back
-- as the `session/mode` event and in the attach reply, and the window bar shows one other than ask.
local client = require('dsh.client')
local notify = require('dsh.notify')

local M = {}

M.MODES = {
  { id = 'ask', label = 'Ask', info = 'edits ask first; commands follow the sandbox' },
  { id = 'accept-edits', label = 'Accept edits', info = 'file edits run without asking' },
  { id = 'plan', label = 'Plan', info = 'read-only tools; the agent proposes a plan for you to approve' },
}

-- The names other clients and the ACP use for a mode, beside the protocol's.
local ALIASES = { acceptEdits = 'accept-edits', accept_edits = 'accept-edits', acceptedits = 'accept-edits' }

--- The mode `name` means, or nil.
function M.normalize(name)
  name = vim.trim(name or '')
  name = ALIASES[name] or name
  for _, m in ipairs(M.MODES) do
    if m.id == name then
      return name
    end
  end
end

--- The window bar's word for a mode (nil for ask, the default).
function M.bar_word(mode)
  if mode == 'plan' then
    return 'plan mode'
  elseif mode == 'accept-edits' then
    return 'accept edits'
  end
end

--- :DshMode's completion.
function M.complete(lead)
  local out = {}
  for _, m in ipairs(M.MODES) do
    if vim.startswith(m.id, lead or '') then
      out[#out + 1] = m.id
    end
  end
  return out
end

local function label(id)
  for _, m in ipairs(M.MODES) do
    if m.id == id then
      return m.label
    end
  end
  return id
end

--- Set `chat`'s session to `mode` (a draft gets its session first).
function M.set(chat, mode)
  require('dsh.sessions').materialize(chat, function()
    local entry = client.roots[chat.root]
    if entry and entry.info and entry.info.modes ~= true then
      return notify.warn("this dsh-daemon has no session modes (it does not offer 'modes')")
    end
    client.request(chat.root, 'dsh/session/setMode', { sessionId = chat.id, mode = mode }, function(err)
      if err then
        return notify.error('mode: ' .. (err.message or vim.inspect(err)))
      end
      chat.state.mode = mode -- (the session/mode event says so too; the same mode again writes none)
      chat:refresh_bar()
      notify.notify('mode: ' .. label(mode))
    end)
  end, function(err)
    notify.error('mode: ' .. tostring(err and err.message or err))
  end)
end

--- :DshMode [ask|accept-edits|plan]
function M.command(args)
  local sessions = require('dsh.sessions')
  local wanted = vim.trim(args or '')
  local mode = M.normalize(wanted)
  if wanted ~= '' and not mode then
    return notify.warn(('no mode %q: ask, accept-edits (acceptEdits) or plan'):format(wanted))
  end
  sessions.with_chat(function(chat)
    if mode then
      return M.set(chat, mode)
    end
    local current = chat.state.mode or 'ask'
    vim.ui.select(M.MODES, {
      prompt = 'dsh mode',
      format_item = function(m)
        return ('%s %s — %s'):format(m.id == current and '●' or ' ', m.label, m.info)
      end,
    }, function(choice)
      if choice then
        M.set(chat, choice.id)
      end
    end)
  end, nil, true)
end

return M
