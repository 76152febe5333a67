-- One daemon per project root: vim.lsp.start({...}, {attach = false}); buffers under the root are
-- attached with vim.lsp.buf_attach_client so the daemon sees their unsaved text. Every request waits
-- until the client is initialized. What the daemon sends goes to the listeners the higher modules
-- register in `M.on` (this module requires none of them).
local config = require('dsh.config')
local notify = require('dsh.notify')

local M = {}

--- Set by events.lua: `event(root, params)`, `ready(root, client)`, `exit(root, code, signal)`,
--- `permission(root, params, ctx)` (returns the reply), `apply_edit(root, params, ctx)`,
--- `editor(method, params)` (the editor's abilities, protocol.md §9: returns the reply),
--- `offers()` (what the client offers the daemon: capabilities.experimental.dsh).
M.on = {
  event = function() end,
  ready = function() end,
  exit = function() end,
  permission = function()
    return { outcome = 'cancelled' }
  end,
  apply_edit = function()
    return { applied = false, failureReason = 'not ready' }
  end,
  editor = function(method)
    return nil, vim.lsp.rpc_response_error(vim.lsp.protocol.ErrorCodes.MethodNotFound, method)
  end,
  offers = function()
    return {}
  end,
}

--- The daemon's requests for the editor's abilities (protocol.md §9).
local EDITOR_METHODS = {
  'dsh/document/save',
  'dsh/editor/diagnostics',
  'dsh/editor/definition',
  'dsh/editor/references',
  'dsh/editor/symbols',
  'dsh/editor/hover',
}

---@class dsh.Root
---@field root string
---@field id integer?
---@field client vim.lsp.Client?
---@field ready boolean
---@field waiting {ok: fun(client: vim.lsp.Client), fail: fun(msg: string)?}[]
---@field info table? capabilities.experimental.dsh from the initialize result
---@field stopped boolean?

---@type table<string, dsh.Root>
M.roots = {}

local augroup = vim.api.nvim_create_augroup('dsh.client', { clear = true })

local function normalize(path)
  local out = vim.fs.normalize(vim.fn.fnamemodify(path, ':p')):gsub('(.)/$', '%1')
  return out
end

--- The project root of a buffer: its chat's root, else the nearest marker ancestor, else the cwd.
function M.root_for(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  local chat_root = vim.b[buf].dsh_root
  if chat_root then
    return chat_root
  end
  local name = vim.api.nvim_buf_get_name(buf)
  if vim.bo[buf].buftype == '' and name ~= '' and not name:match('^%a[%w+.-]*://') then
    local found = vim.fs.root(buf, config.options.root_markers)
    if found then
      return normalize(found)
    end
  end
  return normalize(vim.fn.getcwd())
end

--- Whether a buffer is a file under `root` that the daemon should see.
local function is_under(buf, root)
  if not vim.api.nvim_buf_is_loaded(buf) or vim.bo[buf].buftype ~= '' then
    return false
  end
  local name = vim.api.nvim_buf_get_name(buf)
  if name == '' or name:match('^%a[%w+.-]*://') then
    return false
  end
  name = normalize(name)
  return name == root or vim.startswith(name, root .. '/')
end

local function attach_buffers(entry)
  if not entry.id then
    return
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if is_under(buf, entry.root) and not vim.lsp.buf_is_attached(buf, entry.id) then
      vim.lsp.buf_attach_client(buf, entry.id)
    end
  end
end

local handlers_for -- defined below

--- Start (or reuse) the daemon for `root` and call `cb(client)` once it is initialized, in call
--- order; `fail(message)` instead when the daemon goes away before that.
---@param root string
---@param cb fun(client: vim.lsp.Client)?
---@param fail fun(message: string)?
function M.ensure(root, cb, fail)
  local entry = M.roots[root]
  if entry and not entry.stopped then
    if cb then
      if entry.ready then
        cb(entry.client)
      else
        table.insert(entry.waiting, { ok = cb, fail = fail })
      end
    end
    return entry
  end
  local opts = config.options
  entry = { root = root, ready = false, waiting = cb and { { ok = cb, fail = fail } } or {} }
  M.roots[root] = entry
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.workspace.applyEdit = true
  capabilities.window.workDoneProgress = true
  capabilities.experimental = { dsh = M.on.offers() }
  local id = vim.lsp.start({
    name = 'dsh',
    cmd = opts.cmd,
    cmd_env = opts.cmd_env,
    cmd_cwd = root,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = vim.tbl_extend('keep', opts.init_options or {}, { deltaCoalesceMs = opts.delta_coalesce_ms }),
    capabilities = capabilities,
    handlers = handlers_for(root),
    flags = { debounce_text_changes = opts.debounce_text_changes },
    on_init = function(client, result)
      entry.client = client
      entry.info = vim.tbl_get(result or {}, 'capabilities', 'experimental', 'dsh')
      entry.ready = true
      attach_buffers(entry)
      M.on.ready(root, client)
      local waiting = entry.waiting
      entry.waiting = {}
      for _, w in ipairs(waiting) do -- in call order, before anything sent later
        local ok, err = pcall(w.ok, client)
        if not ok then
          vim.schedule(function()
            notify.error(tostring(err))
          end)
        end
      end
    end,
    on_exit = function(code, signal)
      entry.stopped = true
      entry.ready = false
      local waiting = entry.waiting
      entry.waiting = {}
      for _, w in ipairs(waiting) do
        if w.fail then
          vim.schedule(function()
            w.fail(('the daemon exited before it was ready (code %s)'):format(tostring(code)))
          end)
        end
      end
      if M.roots[root] == entry then
        M.roots[root] = nil
      end
      vim.schedule(function()
        M.on.exit(root, code, signal)
      end)
    end,
  }, {
    attach = false,
    reuse_client = function()
      return false
    end,
  })
  if not id then
    M.roots[root] = nil
    local msg = 'could not start ' .. table.concat(opts.cmd, ' ')
    notify.error(msg)
    for _, w in ipairs(entry.waiting) do
      if w.fail then
        w.fail(msg)
      end
    end
    return nil
  end
  entry.id = id
  -- Neovim leaves a client whose `initialize` was refused (e.g. a bad provider setting) half-started
  -- (it shows the daemon's error itself): give up on it after a while and fail what was waiting, so
  -- nothing typed is lost.
  vim.defer_fn(function()
    if entry.ready or entry.stopped then
      return
    end
    entry.stopped = true
    if M.roots[root] == entry then
      M.roots[root] = nil
    end
    local waiting = entry.waiting
    entry.waiting = {}
    local msg = ('the daemon did not start within %d ms (see the message above, :checkhealth dsh, :LspLog)'):format(
      opts.start_timeout
    )
    notify.error(msg)
    for _, w in ipairs(waiting) do
      if w.fail then
        w.fail(msg)
      end
    end
    local c = vim.lsp.get_client_by_id(id)
    if c then
      c:stop(true)
    end
  end, opts.start_timeout)
  return entry
end

--- Send a request to the daemon of `root`; `cb(err, result)`. Errors are shown unless cb takes them.
---@param root string
---@param method string
---@param params table
---@param cb fun(err: table?, result: any)?
function M.request(root, method, params, cb)
  local function done(err, result)
    if err and not cb then
      notify.error(('%s failed: %s'):format(method, err.message or vim.inspect(err)))
    end
    if cb then
      cb(err, result)
    end
  end
  M.ensure(root, function(client)
    local ok = client:request(method, params, done)
    if not ok then
      done({ message = 'the daemon is not running' })
    end
  end, function(message)
    done({ message = message })
  end)
end

--- Send a notification once the daemon is up.
function M.notify(root, method, params)
  M.ensure(root, function(client)
    client:notify(method, params)
  end)
end

--- Make sure the daemon of `root` has `buf` (didOpen, then didChange as it is edited).
function M.attach(root, buf)
  M.ensure(root, function()
    local entry = M.roots[root]
    if entry and entry.id and vim.api.nvim_buf_is_valid(buf) and not vim.lsp.buf_is_attached(buf, entry.id) then
      vim.lsp.buf_attach_client(buf, entry.id)
    end
  end)
end

--- Stop every daemon (shutdown + exit) and wait up to `timeout_ms` for them to exit, so queues are
--- parked and leases released before Neovim goes (VimLeavePre).
function M.stop_all(timeout_ms)
  local entries = {}
  for _, entry in pairs(M.roots) do
    if entry.client then
      entries[#entries + 1] = entry
      entry.client:stop() -- a no-op when vim.lsp's own exit handler already asked
    end
  end
  if timeout_ms and timeout_ms > 0 and #entries > 0 then
    -- client:is_stopped() is true as soon as a stop was asked: wait for the process itself.
    vim.wait(timeout_ms, function()
      for _, entry in ipairs(entries) do
        local closing = entry.stopped or pcall(function()
          assert(entry.client.rpc.is_closing())
        end)
        if not closing then
          return false
        end
      end
      return true
    end, 20)
  end
end

function M.info(root)
  local entry = M.roots[root]
  return entry and entry.info
end

vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufEnter', 'BufFilePost' }, {
  group = augroup,
  callback = function(ev)
    -- Deferred: on BufReadPost the filetype is not detected yet, and didOpen sends it as languageId
    -- (the language tag of a selection's code fence).
    vim.schedule(function()
      if not vim.api.nvim_buf_is_valid(ev.buf) then
        return
      end
      for root, entry in pairs(M.roots) do
        if entry.ready and entry.id and is_under(ev.buf, root) and not vim.lsp.buf_is_attached(ev.buf, entry.id) then
          vim.lsp.buf_attach_client(ev.buf, entry.id)
        end
      end
    end)
  end,
})

handlers_for = function(root)
  local handlers = {
    ['dsh/event'] = function(_, params)
      M.on.event(root, params)
    end,
    ['dsh/requestPermission'] = function(_, params, ctx)
      return M.on.permission(root, params, ctx)
    end,
    ['workspace/applyEdit'] = function(_, params, ctx)
      return M.on.apply_edit(root, params, ctx)
    end,
  }
  for _, method in ipairs(EDITOR_METHODS) do
    handlers[method] = function(_, params)
      return M.on.editor(method, params)
    end
  end
  return handlers
end

return M
