-- dsh.nvim: a chat with the dsh-daemon agent on Neovim's built-in LSP client.
--   require('dsh').setup{ cmd = {'dsh-daemon'}, init_options = {...} }   (optional)
-- See editors/neovim/README.md and :help dsh. This module is the public face: setup, the status line
-- component, and the few functions scripts use; the work is done by one module per job (spec,
-- commands, keymaps, sessions, send, control, events, chat, render, layout, queueview, cards,
-- codeblocks, permissions, review, picker, complete, client, session, state, …).
local api = vim.api
local config = require('dsh.config')
local state = require('dsh.state')
local client = require('dsh.client')
local highlight = require('dsh.highlight')
local spec = require('dsh.spec')
local events = require('dsh.events')
local sessions = require('dsh.sessions')
local send = require('dsh.send')
require('dsh.keymaps') -- gives chat buffers their keys (a state hook)

local M = {}

M.chats = state.chats -- sessionId -> chat
M.current = state.current -- root -> sessionId shown

--- Set up with `opts` over the defaults. Optional: the first :Dsh… command sets up with the
--- defaults. Calling it again applies new options (keys included).
function M.setup(opts)
  config.set(opts)
  highlight.define()
  spec.define()
  spec.map_defaults(config.options.keys)
  events.register(client)
  local group = api.nvim_create_augroup('dsh', { clear = true })
  api.nvim_create_autocmd('ColorScheme', { group = group, callback = highlight.define })
  require('dsh.ambient').setup(group)
  api.nvim_create_autocmd('BufEnter', {
    group = group,
    callback = function(ev)
      if vim.bo[ev.buf].buftype == '' and api.nvim_buf_get_name(ev.buf) ~= '' then
        state.last_file_buf = ev.buf -- what #buffer and #selection mean in the chat input
      end
    end,
  })
  api.nvim_create_autocmd('VimLeavePre', {
    group = group,
    callback = function()
      state.exiting = true
      M.exiting = true
      client.stop_all(config.options.exit_timeout)
    end,
  })
  local cur = api.nvim_get_current_buf()
  if vim.bo[cur].buftype == '' and api.nvim_buf_get_name(cur) ~= '' then
    state.last_file_buf = cur
  end
  M.did_setup = true
  vim.g.dsh_did_setup = true
  return M
end

--- Set up with the defaults unless setup() ran.
function M.ensure_setup()
  if not M.did_setup then
    M.setup()
  end
end

--- The status line component: state, queue, a waiting permission, the context gauge, the sandbox.
--- Plain text (lualine and the like).
function M.status()
  return require('dsh.status').status()
end

--- The same for 'statusline' itself, with highlight groups: `%{%v:lua.…%}` (README "Status line":
--- call it through `package.loaded`, so drawing the status line never loads the plugin).
function M.statusline()
  return require('dsh.status').statusline()
end

--- Deliver the visual selection: 'steer' | 'inject' | 'attach' (the <Plug>(dsh-…) mappings).
function M.selection(delivery)
  M.ensure_setup()
  send.send_selection(delivery)
end

--- Send text to a chat as 'followup' | 'steer' | 'inject' (scripts and tests).
function M.send(chat, kind, text, opts)
  return send.send(chat, kind, text, opts)
end

M.get_chat = sessions.get_chat
M.chat_for = sessions.chat_for

--- A `dsh/event` for the chat of its session (what the LSP client's handler calls).
function M.on_event(root, ev)
  return events.event(root, ev)
end

return M
