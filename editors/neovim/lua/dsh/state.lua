-- What this Neovim knows about its chats, and nothing else: the chat of each session, the session
-- each project root shows, the chat shown before its first prompt (a draft: no session yet), and
-- the hooks higher modules register (so lower ones never require them).
local api = vim.api

local M = {}

---@type table<string, dsh.Chat> sessionId -> chat
M.chats = {}
---@type table<string, string> root -> sessionId of its current chat
M.current = {}
---@type table<string, dsh.Chat> root -> its draft chat (shown, no session until the first prompt)
M.drafts = {}
--- Neovim is exiting (daemons going away are not reported then).
M.exiting = false
--- The last file buffer the person was in (what #buffer and #selection mean from the chat input).
M.last_file_buf = nil

--- Hooks set by higher modules: `buffer(chat, buf, kind)` gives a chat buffer its keys;
--- `changed(chat)` is called when what the status line shows may have changed.
M.hooks = {
  buffer = function(_, _, _) end,
  changed = function(_) end,
}

--- The chat a buffer belongs to (its own chat/input/queue buffers, else the project's current one
--- or its draft), without attaching anything.
---@return dsh.Chat?
function M.lookup(buf, root)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local sid = vim.b[buf].dsh_session
  local chat = sid and M.chats[sid]
  if chat and not chat.deleted then
    return chat
  end
  local draft_root = vim.b[buf].dsh_draft
  if draft_root and M.drafts[draft_root] then
    return M.drafts[draft_root]
  end
  if chat and chat.deleted then
    root = root or chat.root
  end
  if root then
    local current = M.current[root]
    return (current and M.chats[current]) or M.drafts[root]
  end
end

return M
