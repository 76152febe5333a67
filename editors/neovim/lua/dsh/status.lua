-- The status line component, for the chat of the current buffer's project:
-- `dsh ● running · 2 queued · ⚠ permission · ctx 43% · ⛨ workspace-write · Landlock 7 + seccomp +
-- namespaces` ('' when there is none). `status()` is plain text (lualine and the like);
-- `statusline()` is the same with highlight groups for 'statusline' (a sandbox that refuses
-- commands, or full-access, in DshSandboxWarn). Cheap: it reads what the chat already knows.
local api = vim.api
local state = require('dsh.state')
local session = require('dsh.session')
local permissions = require('dsh.permissions')
local client = require('dsh.client')
local chat_mod = require('dsh.chat')
local sandbox = require('dsh.sandbox')

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

--- The parts: { {text, hl?}, … } (empty without a chat).
function M.parts()
  local buf = api.nvim_get_current_buf()
  local root = root_of(buf)
  local ok, chat = pcall(state.lookup, buf, root)
  if not ok or not chat then
    return {}
  end
  local st = chat.state
  local parts = { { st.status == 'running' and 'dsh ● running' or 'dsh ○ idle' } }
  local pending = session.pending(st)
  if pending > 0 then
    parts[#parts + 1] = { pending .. ' queued' }
  end
  local asking = chat.id and permissions.count(chat.id) or 0
  if asking > 0 then
    parts[#parts + 1] = { '⚠ permission', 'DshPermission' }
  end
  local ctx = chat_mod.context_gauge(st)
  if ctx then
    parts[#parts + 1] = { ctx }
  end
  local sb_text, warn = sandbox.describe(st.sandbox or sandbox.status_for(chat.root))
  if sb_text then
    parts[#parts + 1] = { sb_text, warn and 'DshSandboxWarn' or nil }
  end
  return parts
end

function M.status()
  return table.concat(
    vim.tbl_map(function(p)
      return p[1]
    end, M.parts()),
    ' · '
  )
end

function M.statusline()
  local out = {}
  for _, p in ipairs(M.parts()) do
    local text = p[1]:gsub('%%', '%%%%')
    out[#out + 1] = p[2] and ('%#' .. p[2] .. '#' .. text .. '%*') or text
  end
  return table.concat(out, ' · ')
end

return M
