-- Where the agent's commands run (protocol.md §16 "Sandbox"): the words for a `sandbox/status` (the
-- status line, the window bar, :DshSandbox), :DshSandbox changing the mode through
-- `workspace/didChangeConfiguration` (daemon-wide, like the model), and what :checkhealth says
-- about this machine's confinement.
--
-- full-access hands the agent the whole account: choosing it is always an explicit, confirmed act
-- (a typed mode argument is confirmed too); nothing here picks it on its own.
local client = require('dsh.client')
local config = require('dsh.config')
local notify = require('dsh.notify')
local state = require('dsh.state')

local M = {}

M.MODES = { 'read-only', 'workspace-write', 'full-access' }
M.ABOUT = {
  ['read-only'] = 'commands read, write nothing but a private temp dir, no network',
  ['workspace-write'] = 'commands write inside the project (and allowed paths), network only to allowed domains',
  ['full-access'] = 'unconfined: commands can do anything your account can (each asks first)',
}

--- The last `sandbox/status` known for `root` (any of its chats; the daemon's mode is daemon-wide).
function M.status_for(root)
  local sid = state.current[root]
  local chat = sid and state.chats[sid]
  if chat and chat.state.sandbox then
    return chat.state.sandbox
  end
  for _, c in pairs(state.chats) do
    if c.root == root and c.state.sandbox then
      return c.state.sandbox
    end
  end
end

--- A `sandbox/status` in words: (text, warn). warn: commands cannot run confined here although a
--- confined mode is chosen (they are refused), or the mode is full-access (nothing confines them).
function M.describe(sb)
  if type(sb) ~= 'table' or type(sb.mode) ~= 'string' then
    return nil
  end
  local mode = sb.mode
  if type(sb.configuredMode) == 'string' and sb.configuredMode ~= sb.mode then
    mode = ('%s (plan mode; %s configured)'):format(sb.mode, sb.configuredMode)
  end
  if sb.mode == 'full-access' then
    return ('⚠ sandbox %s · unconfined'):format(mode), true
  end
  if sb.available == false then
    local why = type(sb.reasons) == 'table' and sb.reasons[1] or sb.level or 'no confinement here'
    return ('⚠ sandbox %s · unconfined: commands refused (%s)'):format(mode, tostring(why)), true
  end
  local text = ('⛨ %s · %s'):format(mode, tostring(sb.level or '?'))
  return text, false
end

--- The lines :DshSandbox prints: the mode, the level, what is allowed.
function M.detail_lines(sb)
  if type(sb) ~= 'table' then
    return { 'no sandbox status yet (it comes once a session is open)' }
  end
  local text = M.describe(sb)
  local lines = { text }
  lines[#lines + 1] = '  ' .. (M.ABOUT[sb.mode] or '')
  lines[#lines + 1] = '  level: ' .. tostring(sb.level or '?')
  for _, r in ipairs(type(sb.reasons) == 'table' and sb.reasons or {}) do
    lines[#lines + 1] = '  missing: ' .. tostring(r)
  end
  if type(sb.writable) == 'table' and #sb.writable > 0 then
    lines[#lines + 1] = '  also writable: ' .. table.concat(sb.writable, ', ')
  end
  if type(sb.network) == 'table' and #sb.network > 0 then
    lines[#lines + 1] = '  network: ' .. table.concat(sb.network, ', ')
  end
  return lines
end

local FULL_ACCESS_WARNING = table.concat({
  'full-access runs the agent\'s commands UNCONFINED: they can read, change and delete anything',
  'your account can (ssh keys, other projects, the network), for every session of this daemon.',
  'Each command still asks before it runs. Switch to full-access?',
}, '\n')

--- Send the mode to the daemon of `root` and note it where the person looks.
local function apply(root, mode)
  local io_ = config.options.init_options or {}
  config.options.init_options = io_
  -- A daemon started again starts with it (as :DshModel keeps the model).
  io_.tools = type(io_.tools) == 'table' and io_.tools or {}
  if type(io_.tools.sandbox) == 'table' then
    io_.tools.sandbox.mode = mode
  else
    io_.tools.sandbox = { mode = mode }
  end
  client.notify(root, 'workspace/didChangeConfiguration', { settings = { dsh = { tools = { sandbox = { mode = mode } } } } })
  notify.notify(('sandbox: %s (from the next command)'):format(mode))
end

--- :DshSandbox [mode]: without a mode, show the current one and offer the three; full-access is
--- confirmed whichever way it was chosen.
function M.command(arg)
  local root = client.root_for(0)
  local function choose(mode)
    if not mode or mode == '' then
      return
    end
    if not vim.tbl_contains(M.MODES, mode) then
      return notify.warn(('unknown sandbox mode %q: %s'):format(mode, table.concat(M.MODES, ', ')))
    end
    if mode == 'full-access' then
      local answer = vim.fn.confirm(FULL_ACCESS_WARNING, '&Yes, full access\n&Cancel', 2, 'Warning')
      if answer ~= 1 then
        return notify.notify('sandbox unchanged')
      end
    end
    apply(root, mode)
  end
  arg = arg and vim.trim(arg) or ''
  if arg ~= '' then
    return choose(arg)
  end
  local sb = M.status_for(root)
  local current = sb and sb.configuredMode or sb and sb.mode
  vim.ui.select(M.MODES, {
    prompt = 'dsh sandbox — ' .. (M.describe(sb) or 'no status yet'),
    format_item = function(m)
      return ('%-16s %s%s'):format(m, M.ABOUT[m], m == current and '  (current)' or '')
    end,
  }, choose)
end

-- ---- :checkhealth -------------------------------------------------------------------------------

--- Report this machine's confinement (`dsh-daemon sandbox check --json`) and each running daemon's
--- last `sandbox/status`.
function M.check(health, opts)
  health.start('dsh: sandbox')
  local cmd = vim.list_extend(vim.deepcopy(opts.cmd or {}), { 'sandbox', 'check', '--json' })
  local ok, res = pcall(function()
    return vim.system(cmd, { text = true, env = opts.cmd_env }):wait(15000)
  end)
  local decoded_ok, level = false, nil
  if ok and res and res.stdout and res.stdout ~= '' then
    decoded_ok, level = pcall(vim.json.decode, res.stdout)
  end
  if not (decoded_ok and type(level) == 'table' and level.description) then
    health.info('this daemon cannot say what confinement the machine gives (`' .. table.concat(cmd, ' ') .. '` failed)')
  else
    local reasons = type(level.reasons) == 'table' and level.reasons or {}
    if level.confined and level.namespaces then
      health.ok('this machine confines commands: ' .. level.description)
    elseif level.confined then
      health.warn('commands are confined without namespaces (layer 1): ' .. level.description, reasons)
    else
      local advice = vim.list_extend(vim.deepcopy(reasons), {
        'read-only and workspace-write refuse every command here; :DshSandbox full-access runs them unconfined (each asks)',
      })
      health.warn('no confinement here: ' .. level.description, advice)
    end
  end
  local any = false
  for root in pairs(client.roots) do
    local sb = M.status_for(root)
    if sb then
      any = true
      local text, warn = M.describe(sb)
      ;(warn and health.warn or health.info)(('running for %s: %s'):format(root, text))
    end
  end
  if not any then
    health.info('no session open yet: the running mode shows once one is (:DshSandbox)')
  end
end

return M
