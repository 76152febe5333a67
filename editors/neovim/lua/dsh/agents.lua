-- Named agents (`.dsh/agents/NAME.md`, protocol.md §12 "Subagents", flag `namedAgents`): :DshAgents
-- lists the project's (its session's, or before there is one the folder's: `dsh/agents/list`) in a
-- float; <CR> on one asks for the task (vim.ui.input) and sends the delegation prompt, an ordinary
-- prompt that asks the model to run that agent with `run_subagent {agent: NAME}`. `:DshAgents NAME
-- TASK` sends it at once. The words are the daemon's (dsh_daemon/model/named_agents.py): every
-- client sends the same request.
local api = vim.api

local M = {}

--- The prompt that hands `task` to the named agent `name` (protocol.md §12 "Running one from a client").
function M.delegation_prompt(name, task)
  return ('Agent %s: %s\n\n(Hand this task to the named agent "%s": call run_subagent with agent "%s" and'
    .. ' the task above as its prompt, then tell me what it reports.)'):format(name, vim.trim(task), name, name)
end

local TOOLSETS = {
  explore = 'read and search only',
  edit = 'read, search and edit files',
  all = 'every tool, commands too',
}

--- One line of the list: the name, what it does, its tool set and model.
function M.entry_line(a, name_width)
  local tools = tostring(a.tools or 'explore')
  local model = (type(a.model) == 'string' and a.model ~= '') and a.model or "the session's"
  return ('%-' .. name_width .. 's  %s · tools: %s (%s) · model: %s'):format(
    tostring(a.name), tostring(a.description or ''), tools, TOOLSETS[tools] or tools, model)
end

local last = {} -- root -> the names listed last (for the command line's completion)

--- The names :DshAgents completes (those listed last in this project).
function M.complete(lead)
  return vim.tbl_filter(function(n)
    return vim.startswith(n, lead)
  end, last[require('dsh.client').root_for(0)] or {})
end

--- `cb(agents)` of the current buffer's project: its chat's session, else the folder (`{cwd}`).
function M.list(cb)
  local client = require('dsh.client')
  local chat = require('dsh.sessions').chat_for(0)
  local root = chat and chat.root or client.root_for(0)
  local params = (chat and chat.id) and { sessionId = chat.id } or { cwd = root }
  client.request(root, 'dsh/agents/list', params, function(err, res)
    if err then
      return require('dsh.notify').warn('could not list the named agents: ' .. (err.message or ''))
    end
    local agents = type(res) == 'table' and res.agents or {}
    last[root] = vim.tbl_map(function(a)
      return a.name
    end, agents)
    cb(agents, root)
  end)
end

--- Send `task` to the named agent `name`, through this project's chat (opened; a draft gets its
--- session first). `@path` mentions in the task go with it as they do with :Dsh.
function M.run(name, task)
  if vim.trim(task or '') == '' then
    return require('dsh.notify').warn(('the %s agent needs a task'):format(name))
  end
  local send = require('dsh.send')
  require('dsh.sessions').open(function(chat)
    local typed, problems = send.typed_context(chat.root, task)
    if #problems > 0 then
      return require('dsh.notify').warn(table.concat(problems, '; '))
    end
    send.send(chat, 'followup', M.delegation_prompt(name, task), { context = typed })
  end)
end

--- Ask the person for the task, then run it.
function M.ask(name)
  vim.ui.input({ prompt = ('Task for the %s agent: '):format(name) }, function(task)
    if task and vim.trim(task) ~= '' then
      M.run(name, task)
    end
  end)
end

local FOOTER = ' <CR> give it a task · q close '

--- The float listing `agents` (focused): <CR> asks for the task of the one under the cursor.
function M.open(agents)
  local width = 0
  for _, a in ipairs(agents) do
    width = math.max(width, vim.fn.strdisplaywidth(tostring(a.name)))
  end
  local lines = vim.tbl_map(function(a)
    return M.entry_line(a, width)
  end, agents)
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  vim.b[buf].dsh_float = 'agents'
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  local w = #FOOTER + 2
  for _, l in ipairs(lines) do
    w = math.max(w, vim.fn.strdisplaywidth(l) + 1)
  end
  w = math.min(w, math.max(20, vim.o.columns - 4))
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    width = w,
    height = math.max(1, math.min(#lines, vim.o.lines - 6)),
    row = math.max(0, math.floor(vim.o.lines / 2) - 3),
    col = math.max(0, math.floor((vim.o.columns - w) / 2) - 1),
    style = 'minimal',
    border = 'rounded',
    title = ' dsh: named agents ',
    title_pos = 'center',
    footer = FOOTER,
    footer_pos = 'center',
  })
  vim.wo[win].cursorline = true
  vim.wo[win].wrap = false
  local function close()
    pcall(api.nvim_win_close, win, true)
  end
  for _, lhs in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', lhs, close, { buffer = buf, nowait = true, desc = 'dsh: close the list' })
  end
  vim.keymap.set('n', '<CR>', function()
    local a = agents[api.nvim_win_get_cursor(win)[1]]
    close()
    if a then
      M.ask(a.name)
    end
  end, { buffer = buf, nowait = true, desc = 'dsh: give the agent a task' })
  return win
end

--- :DshAgents [NAME [TASK]]: the list; NAME asks for its task; NAME TASK sends it.
function M.command(args)
  local name, task = vim.trim(args or ''):match('^(%S*)%s*(.*)$')
  M.list(function(agents)
    if name == '' then
      if #agents == 0 then
        return require('dsh.notify').notify('no named agents here: .dsh/agents/NAME.md defines one')
      end
      return M.open(agents)
    end
    local known = vim.tbl_map(function(a)
      return a.name
    end, agents)
    if not vim.tbl_contains(known, name) then
      local listed = #known > 0 and table.concat(known, ', ') or 'none here'
      return require('dsh.notify').warn(('no named agent %q (known: %s)'):format(name, listed))
    end
    if task == '' then
      return M.ask(name)
    end
    M.run(name, task)
  end)
end

return M
