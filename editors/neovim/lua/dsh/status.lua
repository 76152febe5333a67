-- The status line component: `require('dsh').status()` — for the chat of the current buffer's
-- project: `dsh ● running · 2 queued · ⚠ permission · ctx 43%` ('' when there is none). Cheap: it
-- reads what the chat already knows.
local api = vim.api
local state = require('dsh.state')
local session = require('dsh.session')
local permissions = require('dsh.permissions')
local client = require('dsh.client')
local chat_mod = require('dsh.chat')

local M = {}

--- The project root of `buf`, looked up once per buffer (the status line is drawn often).
local function root_of(buf)
  local root = vim.b[buf].dsh_status_root
  if not root then
    root = client.root_for(buf)
    vim.b[buf].dsh_status_root = root
  end
  return root
end

function M.status()
  local buf = api.nvim_get_current_buf()
  local ok, chat = pcall(state.lookup, buf, root_of(buf))
  if not ok or not chat then
    return ''
  end
  local st = chat.state
  local parts = { st.status == 'running' and 'dsh ● running' or 'dsh ○ idle' }
  local pending = session.pending(st)
  if pending > 0 then
    parts[#parts + 1] = pending .. ' queued'
  end
  local asking = chat.id and permissions.count(chat.id) or 0
  if asking > 0 then
    parts[#parts + 1] = '⚠ permission'
  end
  local ctx = chat_mod.context_gauge(st)
  if ctx then
    parts[#parts + 1] = ctx
  end
  return table.concat(parts, ' · ')
end

return M
