-- The agent's background processes (protocol.md §12 "Background processes", flag `processes`): a
-- transcript line when one starts or ends (`process/started`, `process/exited`), :DshProcesses (the
-- session's processes from `dsh/process/list`, with keys to read one's output and to stop one), and
-- the offer to stop them too when the person stops the agent (`dsh/cancel {stopProcesses}`).
--
-- The list is always asked of the daemon (it is the one that knows what still runs, also after a
-- restart); the events only give the transcript its lines and the open list its cue to refresh.
local api = vim.api
local labels = require('dsh.labels')

local M = {}

local STOPPED_BY = {
  agent = 'stopped by the agent',
  person = 'stopped by you',
  cancel = 'stopped with the cancel',
  ['session-close'] = 'stopped as the session closed',
  shutdown = 'stopped as the daemon shut down',
  ['daemon-stopped'] = 'ended with its daemon (killed)',
}

--- How a process ended, in words (an exited `process/exited` or `dsh/process/list` entry).
function M.ending(p)
  local how
  if p.exitCode ~= nil and p.exitCode ~= vim.NIL then
    how = 'exit code ' .. tostring(p.exitCode)
  elseif p.signal ~= nil and p.signal ~= vim.NIL then
    how = 'signal ' .. tostring(p.signal)
  end
  local by = STOPPED_BY[p.stoppedBy or '']
  if by and how then
    return ('%s (%s)'):format(by, how)
  end
  return by or (how and ('exited (' .. how .. ')')) or 'exited'
end

local function label(p)
  local name, command = p.name or '', p.command or ''
  if name == '' or name == command then
    return '$ ' .. labels.first_line(command, 80)
  end
  return ('%s · $ %s'):format(name, labels.first_line(command, 70))
end

--- The transcript line of a `process/started` or `process/exited` (nil for anything else). `known`:
--- processId -> the started data this chat saw, so an exit names what ended.
function M.event_line(known, t, d)
  local id = tostring(d.processId or '?')
  if t == 'process/started' then
    known[id] = d
    local where = d.confined == false and ' (unconfined)' or ''
    return ('▶ %s started in the background%s: %s'):format(id, where, label(d))
  elseif t == 'process/exited' then
    local p = known[id]
    return ('■ %s %s%s'):format(id, M.ending(d), p and (': ' .. label(p)) or '')
  end
end

-- ---- :DshProcesses ------------------------------------------------------------------------------

local view -- {win, buf, chat, processes}

--- One line of the list: the id, the state (how it ended, for one that did), then what runs (a long
--- command is what a narrow window cuts).
local function entry_line(p)
  if p.running then
    return ('%-4s running  %s'):format(tostring(p.processId), label(p))
  end
  return ('%-4s ended: %s · %s'):format(tostring(p.processId), M.ending(p), label(p))
end

local FOOTER = ' <CR>/o output · x stop · r refresh · q close '

local function fill(processes, empty)
  local lines = {}
  for _, p in ipairs(processes) do
    lines[#lines + 1] = entry_line(p)
  end
  if #lines == 0 then
    lines = { empty or 'no background processes in this session' }
  end
  vim.bo[view.buf].modifiable = true
  api.nvim_buf_set_lines(view.buf, 0, -1, false, lines)
  vim.bo[view.buf].modifiable = false
  local width = 40
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l) + 2)
  end
  width = math.min(width, math.max(20, vim.o.columns - 6))
  local height = math.max(1, math.min(#lines, vim.o.lines - 6))
  if api.nvim_win_is_valid(view.win) then
    pcall(api.nvim_win_set_config, view.win, { width = width, height = height })
  end
  return width, height
end

local function client()
  return require('dsh.client')
end

--- Ask the daemon for the chat's processes and show them in the open list.
function M.refresh()
  local v = view
  if not (v and api.nvim_win_is_valid(v.win)) then
    return
  end
  client().request(v.chat.root, 'dsh/process/list', { sessionId = v.chat.id }, function(err, res)
    if view ~= v or not api.nvim_buf_is_valid(v.buf) then
      return
    end
    if err then
      return require('dsh.notify').warn('could not list the processes: ' .. (err.message or ''))
    end
    v.processes = type(res) == 'table' and res.processes or {}
    fill(v.processes)
  end)
end

local function under_cursor()
  if not (view and api.nvim_win_is_valid(view.win)) then
    return nil
  end
  local row = api.nvim_win_get_cursor(view.win)[1]
  return (view.processes or {})[row]
end

--- A process's output (`dsh/process/output`) in a scratch buffer in a split below.
function M.show_output(chat, process_id)
  client().request(chat.root, 'dsh/process/output', { sessionId = chat.id, processId = process_id }, function(err, res)
    if err then
      return require('dsh.notify').warn(('could not read %s: %s'):format(process_id, err.message or ''))
    end
    local lines = vim.split(res.text or '', '\n', { plain = true })
    if lines[#lines] == '' then
      table.remove(lines)
    end
    if res.truncated then
      table.insert(lines, 1, '[older output not shown]')
    end
    lines[#lines + 1] = ('[%s %s]'):format(process_id, res.running and 'running' or 'ended')
    if view and api.nvim_win_is_valid(view.win) then
      pcall(api.nvim_win_close, view.win, true)
    end
    local name = ('dsh://%s/process/%s'):format(chat.short or chat.id:sub(1, 8), process_id)
    local existing = vim.fn.bufnr(name)
    local buf = existing > 0 and existing or api.nvim_create_buf(false, true)
    if existing <= 0 then
      api.nvim_buf_set_name(buf, name)
      vim.bo[buf].bufhidden = 'wipe'
      vim.b[buf].dsh_kind = 'process-output'
    end
    vim.bo[buf].modifiable = true
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
    local win = vim.fn.bufwinid(buf)
    if win == -1 then
      vim.cmd('botright split')
      api.nvim_win_set_buf(0, buf)
      win = api.nvim_get_current_win()
    end
    api.nvim_set_current_win(win)
    pcall(api.nvim_win_set_cursor, win, { #lines, 0 })
    vim.keymap.set('n', 'q', '<Cmd>close<CR>', { buffer = buf, nowait = true, desc = 'dsh: close the output' })
  end)
end

--- Stop one process (`dsh/process/stop`: the daemon records `stoppedBy: "person"`).
function M.stop(chat, process_id, cb)
  client().request(chat.root, 'dsh/process/stop', { sessionId = chat.id, processId = process_id }, function(err, res)
    if err then
      require('dsh.notify').warn(('could not stop %s: %s'):format(process_id, err.message or ''))
    elseif not res.stopped then
      require('dsh.notify').notify(process_id .. ' had ended already')
    end
    if cb then
      cb(err, res)
    end
  end)
end

--- :DshProcesses: the chat's background processes in a float (focused).
function M.open(chat)
  if view and api.nvim_win_is_valid(view.win) then
    pcall(api.nvim_win_close, view.win, true)
  end
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  vim.b[buf].dsh_float = 'processes'
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    width = 40,
    height = 1,
    row = math.max(0, math.floor(vim.o.lines / 2) - 3),
    col = math.max(0, math.floor((vim.o.columns - 60) / 2)),
    style = 'minimal',
    border = 'rounded',
    title = ' dsh: background processes ',
    title_pos = 'center',
    footer = FOOTER,
    footer_pos = 'center',
  })
  vim.wo[win].cursorline = true
  view = { win = win, buf = buf, chat = chat, processes = {} }
  fill({}, 'asking the daemon…')
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, desc = 'dsh: ' .. desc })
  end
  for _, lhs in ipairs({ 'q', '<Esc>' }) do
    map(lhs, function()
      pcall(api.nvim_win_close, win, true)
    end, 'close the list')
  end
  for _, lhs in ipairs({ '<CR>', 'o' }) do
    map(lhs, function()
      local p = under_cursor()
      if p then
        M.show_output(chat, p.processId)
      end
    end, "show the process's output")
  end
  map('x', function()
    local p = under_cursor()
    if p and p.running then
      M.stop(chat, p.processId, function()
        M.refresh()
      end)
    elseif p then
      require('dsh.notify').notify(p.processId .. ' has ended')
    end
  end, 'stop the process')
  map('r', M.refresh, 'refresh the list')
  M.refresh()
end

--- A process of `chat` started or ended: the open list follows.
function M.changed(chat)
  if view and view.chat == chat and api.nvim_win_is_valid(view.win) then
    M.refresh()
  end
end

-- ---- stopping the agent ---------------------------------------------------------------------------

--- After :DshStop: when background processes still run, offer to stop them too
--- (`dsh/cancel {keepInbox: true, stopProcesses: true}`: nothing more of the queue is touched).
function M.offer_stop(chat)
  if not (client().info(chat.root) or {}).processes then
    return
  end
  client().request(chat.root, 'dsh/process/list', { sessionId = chat.id }, function(err, res)
    if err or type(res) ~= 'table' then
      return
    end
    local running = vim.tbl_filter(function(p)
      return p.running
    end, res.processes or {})
    if #running == 0 then
      return
    end
    local names = vim.tbl_map(function(p)
      return p.processId .. ' ' .. labels.first_line(p.name or p.command or '', 30)
    end, running)
    local keep = ('Keep them running (:DshProcesses lists them)')
    local stop = ('Stop them too')
    vim.ui.select({ keep, stop }, {
      prompt = ('dsh: %d background process%s still run%s: %s'):format(
        #running,
        #running == 1 and '' or 'es',
        #running == 1 and 's' or '',
        table.concat(names, ', ')
      ),
    }, function(choice)
      if choice == stop then
        M.stop_all(chat)
      end
    end)
  end)
end

--- Stop every background process of the chat's session (`dsh/cancel {stopProcesses}`).
function M.stop_all(chat)
  client().request(chat.root, 'dsh/cancel', { sessionId = chat.id, keepInbox = true, stopProcesses = true })
end

return M
