-- Controlling the agent of the chat shown: stop (keeping the queue or not), wake what is parked,
-- switch the model (`workspace/didChangeConfiguration`: every session of that daemon, from its next
-- model request; also kept for a daemon started again).
local client = require('dsh.client')
local config = require('dsh.config')
local notify = require('dsh.notify')
local session = require('dsh.session')
local sessions = require('dsh.sessions')
local state = require('dsh.state')

local M = {}

function M.stop(keep_inbox)
  local chat = sessions.chat_for(0)
  if not (chat and chat.id) then
    return notify.notify('no chat here')
  end
  client.request(chat.root, 'dsh/cancel', { sessionId = chat.id, keepInbox = keep_inbox }, function(err)
    if err then
      return notify.error('dsh/cancel failed: ' .. (err.message or ''))
    end
    -- Background processes outlive a stopped turn: the person chooses whether they go too.
    require('dsh.processes').offer_stop(chat)
  end)
end

function M.wake()
  local chat = sessions.chat_for(0)
  if not (chat and chat.id) then
    return notify.notify('no chat here')
  end
  client.request(chat.root, 'dsh/wake', { sessionId = chat.id }, function(err, res)
    if not err and res and not res.started then
      notify.notify(session.pending(chat.state) == 0 and 'nothing queued' or 'already running')
    end
  end)
end

--- :DshModel [name]: switch the model of this project's daemon (asks with vim.ui.select without one).
function M.set_model(name)
  local root = client.root_for(0)
  local function apply(model)
    if not model or vim.trim(model) == '' then
      return
    end
    model = vim.trim(model)
    local io_ = config.options.init_options or {}
    config.options.init_options = io_
    if type(io_.provider) == 'table' then
      io_.provider.model = model -- a daemon started again starts with it
    else
      io_.model = model
    end
    client.notify(root, 'workspace/didChangeConfiguration', { settings = { dsh = { provider = { model = model } } } })
    for _, chat in pairs(state.chats) do
      if chat.root == root then
        chat.model = model
        chat.state.model = nil -- until a request says which model it used
        chat:refresh_bar()
      end
    end
    local draft = state.drafts[root]
    if draft then
      draft.model = model
      draft:refresh_bar()
    end
    notify.notify('model: ' .. model .. ' (from the next request)')
  end
  if name and name ~= '' then
    return apply(name)
  end
  M.models(root, function(models, current, names)
    vim.ui.select(models, {
      prompt = 'dsh model',
      format_item = function(m)
        local shown = names[m] and (m .. '  ' .. names[m]) or m
        return m == current and (shown .. '  (current)') or shown
      end,
    }, apply)
  end)
end

--- The models to offer, then `cb(ids, current, names)`: the daemon's list (dsh/models/list, flag
--- `models`) first, then setup's `models` it does not name; setup's list alone from an older daemon.
function M.models(root, cb)
  local function offer(listed, current, names)
    local models = {}
    for _, m in ipairs(vim.list_extend(listed, config.options.models or {})) do
      if not vim.tbl_contains(models, m) then
        models[#models + 1] = m
      end
    end
    current = current or config.model()
    if current and not vim.tbl_contains(models, current) then
      table.insert(models, 1, current)
    end
    cb(models, current, names)
  end
  client.ensure(root, function()
    if not (client.info(root) or {}).models then
      return offer({}, nil, {})
    end
    client.request(root, 'dsh/models/list', vim.empty_dict(), function(err, res)
      local ids, names = {}, {}
      for _, m in ipairs(not err and res and res.models or {}) do
        if type(m) == 'table' and type(m.id) == 'string' then
          ids[#ids + 1] = m.id
          names[m.id] = type(m.name) == 'string' and m.name ~= m.id and m.name or nil
        end
      end
      offer(ids, not err and res and type(res.current) == 'string' and res.current or config.model(), names)
    end)
  end, function()
    offer({}, nil, {})
  end)
end

return M
