-- What this editor does for the agent (protocol.md §9), answered to the daemon's requests:
--   dsh/document/save        write the buffers the agent just edited (undo kept; no other buffer),
--   dsh/editor/diagnostics   vim.diagnostic.get as LSP Diagnostics,
--   dsh/editor/definition|references|symbols|hover
--                            asked of the other language servers attached to the buffer.
-- `capabilities()` is what the client advertises under capabilities.experimental.dsh.
local api = vim.api
local config = require('dsh.config')

local M = {}

M.features = { 'definition', 'references', 'symbols', 'hover' }

function M.capabilities()
  return { documentSave = true, diagnostics = true, diagnosticsSettle = true, languageFeatures = M.features }
end

local function timeout_ms()
  return (config.options.editor_timeout_ms or 5000)
end

--- A loaded buffer for `uri` (loaded now if it was not; nil when it cannot be).
local function buffer_for(uri)
  local ok, buf = pcall(vim.uri_to_bufnr, uri)
  if not ok then
    return nil
  end
  if not api.nvim_buf_is_loaded(buf) then
    pcall(vim.fn.bufload, buf)
  end
  return api.nvim_buf_is_loaded(buf) and buf or nil
end

-- ---- dsh/document/save ---------------------------------------------------------------------------

--- Write exactly the named documents: `:write` in the buffer (BufWrite autocommands run, so the
--- other language servers get didSave; undo history is kept). Never another buffer.
function M.save(params)
  local saved, failed = {}, {}
  for _, uri in ipairs(params and params.uris or {}) do
    local buf = buffer_for(uri)
    if not buf then
      failed[#failed + 1] = { uri = uri, message = 'not loaded in Neovim' }
    else
      local dir = vim.fs.dirname(api.nvim_buf_get_name(buf))
      if dir and vim.fn.isdirectory(dir) == 0 then
        vim.fn.mkdir(dir, 'p') -- a file the edit created, in a new directory
      end
      local ok, err = pcall(api.nvim_buf_call, buf, function()
        vim.cmd('silent keepalt keepjumps write!')
      end)
      if ok and not vim.bo[buf].modified then
        saved[#saved + 1] = uri
      else
        failed[#failed + 1] = { uri = uri, message = ok and 'still modified after writing' or tostring(err) }
      end
    end
  end
  return { saved = saved, failed = #failed > 0 and failed or nil }
end

-- ---- dsh/editor/diagnostics ----------------------------------------------------------------------

local function lsp_diagnostic(d)
  local out = {
    range = {
      start = { line = d.lnum, character = d.col },
      ['end'] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col },
    },
    message = d.message,
    severity = d.severity,
    source = d.source,
  }
  if d.code ~= nil then
    out.code = d.code
  end
  return out
end

-- For `settleMs`: when each buffer's current text was last sent to its language servers (didChange,
-- with the buffer's LSP version) and when its diagnostics were last set. Diagnostics set after
-- the didChange of the current text are a re-check of that text (a report on an older text that
-- was already on its way may still pass; the cap bounds everything else).
local sent = {} -- buf -> { version = LSP version, at = ms }
local checked = {} -- buf -> ms
local QUIET_MS = 100 -- after a re-check, how long to wait for another server's (or kind's) report

local function now_ms()
  return vim.uv.hrtime() / 1e6
end

local group = api.nvim_create_augroup('dsh.editor.diagnostics', { clear = true })
api.nvim_create_autocmd('LspNotify', {
  group = group,
  callback = function(ev)
    local data = ev.data or {}
    local doc = data.method == 'textDocument/didChange' and type(data.params) == 'table' and data.params.textDocument
    local client = doc and vim.lsp.get_client_by_id(data.client_id)
    if client and client.name ~= 'dsh' and type(doc.version) == 'number' then
      local ok, buf = pcall(vim.uri_to_bufnr, doc.uri)
      if ok then
        sent[buf] = { version = doc.version, at = now_ms() }
      end
    end
  end,
})
api.nvim_create_autocmd('DiagnosticChanged', {
  group = group,
  callback = function(ev)
    checked[ev.buf] = now_ms()
  end,
})
api.nvim_create_autocmd('BufWipeout', {
  group = group,
  callback = function(ev)
    sent[ev.buf], checked[ev.buf] = nil, nil
  end,
})

--- Whether `buf`'s language servers have reported on its current text (and then stayed quiet for a
--- moment); a buffer no language server checks never will, so it is settled at once.
local function settled(buf)
  local checkers = vim.tbl_filter(function(c)
    return c.name ~= 'dsh'
  end, vim.lsp.get_clients({ bufnr = buf }))
  if #checkers == 0 then
    return true
  end
  local change, report = sent[buf], checked[buf]
  return change ~= nil
    and change.version == vim.lsp.util.buf_versions[buf]
    and report ~= nil
    and report > change.at
    and now_ms() - report >= QUIET_MS
end

--- Wait until every buffer in `bufs` is settled, `cap_ms` at most: yields in the coroutine Neovim made
--- for the daemon's request (the editor stays responsive), else waits on the event loop. Returns the
--- buffers that are settled.
local function wait_settled(bufs, cap_ms)
  local function all()
    for _, buf in ipairs(bufs) do
      if not settled(buf) then
        return false
      end
    end
    return true
  end
  local deadline = now_ms() + cap_ms
  local co, is_main = coroutine.running()
  if co and not is_main then
    while not all() and now_ms() < deadline do
      vim.defer_fn(function()
        coroutine.resume(co)
      end, 20)
      coroutine.yield()
    end
  else
    vim.wait(cap_ms, all, 20)
  end
  local out = {}
  for _, buf in ipairs(bufs) do
    out[buf] = settled(buf)
  end
  return out
end

function M.diagnostics(params)
  local items = {}
  local function add(buf, fresh)
    local found = vim.diagnostic.get(buf)
    if #found > 0 or fresh == false then
      local list = {}
      for _, d in ipairs(found) do
        list[#list + 1] = lsp_diagnostic(d)
      end
      items[#items + 1] = { uri = vim.uri_from_bufnr(buf), diagnostics = list, settled = fresh }
    end
  end
  if params and type(params.uris) == 'table' then
    local bufs = {}
    for _, uri in ipairs(params.uris) do
      local ok, buf = pcall(vim.uri_to_bufnr, uri)
      if ok and api.nvim_buf_is_loaded(buf) then
        bufs[#bufs + 1] = buf
      end
    end
    local fresh = {}
    if type(params.settleMs) == 'number' and params.settleMs > 0 then
      fresh = wait_settled(bufs, math.min(params.settleMs, 60000))
    end
    for _, buf in ipairs(bufs) do
      add(buf, fresh[buf])
    end
  else
    local seen = {}
    for _, d in ipairs(vim.diagnostic.get(nil)) do
      if not seen[d.bufnr] and api.nvim_buf_get_name(d.bufnr) ~= '' then
        seen[d.bufnr] = true
        add(d.bufnr)
      end
    end
  end
  return { items = items }
end

-- ---- language features ---------------------------------------------------------------------------

local METHOD = {
  definition = 'textDocument/definition',
  references = 'textDocument/references',
  symbols = 'textDocument/documentSymbol',
  workspace_symbols = 'workspace/symbol',
  hover = 'textDocument/hover',
}

--- The language servers (not dsh) attached to `buf` that answer `method`.
local function servers(buf, method)
  local out = {}
  for _, c in ipairs(vim.lsp.get_clients({ bufnr = buf })) do
    if c.name ~= 'dsh' and c:supports_method(method, buf) then
      out[#out + 1] = c
    end
  end
  return out
end

--- Ask every server in `clients` and collect their results: yields when this runs in the coroutine
--- Neovim made for the daemon's request, else waits (bounded) on the event loop.
local function ask_all(clients, method, params, buf)
  local results, pending = {}, #clients
  local co, is_main = coroutine.running()
  local waiting = co and not is_main
  for _, c in ipairs(clients) do
    c:request(method, params, function(err, result)
      if not err and result ~= nil then
        results[#results + 1] = result
      end
      pending = pending - 1
      if pending == 0 and waiting and coroutine.status(co) == 'suspended' then
        coroutine.resume(co)
      end
    end, buf)
  end
  if pending > 0 then
    if waiting then
      local timer = vim.defer_fn(function()
        if pending > 0 and coroutine.status(co) == 'suspended' then
          pending = -1
          coroutine.resume(co)
        end
      end, timeout_ms())
      coroutine.yield()
      pcall(function()
        timer:stop()
      end)
    else
      vim.wait(timeout_ms(), function()
        return pending <= 0
      end, 10)
    end
  end
  return results
end

local function as_list(result)
  if type(result) ~= 'table' then
    return {}
  end
  if result.uri or result.targetUri or result.name then
    return { result }
  end
  return result
end

local function location(l)
  if l.targetUri then
    return { uri = l.targetUri, range = l.targetSelectionRange or l.targetRange }
  end
  return { uri = l.uri, range = l.range }
end

local function flatten_symbols(list, uri, container, out)
  for _, s in ipairs(list) do
    if s.location then -- SymbolInformation / WorkspaceSymbol
      local loc = s.location.range and s.location or { uri = s.location.uri, range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } } }
      out[#out + 1] = { name = s.name, kind = s.kind, location = loc, containerName = s.containerName }
    else -- DocumentSymbol, with children
      out[#out + 1] = {
        name = s.name,
        kind = s.kind,
        location = { uri = uri, range = s.selectionRange or s.range },
        containerName = container,
      }
      flatten_symbols(s.children or {}, uri, s.name, out)
    end
  end
  return out
end

local function hover_text(contents)
  if type(contents) == 'string' then
    return contents
  elseif type(contents) ~= 'table' then
    return ''
  elseif contents.kind or (contents.value and not contents.language) then
    return contents.value or ''
  elseif contents.language then
    return ('```%s\n%s\n```'):format(contents.language, contents.value or '')
  end
  local parts = {}
  for _, c in ipairs(contents) do
    parts[#parts + 1] = hover_text(c)
  end
  return table.concat(parts, '\n\n')
end

--- Any loaded buffer with a server answering workspace/symbol (a workspace-wide query has no file).
local function workspace_buffer()
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and #servers(buf, METHOD.workspace_symbols) > 0 then
      return buf
    end
  end
end

function M.language(feature, params)
  local empty = feature == 'symbols' and { symbols = {} } or feature == 'hover' and { contents = '' } or { locations = {} }
  local buf, method = nil, METHOD[feature]
  if feature == 'symbols' and not params.uri then
    buf, method = workspace_buffer(), METHOD.workspace_symbols
  else
    buf = buffer_for(params.uri)
  end
  local clients = buf and servers(buf, method) or {}
  if #clients == 0 then
    empty.noLanguageServer = true
    return empty
  end
  local request
  if method == METHOD.workspace_symbols then
    request = { query = params.query or '' }
  elseif feature == 'symbols' then
    request = { textDocument = { uri = params.uri } }
  else
    request = { textDocument = { uri = params.uri }, position = params.position }
    if feature == 'references' then
      request.context = { includeDeclaration = params.includeDeclaration ~= false }
    end
  end
  local results = ask_all(clients, method, request, buf)
  if feature == 'hover' then
    local parts = {}
    for _, r in ipairs(results) do
      local text = hover_text(r.contents)
      if text ~= '' then
        parts[#parts + 1] = text
      end
    end
    return { contents = table.concat(parts, '\n\n---\n\n') }
  elseif feature == 'symbols' then
    local out = {}
    for _, r in ipairs(results) do
      flatten_symbols(as_list(r), params.uri, nil, out)
    end
    return { symbols = out }
  end
  local locations = {}
  for _, r in ipairs(results) do
    for _, l in ipairs(as_list(r)) do
      locations[#locations + 1] = location(l)
    end
  end
  return { locations = locations }
end

--- The daemon's request `method` (one of the above), answered.
function M.handle(method, params)
  if method == 'dsh/document/save' then
    return M.save(params)
  elseif method == 'dsh/editor/diagnostics' then
    return M.diagnostics(params)
  end
  local feature = method:match('^dsh/editor/(%a+)$')
  if feature and vim.tbl_contains(M.features, feature) and type(params) == 'table' then
    return M.language(feature, params)
  end
  return nil, vim.lsp.rpc_response_error(vim.lsp.protocol.ErrorCodes.MethodNotFound, method)
end

return M
