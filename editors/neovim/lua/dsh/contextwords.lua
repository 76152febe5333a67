-- The context words CodeCompanion users type, beside #buffer and #selection (send.lua): what each
-- names, read from Neovim when the prompt is sent —
--   #diagnostics  the problems of the file buffer you were last in (vim.diagnostic, every source)
--   #problems     every loaded buffer's problems (the workspace's, as far as Neovim knows them)
--   #viewport     the lines of that buffer visible in its window (the daemon reads them)
--   #quickfix     the quickfix list's entries
--   #symbols      the document symbols of that buffer, from its language server
-- Each gives an attachment (a message the plugin writes, or a range the daemon reads) or a problem
-- that stops the send, as #buffer does. `/symbols` opening the input (M.SLASH) attaches the same
-- symbols to the next prompt without a send (the rest of the line, if any, is sent with them): the
-- language servers are asked without blocking the editor.
local api = vim.api

local M = {}

M.WORDS = {
  { word = '#diagnostics', info = "the problems in the file buffer you were last in (its language servers')" },
  { word = '#problems', info = "every loaded buffer's problems (the workspace's)" },
  { word = '#viewport', info = 'the lines of that buffer visible in its window' },
  { word = '#quickfix', info = 'the entries of the quickfix list' },
  { word = '#symbols', info = "the document symbols of that buffer (its language server's)" },
}

-- The input's own `/` words (send.lua): handled by the plugin, before the daemon's custom commands
-- of the same name.
M.SLASH = {
  { word = '/symbols', info = "attach the document symbols of the file buffer you were last in (its language server's)" },
}

local MAX_ITEMS = 200
local SEVERITY = { 'error', 'warning', 'info', 'hint' }

local function rel(root, path)
  path = vim.fn.fnamemodify(path, ':p')
  if vim.startswith(path, root .. '/') then
    return path:sub(#root + 2)
  end
  return vim.fn.fnamemodify(path, ':~')
end

--- An editor message the plugin writes: `{label, message = {content, source}}`.
local function message(label, text, uri, kind)
  return { label = label, message = { content = text, source = { kind = 'editor', uri = uri, contextKind = kind } } }
end

local function diagnostic_lines(root, diags)
  table.sort(diags, function(a, b)
    if a.bufnr ~= b.bufnr then
      return a.bufnr < b.bufnr
    end
    return a.lnum == b.lnum and a.col < b.col or a.lnum < b.lnum
  end)
  local out = {}
  for i, d in ipairs(diags) do
    if i > MAX_ITEMS then
      out[#out + 1] = ('… and %d more'):format(#diags - MAX_ITEMS)
      break
    end
    local name = rel(root, api.nvim_buf_get_name(d.bufnr))
    local source = d.source and (' [' .. d.source .. ']') or ''
    local msg = (d.message or ''):gsub('\n', ' ')
    out[#out + 1] = ('%s:%d:%d: %s: %s%s'):format(name, d.lnum + 1, d.col + 1, SEVERITY[d.severity] or 'note', msg, source)
  end
  return out
end

function M.diagnostics(root, buf)
  local name = rel(root, api.nvim_buf_get_name(buf))
  local diags = vim.diagnostic.get(buf)
  local lines = diagnostic_lines(root, diags)
  local text = #lines == 0 and ('No problems reported in %s.'):format(name)
    or ('Problems in %s (%d):\n%s'):format(name, #diags, table.concat(lines, '\n'))
  return message('diagnostics ' .. name, text, vim.uri_from_bufnr(buf), 'diagnostics')
end

function M.problems(root)
  local diags = vim.tbl_filter(function(d)
    return api.nvim_buf_is_valid(d.bufnr) and api.nvim_buf_get_name(d.bufnr) ~= ''
  end, vim.diagnostic.get(nil))
  local lines = diagnostic_lines(root, diags)
  local text = #lines == 0 and 'No problems reported in any open file.'
    or ('Problems in the open files (%d):\n%s'):format(#diags, table.concat(lines, '\n'))
  return message(('problems (%d)'):format(#diags), text, vim.uri_from_fname(root), 'diagnostics')
end

--- The visible lines of `buf` (in the window of this tab showing it), as a range the daemon reads.
function M.viewport(root, buf)
  local win
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(w) == buf and api.nvim_win_get_config(w).relative == '' then
      win = w
      break
    end
  end
  if not win then
    return nil, '#viewport: ' .. rel(root, api.nvim_buf_get_name(buf)) .. ' is not in a window'
  end
  local first, last = vim.fn.line('w0', win), vim.fn.line('w$', win)
  local text = api.nvim_buf_get_lines(buf, last - 1, last, false)[1] or ''
  return {
    label = ('viewport %s:%d-%d'):format(rel(root, api.nvim_buf_get_name(buf)), first, last),
    uri = vim.uri_from_bufnr(buf),
    kind = 'selection',
    range = {
      start = { line = first - 1, character = 0 },
      ['end'] = { line = last - 1, character = vim.str_utfindex(text, 'utf-16') },
    },
  }
end

function M.quickfix(root)
  local info = vim.fn.getqflist({ title = 1, items = 1 })
  local items = info.items or {}
  if #items == 0 then
    return nil, '#quickfix: the quickfix list is empty'
  end
  local out = {}
  for i, e in ipairs(items) do
    if i > MAX_ITEMS then
      out[#out + 1] = ('… and %d more'):format(#items - MAX_ITEMS)
      break
    end
    local name = e.bufnr > 0 and rel(root, api.nvim_buf_get_name(e.bufnr)) or ''
    local where = e.lnum > 0 and ('%s:%d:%d'):format(name, e.lnum, math.max(e.col, 1)) or name
    out[#out + 1] = ((where ~= '' and (where .. ': ') or '') .. (e.text or ''):gsub('\n', ' '))
  end
  local title = (info.title or '') ~= '' and (' "' .. info.title .. '"') or ''
  local text = ('The quickfix list%s (%d entries):\n%s'):format(title, #items, table.concat(out, '\n'))
  return message(('quickfix (%d)'):format(#items), text, vim.uri_from_fname(root), 'diagnostics')
end

local function symbol_lines(symbols, depth, out)
  for _, s in ipairs(symbols or {}) do
    if #out >= MAX_ITEMS then
      return
    end
    local kind = vim.lsp.protocol.SymbolKind[s.kind] or 'Symbol'
    local range = s.selectionRange or s.range or (s.location and s.location.range)
    local line = range and (range.start.line + 1) or 0
    local detail = (s.detail and s.detail ~= '') and (' ' .. s.detail:gsub('\n', ' ')) or ''
    out[#out + 1] = ('%s%s %s%s  (line %d)'):format(('  '):rep(depth), kind:lower(), s.name, detail, line)
    symbol_lines(s.children, depth + 1, out)
  end
end

local function symbol_clients(buf)
  return vim.tbl_filter(function(c)
    return c.name ~= 'dsh' and c:supports_method('textDocument/documentSymbol', buf)
  end, vim.lsp.get_clients({ bufnr = buf }))
end

--- The message of `buf`'s symbols as `server` answered them (`result`: DocumentSymbol[] or
--- SymbolInformation[], or nil).
local function symbols_message(root, buf, server, result)
  local name = rel(root, api.nvim_buf_get_name(buf))
  local out = {}
  symbol_lines(result, 0, out)
  local text = #out == 0 and ('No symbols in %s.'):format(name)
    or ('Symbols of %s (%s):\n%s'):format(name, server, table.concat(out, '\n'))
  return message('symbols ' .. name, text, vim.uri_from_bufnr(buf), 'file')
end

--- The document symbols of `buf` from its language servers (not the dsh daemon), asked now.
function M.symbols(root, buf)
  local name = rel(root, api.nvim_buf_get_name(buf))
  local clients = symbol_clients(buf)
  if #clients == 0 then
    return nil, ('#symbols: no language server gives symbols for %s'):format(name)
  end
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) } }
  for _, c in ipairs(clients) do
    local res = c:request_sync('textDocument/documentSymbol', params, 3000, buf)
    if res and res.result then
      return symbols_message(root, buf, c.name, res.result)
    end
  end
  return symbols_message(root, buf, clients[1].name, nil)
end

--- The same without waiting (`/symbols` in the input): `cb(attachment)` or `cb(nil, problem)` once
--- the buffer's language servers answered (vim.lsp.buf_request_all; the dsh client is not asked).
function M.symbols_async(root, buf, cb)
  local name = rel(root, api.nvim_buf_get_name(buf))
  local clients = symbol_clients(buf)
  if #clients == 0 then
    return cb(nil, ('/symbols: no language server gives symbols for %s'):format(name))
  end
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) } }
  vim.lsp.buf_request_all(buf, 'textDocument/documentSymbol', params, function(results)
    local first
    for _, c in ipairs(clients) do -- in the order the servers were attached
      local r = results[c.id]
      if r and r.result then
        return cb(symbols_message(root, buf, c.name, r.result))
      end
      first = first or (r and r.err)
    end
    if first then
      return cb(nil, ('/symbols: %s: %s'):format(clients[1].name, first.message or vim.inspect(first)))
    end
    cb(symbols_message(root, buf, clients[1].name, nil))
  end)
end

--- The attachment the word `word` (without #) names, or nil and a problem; `false` for a word that
--- is not one of these.
function M.attachment(word, root, buf)
  if word == 'quickfix' then
    return M.quickfix(root)
  elseif word == 'problems' then
    return M.problems(root)
  end
  local need = { diagnostics = true, viewport = true, symbols = true }
  if not need[word] then
    return false
  end
  if not buf then
    return nil, '#' .. word .. ': no file buffer'
  end
  return M[word](root, buf)
end

return M
