-- dsh.nvim configuration: defaults merged with the table given to require('dsh').setup{} (optional:
-- without it the defaults apply). Every option has a `*dsh-option-NAME*` tag in doc/dsh.txt.
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
  -- Chat layout: 'vsplit' (right side), 'split' (bottom), 'tab' or 'float' (centred, over the editor).
  layout = 'vsplit',
  width = 0.42, -- fraction of the editor width for 'vsplit' and 'float'
  height = 0.45, -- fraction of the editor height for 'split' ('float': 0.8)
  input_height = 4,
  -- Keys: a table merged over the defaults below (a key set to false is not mapped), or false for
  -- no global keys at all (the chat's own keys stay).
  keys = {
    -- Visual mode, any buffer. Never under <leader>d (debuggers use it).
    steer = '<leader>Ds', -- steer with the selection
    inject = '<leader>Di', -- inject the selection as context
    attach = '<leader>Da', -- attach the selection to the next prompt
    -- Normal mode, any buffer: none by default (use the <Plug>(dsh-…) mappings or the commands).
    toggle = false,
    permission = false,
    -- In the chat (transcript and input).
    chat = {
      send = '<C-s>', -- normal and insert mode
      send_input = '<CR>', -- normal mode in the input only (as in the command-line window)
      steer = '<M-CR>',
      stop = '<C-c>',
      queue = '<localleader>q',
      sessions = '<localleader>r',
      older = '<localleader>o',
      permission = '<localleader>p',
      details = 'K', -- transcript: the tool card under the cursor, expanded
      next_code = ']k',
      prev_code = '[k',
      yank_code = '<localleader>y',
      apply_code = '<localleader>a',
      help = '?',
    },
    -- In the permission prompt. No single key answers: <CR> on a choice line, or these.
    prompt = {
      allow_once = 'gy',
      allow_always = 'gY', -- a sandbox widening: for this session
      allow_saved = 'gA', -- a sandbox widening: saved to config.json, every session (persistWidening)
      reject = 'gn',
      cancel = 'gC',
      review = 'gd', -- edits: review hunk by hunk in a diff tab
      review_inline = 'gi', -- edits: review hunk by hunk in the file's own buffer (keys.inline)
      -- an edit overlapping your unsaved changes in its file: save both (allow_once keeps the edit
      -- in the buffer only)
      allow_both = 'gw',
      approve_ask = 'ga', -- a plan's approval: run it in ask mode (allow_once: accept edits)
      hide = { 'q', '<Esc>' }, -- the request stays open (:DshPermission shows it again)
    },
    -- In an inline review (the file's buffer, the cursor on a hunk): the decision answers once
    -- every hunk is kept or rejected.
    inline = {
      keep = '<localleader>k',
      reject = '<localleader>x',
      keep_all = '<localleader>K',
      reject_all = '<localleader>X',
    },
    -- In a hunk review (the proposal's window). ]c / [c move between hunks.
    review = {
      accept = '<localleader>a', -- keep this hunk, go to the next
      reject = '<localleader>r', -- take this hunk back out of the proposal
      accept_all = '<localleader>A', -- answer: allow the whole edit
      reject_all = '<localleader>R', -- answer: reject the whole edit
      submit = '<localleader>s', -- answer with what the proposal now holds
      close = 'q', -- close the review, answer nothing (the request stays open)
    },
  },
  -- How long changed lines flash after an edit from the agent (ms, 0: no flash).
  flash_ms = 900,
  -- How long a language server may take to answer the agent's definition/references/symbols/hover,
  -- and to report on a file loaded for the agent before an edit.
  editor_timeout_ms = 4000,
  -- Push the editor state (active file, cursor/selection, visible lines, diagnostics near the
  -- cursor) with dsh/context/didChange; the daemon adds a short snapshot to a request when it changed.
  ambient = false,
  ambient_debounce = 300,
  -- Turns per transcript page when a session is resumed (older ones load on demand).
  page_turns = 20,
  -- How long the daemon may take to answer `initialize` before what waits for it fails (ms).
  start_timeout = 20000,
  -- How long Neovim waits for the daemon to shut down cleanly on exit (ms).
  exit_timeout = 3000,
  -- Debounce of didChange notifications (ms). Requests flush pending changes first anyway.
  debounce_text_changes = 50,
  -- Streamed text is written to the transcript at most once per this many ms (one redraw).
  render_interval = 20,
  -- How long the daemon holds a streamed delta to send it merged with the ones after it
  -- (initializationOptions.deltaCoalesceMs, protocol.md §1): a 5,000-delta burst then reaches Neovim
  -- as a few dozen notifications, each handled by Neovim's LSP client, instead of 5,000. About one
  -- frame; 0: merged only while Neovim falls behind. init_options.deltaCoalesceMs wins.
  delta_coalesce_ms = 16,
  -- A streamed line longer than this many bytes is continued on the next line (marked ↩), which
  -- bounds what one write of a pathological single-line reply costs (Neovim 0.11 draws a 50 KB
  -- wrapped line well: breaking it sooner only makes the window scroll more, bench/neovim_bench.py);
  -- code blocks are yanked and applied with such breaks joined. 0: never.
  max_line = 100000,
  -- Highlight the transcript with tree-sitter (markdown, code blocks in their language) when the
  -- parser is there; otherwise (or false) Vim's markdown syntax.
  treesitter = true,
  -- Models offered by :DshModel (any other name can be typed).
  models = { 'deepseek-v4-flash', 'deepseek-v4-pro' },
  -- Session picker (:DshSessions): 'float' (list and preview) or 'select' (vim.ui.select).
  picker = 'float',
  -- Complete #buffer, #selection and @file in the input as they are typed (<C-x><C-o> always works).
  complete_on_type = true,
}

M.options = vim.deepcopy(M.defaults)

--- Merge `opts` over the defaults. `keys = false` keeps the chat's keys and drops the global ones.
function M.set(opts)
  opts = vim.deepcopy(opts or {})
  local keys = opts.keys
  opts.keys = nil
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  if keys == false then
    for _, name in ipairs({ 'steer', 'inject', 'attach', 'toggle', 'permission' }) do
      M.options.keys[name] = false
    end
  elseif type(keys) == 'table' then
    M.options.keys = vim.tbl_deep_extend('force', M.options.keys, keys)
  end
  return M.options
end

--- The model named in the options (flat or under `provider` of `init_options`), if any.
function M.model()
  local io_ = M.options.init_options or {}
  return (type(io_.provider) == 'table' and io_.provider.model) or io_.model
end

--- A key as the person types it: <leader> and <localleader> replaced by what they are now.
function M.display(lhs)
  if not lhs then
    return nil
  end
  -- keytrans: a space leader reads <Space>, not a blank
  local leader = vim.fn.keytrans(vim.g.mapleader or '\\')
  local localleader = vim.fn.keytrans(vim.g.maplocalleader or '\\')
  return (lhs:gsub('<[Ll]ocal[Ll]eader>', function()
    return localleader
  end):gsub('<[Ll]eader>', function()
    return leader
  end))
end

--- The first key of `value` (a key or a list, false: none) as the person types it.
function M.key(value)
  return M.display(M.lhs_list(value)[1])
end

--- The keys of `value` as a list ({} for false/nil).
function M.lhs_list(value)
  if not value then
    return {}
  end
  return type(value) == 'table' and value or { value }
end

return M
