-- When a buffer's language servers have checked its current text (protocol.md §9, `settleMs`):
-- Neovim says which text it sent them (`LspNotify` for didOpen/didChange, with the buffer's LSP
-- version) and when their diagnostics were set (`DiagnosticChanged`). A report that came after the
-- current text was sent, then a moment without another, is a check of that text. A server that says
-- which version its report is for (publishDiagnostics `version`, as basedpyright does) is believed:
-- its report on an older text (one still on its way when the text changed, e.g. the check of the
-- text a buffer was loaded with, arriving after an agent edit) never counts.
local api = vim.api

local M = {}

local QUIET_MS = 100 -- after a report, how long to wait for another server's (or kind's)

local sent = {} -- buf -> { version = LSP version, at = ms }: the text last sent to its servers
local checked = {} -- buf -> ms: when its diagnostics were last set
local reported = {} -- buf -> { [client id] = version }: the version a server's last report named

local function now_ms()
  return vim.uv.hrtime() / 1e6
end

local function checkers(buf)
  return vim.tbl_filter(function(c)
    return c.name ~= 'dsh'
  end, vim.lsp.get_clients({ bufnr = buf }))
end
M.checkers = checkers

local group = api.nvim_create_augroup('dsh.settle', { clear = true })
api.nvim_create_autocmd('LspNotify', {
  group = group,
  callback = function(ev)
    local data = ev.data or {}
    local method = data.method
    local doc = (method == 'textDocument/didChange' or method == 'textDocument/didOpen')
      and type(data.params) == 'table'
      and data.params.textDocument
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
api.nvim_create_autocmd({ 'BufWipeout', 'BufUnload' }, {
  group = group,
  callback = function(ev)
    sent[ev.buf], checked[ev.buf], reported[ev.buf] = nil, nil, nil
  end,
})

-- The version a report is for is in publishDiagnostics only, which no event carries: noted on the
-- way to whichever handler is installed (the user's own included), which then runs as before.
local METHOD = 'textDocument/publishDiagnostics'
local installed = vim.lsp.handlers[METHOD]
local function noted(err, params, ctx, ...)
  if type(params) == 'table' and type(params.version) == 'number' and type(params.uri) == 'string' then
    local ok, fname = pcall(vim.uri_to_fname, params.uri)
    if ok and vim.fn.bufexists(fname) == 1 then
      local buf = vim.uri_to_bufnr(params.uri) -- the existing buffer (none is made for a report)
      reported[buf] = reported[buf] or {}
      reported[buf][ctx.client_id] = params.version
    end
  end
  return installed(err, params, ctx, ...)
end
if installed then
  vim.lsp.handlers[METHOD] = noted
end

--- Whether `buf`'s language servers have reported on its current text (and then stayed quiet for a
--- moment); a buffer no language server checks never will, so it is settled at once.
function M.settled(buf)
  local servers = checkers(buf)
  if #servers == 0 then
    return true
  end
  local change, report = sent[buf], checked[buf]
  if change == nil or change.version ~= vim.lsp.util.buf_versions[buf] then
    return false
  end
  for _, c in ipairs(servers) do
    local version = reported[buf] and reported[buf][c.id]
    if version ~= nil and version ~= change.version then
      return false -- its last report is on an older text: the one on this text is still to come
    end
  end
  return report ~= nil and report > change.at and now_ms() - report >= QUIET_MS
end

--- Wait until every buffer in `bufs` is settled, `cap_ms` at most: yields in the coroutine Neovim made
--- for the daemon's request (the editor stays responsive), else waits on the event loop. Returns
--- buf -> settled.
function M.wait(bufs, cap_ms)
  local function all()
    for _, buf in ipairs(bufs) do
      if api.nvim_buf_is_valid(buf) and not M.settled(buf) then
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
    out[buf] = api.nvim_buf_is_valid(buf) and M.settled(buf)
  end
  return out
end

return M
