-- The chat's buffer-local keys (config `keys.chat`), and `?`: a float listing them. Defaults never
-- shadow common Vim keys in the chat: the plugin's own actions are on <localleader>, `K` expands the
-- tool card under the cursor (as hover does elsewhere), ]k / [k move between code blocks, and <CR>
-- sends only from the input in normal mode (as in the command-line window).
local api = vim.api
local config = require('dsh.config')
local state = require('dsh.state')
local send = require('dsh.send')
local sessions = require('dsh.sessions')
local control = require('dsh.control')
local picker = require('dsh.picker')
local permissions = require('dsh.permissions')
local queue = require('dsh.queue')
local cards = require('dsh.cards')
local codeblocks = require('dsh.codeblocks')
local complete = require('dsh.complete')

local M = {}

local function chat_of(buf)
  return sessions.chat_for(buf)
end

--- name -> {modes, where ('both' | 'chat' | 'input'), action(buf), description}
M.actions = {
  send = { { 'n', 'i' }, 'both', send.send_input('followup'), 'send the input (queued while busy)' },
  send_input = { { 'n' }, 'input', send.send_input('followup'), 'send the input' },
  steer = { { 'n', 'i' }, 'both', send.send_input('steer'), 'steer the running turn with the input' },
  stop = {
    { 'n', 'i' },
    'both',
    function()
      control.stop(true)
    end,
    'stop the turn, keep the queue',
  },
  queue = {
    { 'n' },
    'both',
    function()
      sessions.with_chat(queue.open)
    end,
    'edit the queue',
  },
  sessions = { { 'n' }, 'both', picker.pick_session, 'pick a session of this project' },
  older = { { 'n' }, 'both', sessions.older, 'load older turns' },
  permission = {
    { 'n' },
    'both',
    function(buf)
      permissions.focus(chat_of(buf))
    end,
    'go to the permission request waiting',
  },
  details = {
    { 'n' },
    'chat',
    function(buf)
      local chat = chat_of(buf)
      if chat and not require('dsh.subagents').toggle(chat, api.nvim_win_get_cursor(0)[1] - 1) then
        cards.show(chat)
      end
    end,
    'expand the tool card under the cursor (output, exit code, diff); fold or unfold a subagent card',
  },
  next_code = {
    { 'n' },
    'chat',
    function()
      codeblocks.jump(1)
    end,
    'next code block',
  },
  prev_code = {
    { 'n' },
    'chat',
    function()
      codeblocks.jump(-1)
    end,
    'previous code block',
  },
  yank_code = {
    { 'n' },
    'chat',
    function()
      codeblocks.yank()
    end,
    'yank the code block under the cursor',
  },
  apply_code = {
    { 'n' },
    'chat',
    function(buf)
      codeblocks.apply(vim.b[buf].dsh_root or vim.fn.getcwd())
    end,
    'apply the code block to a file (hunk review)',
  },
  help = {
    { 'n' },
    'both',
    function()
      M.help()
    end,
    'these keys',
  },
}

M.ORDER = {
  'send',
  'send_input',
  'steer',
  'stop',
  'queue',
  'sessions',
  'older',
  'permission',
  'details',
  'next_code',
  'prev_code',
  'yank_code',
  'apply_code',
  'help',
}

--- Give a chat buffer its keys (`kind`: 'chat' | 'input').
function M.chat(_chat, buf, kind)
  local keys = config.options.keys.chat or {}
  for _, name in ipairs(M.ORDER) do
    local a = M.actions[name]
    if a[2] == 'both' or a[2] == kind then
      for _, lhs in ipairs(config.lhs_list(keys[name])) do
        vim.keymap.set(a[1], lhs, function()
          a[3](buf)
        end, { buffer = buf, nowait = true, desc = 'dsh: ' .. a[4] })
      end
    end
  end
  if kind == 'input' then
    complete.attach(buf, config.options.complete_on_type)
  end
end

--- The lines of the `?` float.
function M.help_lines()
  local keys = config.options.keys
  local out = { 'In the chat (transcript and input):' }
  for _, name in ipairs(M.ORDER) do
    local a = M.actions[name]
    local lhs = vim.tbl_map(config.display, config.lhs_list((keys.chat or {})[name]))
    if #lhs > 0 then
      local where = a[2] == 'chat' and ' (transcript)' or a[2] == 'input' and ' (input)' or ''
      out[#out + 1] = ('  %-16s %s%s'):format(table.concat(lhs, ' '), a[4], where)
    end
  end
  out[#out + 1] = ''
  out[#out + 1] = 'In the input: #buffer, #selection, @path attach context (<C-x><C-o> completes).'
  out[#out + 1] = ''
  out[#out + 1] = 'Visual mode, any buffer:'
  for _, pair in ipairs({ { 'steer', 'steer with the selection' }, { 'inject', 'inject it as context' }, { 'attach', 'attach it to the next prompt' } }) do
    local lhs = config.key(keys[pair[1]])
    out[#out + 1] = ('  %-16s %s'):format(lhs or ('<Plug>(dsh-' .. pair[1] .. ')'), pair[2])
  end
  local p = keys.prompt or {}
  out[#out + 1] = ''
  out[#out + 1] = ('Permission prompt: <CR> on a choice, %s once, %s always, %s reject, %s cancel the turn, %s review, %s hide'):format(
    config.key(p.allow_once) or '-',
    config.key(p.allow_always) or '-',
    config.key(p.reject) or '-',
    config.key(p.cancel) or '-',
    config.key(p.review) or '-',
    table.concat(vim.tbl_map(config.display, config.lhs_list(p.hide)), '/')
  )
  out[#out + 1] = ''
  -- Every command the plugin defines (spec.lua's list), wrapped.
  local line = 'Commands:'
  for _, c in ipairs(require('dsh.spec').commands) do
    if #line + #c[1] + 2 > 78 then
      out[#out + 1] = line
      line = ' '
    end
    line = line .. ' :' .. c[1]
  end
  out[#out + 1] = line .. '    (:help dsh)'
  return out
end

--- `?`: the keys, in a float (q, <Esc> or ? close it).
function M.help()
  local lines = M.help_lines()
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  vim.b[buf].dsh_float = 'help'
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l) + 2)
  end
  width = math.min(width, vim.o.columns - 4)
  local height = math.min(#lines, vim.o.lines - 4)
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    width = width,
    height = height,
    border = 'rounded',
    title = ' dsh keys ',
    title_pos = 'center',
    style = 'minimal',
    zindex = 60,
  })
  for _, lhs in ipairs({ 'q', '<Esc>', '?' }) do
    vim.keymap.set('n', lhs, function()
      if api.nvim_win_is_valid(win) then
        api.nvim_win_close(win, true)
      end
    end, { buffer = buf, nowait = true })
  end
  return win
end

state.hooks.buffer = M.chat

return M
