-- What this editor does for the agent (protocol.md §9), answered to the daemon's requests:
--   dsh/document/save        write the buffers the agent just edited (undo kept; no other buffer);
--                            with `texts`, write that text instead and keep the person's unsaved
--                            changes in the buffer (documentSaveText, issue 37),
--   dsh/editor/diagnostics   vim.diagnostic.get as LSP Diagnostics (once the servers checked the
--                            text: settle.lua),
--   dsh/editor/definition|references|symbols|hover
--                            asked of the other language servers attached to the buffer.
-- A file the daemon asks about that has no loaded buffer is loaded for the language servers only
-- (borrowed.lua) and let go when the agent is done with it.
-- `capabilities()` is what the client advertises under capabilities.experimental.dsh.
local api = vim.api
local borrowed = require('dsh.borrowed')
local config = require('dsh.config')
local settle = require('dsh.settle')

local M = {}

M.features = { 'definition', 'references', 'symbols', 'hover' }

function M.capabilities()
  return { documentSave = true, documentSaveText = true, diagnostics = true, diagnosticsSettle = true, languageFeatures = M.features }
end

local function timeout_ms()
  return (config.options.editor_timeout_ms or 5000)
end

-- ---- dsh/document/save ---------------------------------------------------------------------------

--- The lines a buffer shows for `text` (its 'fileformat' line ends taken off), and whether it ends
--- with a line break.
local function text_lines(buf, text)
  local eol = text:sub(-1) == '\n'
  local lines = vim.split(eol and text:sub(1, -2) or text, '\n', { plain = true })
  if vim.bo[buf].fileformat == 'dos' then
    for i, l in ipairs(lines) do
      lines[i] = l:gsub('\r$', '')
    end
  end
  return lines, eol
end

--- Change the buffer's lines to `target`, hunk by hunk (marks and cursors elsewhere stay put).
local function set_lines_by_hunks(buf, target)
  local current = api.nvim_buf_get_lines(buf, 0, -1, false)
  local hunks = vim.diff(table.concat(current, '\n') .. '\n', table.concat(target, '\n') .. '\n', { result_type = 'indices' })
  for i = #hunks, 1, -1 do
    local a, na, b, nb = unpack(hunks[i])
    local from = na == 0 and a or a - 1
    api.nvim_buf_set_lines(buf, from, from + na, false, vim.list_slice(target, b, b + nb - 1))
  end
end

--- Write `text` to the buffer's file while the buffer keeps what it shows, the person's unsaved
--- changes included (issue 37: the agent's edit reaches the file, their draft does not). Written
--- through the buffer (`:write` of `text`, then `:undo`), so Neovim knows the file's new state and the
--- person's next `:w` asks nothing; the write is a branch of the undo tree the buffer leaves at once,
--- so `u` still goes from the agent's edit back to their draft, and the buffer stays modified.
local function write_text(buf, text)
  local shown = api.nvim_buf_get_lines(buf, 0, -1, false)
  local lines, eol = text_lines(buf, text)
  local views = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    views[win] = api.nvim_win_call(win, vim.fn.winsaveview)
  end
  local fixeol, had_eol = vim.bo[buf].fixeol, vim.bo[buf].eol
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd('let &g:undolevels = &g:undolevels') -- a new undo block: the agent's edit stays its own
    set_lines_by_hunks(buf, lines)
    vim.bo[buf].fixeol, vim.bo[buf].eol = false, eol
    -- No autocommands: a format-on-save must not rewrite this passing state (the buffer shows it
    -- only until the undo below), nor plugins react to it.
    local wrote, werr = pcall(vim.cmd, 'silent noautocmd keepalt keepjumps write!')
    vim.bo[buf].fixeol, vim.bo[buf].eol = fixeol, had_eol
    vim.cmd('silent undo')
    if not wrote then
      error(werr, 0)
    end
  end)
  if not vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), shown) then
    api.nvim_buf_set_lines(buf, 0, -1, false, shown) -- never lose what the buffer showed
  end
  for win, view in pairs(views) do
    if api.nvim_win_is_valid(win) then
      api.nvim_win_call(win, function()
        vim.fn.winrestview(view)
      end)
    end
  end
  if not ok then
    return tostring(err)
  end
  local fh = io.open(api.nvim_buf_get_name(buf), 'rb')
  local on_disk = fh and fh:read('*a')
  if fh then
    fh:close()
  end
  if on_disk ~= text then
    return 'the file does not hold the text after writing it'
  end
  return nil
end

--- Write exactly the named documents: `:write` in the buffer (BufWrite autocommands run, so the
--- other language servers get didSave; undo history is kept). Never another buffer. A document named
--- in `params.texts` gets that text in its file instead, and keeps its unsaved changes (write_text).
function M.save(params)
  local saved, failed = {}, {}
  local texts = type(params) == 'table' and type(params.texts) == 'table' and params.texts or {}
  for _, uri in ipairs(params and params.uris or {}) do
    local buf = borrowed.take(uri, false)
    if not buf then
      failed[#failed + 1] = { uri = uri, message = 'not loaded in Neovim' }
    elseif type(texts[uri]) == 'string' then
      local problem = write_text(buf, texts[uri])
      if problem then
        failed[#failed + 1] = { uri = uri, message = problem }
      else
        saved[#saved + 1] = uri
      end
      borrowed.done(buf, false)
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
      borrowed.done(buf, false)
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
    -- After an edit (`settleMs`): once the servers checked the edited text. A file with no loaded
    -- buffer is loaded for its servers (and held until the edit is done), and asked once they checked
    -- the text it was loaded with: what it had before an edit is then known, so its old errors are
    -- not told as new; a file no server checks is answered at once.
    local after_edit = type(params.settleMs) == 'number' and params.settleMs > 0
    local bufs, loaded_now = {}, {}
    for _, uri in ipairs(params.uris) do
      local buf, fresh = borrowed.take(uri, true)
      if buf then
        bufs[#bufs + 1] = buf
        if fresh then
          loaded_now[#loaded_now + 1] = buf
        end
      end
    end
    local settled = {}
    if after_edit then
      settled = settle.wait(bufs, math.min(params.settleMs, 60000))
    elseif #loaded_now > 0 then
      settled = settle.wait(loaded_now, timeout_ms())
    end
    for _, buf in ipairs(bufs) do
      add(buf, settled[buf])
    end
    for _, buf in ipairs(bufs) do
      borrowed.done(buf, after_edit or #settle.checkers(buf) == 0)
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

--- `feature` asked of `buf`'s servers (none: `empty` with noLanguageServer).
local function ask_language(feature, method, buf, params, empty)
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

function M.language(feature, params)
  local empty = feature == 'symbols' and { symbols = {} } or feature == 'hover' and { contents = '' } or { locations = {} }
  if feature == 'symbols' and not params.uri then
    return ask_language(feature, METHOD.workspace_symbols, workspace_buffer(), params, empty)
  end
  local buf = borrowed.take(params.uri, true)
  local answer = ask_language(feature, METHOD[feature], buf, params, empty)
  if buf then
    borrowed.done(buf, false)
  end
  return answer
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
