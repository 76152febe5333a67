-- dsh.nvim configuration: defaults merged with the table given to require('dsh').setup{}.
local M = {}

M.defaults = {
  -- The daemon command (started once per project root, like a language server).
  cmd = { 'dsh-daemon' },
  -- Extra environment for the daemon process (e.g. { DSH_HOME = '/tmp/dsh' }).
  cmd_env = nil,
  -- Sent as `initializationOptions`: provider keys (baseUrl, apiKey, model, thinking, ...),
  -- permissionTimeoutS, tools. See the daemon's protocol.md.
  init_options = {},
  -- A project root is the nearest ancestor holding one of these, else the current directory.
  root_markers = { '.git' },
  -- Chat layout: 'vsplit' (right side), 'split' (bottom) or 'tab'.
  layout = 'vsplit',
  width = 0.42, -- fraction of the editor width for 'vsplit'
  height = 0.45, -- fraction of the editor height for 'split'
  input_height = 4,
  -- Global visual-mode keys (<leader>ds steer, <leader>di inject, <leader>da attach). false: none.
  keys = true,
  -- How long changed lines flash after an edit from the agent (ms, 0: no flash).
  flash_ms = 900,
  -- Push the editor state (active file, cursor/selection, visible lines, diagnostics near the
  -- cursor) with dsh/context/didChange; the daemon adds a short snapshot to a request when it changed.
  ambient = false,
  ambient_debounce = 300,
  -- Turns per transcript page when a session is resumed (older ones load on demand: `go`, :DshOlder).
  page_turns = 20,
  -- How long the daemon may take to answer `initialize` before what waits for it fails (ms).
  start_timeout = 20000,
  -- How long Neovim waits for the daemon to shut down cleanly on exit (ms).
  exit_timeout = 3000,
  -- Debounce of didChange notifications (ms). Requests flush pending changes first anyway.
  debounce_text_changes = 50,
}

M.options = vim.deepcopy(M.defaults)

function M.set(opts)
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  return M.options
end

return M
