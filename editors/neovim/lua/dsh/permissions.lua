-- dsh/requestPermission: a float with the preview (a diff, or the command and its cwd) and keys for
-- allow once / allow always / reject / cancel. Neovim runs server-request handlers in a coroutine, so
-- the handler yields until the person answers; the float closes when the request is resolved, or when
-- the daemon no longer needs it (`permission/resolved`, the call got its result, or the turn ended).
-- A request still open when a chat attaches again (the attach reply's `permissionRequests`) and not
-- shown here is shown the same way and answered with `dsh/permissions/respond`.
local api = vim.api

local M = {}

---@type table<string, table> key (sessionId .. '\0' .. callId) -> open request
M.open = {}
---@type table<string, boolean> keys of requests the daemon said were resolved (`permission/resolved`)
M.settled = {}

M.keys = {
  { lhs = { 'y', '<CR>' }, outcome = 'allow-once', label = 'y allow once' },
  { lhs = { 'a' }, outcome = 'allow-always', label = 'a always' },
  { lhs = { 'n', 'r' }, outcome = 'reject', label = 'n reject' },
  { lhs = { 'q', 'c', '<Esc>' }, outcome = 'cancelled', label = 'q cancel turn' },
}

local function key(session_id, call_id)
  return tostring(session_id) .. '\0' .. tostring(call_id)
end

local function preview_lines(params)
  local pv = params.preview
  if type(pv) == 'table' and type(pv.diff) == 'string' then
    local lines = vim.split(pv.diff:gsub('\n$', ''), '\n', { plain = true })
    return lines, 'diff'
  end
  if type(pv) == 'table' and pv.command then
    return { '$ ' .. tostring(pv.command), '', 'cwd: ' .. tostring(pv.cwd or '?') }, 'sh'
  end
  local ok, text = pcall(vim.json.encode, params.arguments or {})
  return vim.split(ok and text or vim.inspect(params.arguments), '\n', { plain = true }), 'json'
end

local function show(req)
  local params = req.params
  local lines, ft = preview_lines(params)
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].filetype = ft
  vim.b[buf].dsh_permission = { sessionId = params.sessionId, callId = params.callId, tool = params.tool }
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  local labels = {}
  for _, k in ipairs(M.keys) do
    labels[#labels + 1] = k.label
  end
  local footer = ' ' .. table.concat(labels, ' · ') .. ' '
  local title = ' dsh: ' .. tostring(params.title or params.tool or 'permission') .. ' '
  width = math.max(width, vim.fn.strdisplaywidth(footer), vim.fn.strdisplaywidth(title))
  width = math.min(width + 2, math.max(20, vim.o.columns - 6))
  local height = math.max(1, math.min(#lines, math.floor(vim.o.lines * 0.6)))
  req.prev_win = api.nvim_get_current_win()
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    width = width,
    height = height,
    style = 'minimal',
    border = 'rounded',
    title = title,
    title_pos = 'center',
    footer = footer,
    footer_pos = 'center',
  })
  vim.wo[win].wrap = false
  req.buf, req.win = buf, win
  for _, k in ipairs(M.keys) do
    for _, lhs in ipairs(k.lhs) do
      vim.keymap.set('n', lhs, function()
        req.finish(k.outcome)
      end, { buffer = buf, nowait = true, desc = 'dsh: ' .. k.outcome })
    end
  end
  api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      req.buf = nil
      req.finish('cancelled') -- closed by hand: the turn is cancelled, the queue kept
    end,
  })
end

local function close(req)
  local win, buf = req.win, req.buf
  req.win, req.buf = nil, nil
  if win and api.nvim_win_is_valid(win) then
    pcall(api.nvim_win_close, win, true)
  end
  if buf and api.nvim_buf_is_valid(buf) then
    pcall(api.nvim_buf_delete, buf, { force = true })
  end
  if req.prev_win and api.nvim_win_is_valid(req.prev_win) then
    pcall(api.nvim_set_current_win, req.prev_win)
  end
end

--- The handler (runs inside the coroutine Neovim made for this server request).
function M.request(root, params, _ctx)
  local k = key(params.sessionId, params.callId)
  local co, is_main = coroutine.running()
  local req = { params = params, root = root, done = false }
  req.finish = function(outcome) -- the reply to the daemon's request, whatever closed the float
    if req.done then
      return
    end
    req.done = true
    req.outcome = outcome
    if M.open[k] == req then
      M.open[k] = nil
    end
    vim.schedule(function()
      close(req)
      if co and not is_main and coroutine.status(co) == 'suspended' then
        coroutine.resume(co, outcome)
      end
    end)
  end
  if M.open[k] then
    M.open[k].finish('cancelled', true)
  end
  M.settled[k] = nil
  M.open[k] = req
  show(req)
  local outcome
  if co and not is_main then
    outcome = coroutine.yield()
  else
    vim.wait(24 * 3600 * 1000, function()
      return req.done
    end, 50)
    outcome = req.outcome
  end
  return { outcome = outcome or 'cancelled' }
end

--- Show again a request the daemon still has open (from an attach reply), unless it is shown
--- already; the answer goes back as `dsh/permissions/respond`.
function M.reopen(root, params)
  local k = key(params.sessionId, params.callId)
  if M.open[k] or M.settled[k] then
    return
  end
  local req = { params = params, root = root, done = false, reopened = true }
  req.finish = function(outcome, quiet) -- quiet: the daemon no longer needs an answer
    if req.done then
      return
    end
    req.done = true
    if M.open[k] == req then
      M.open[k] = nil
    end
    vim.schedule(function()
      close(req)
    end)
    if quiet then
      return
    end
    local answer = { sessionId = params.sessionId, callId = params.callId, outcome = outcome }
    require('dsh.client').request(root, 'dsh/permissions/respond', answer, function(err, res)
      if err then
        vim.notify('dsh: could not answer the permission request: ' .. (err.message or ''), vim.log.levels.ERROR)
      elseif res and res.answered == false then
        vim.notify('dsh: that permission request was no longer open', vim.log.levels.WARN)
      end
    end)
  end
  M.open[k] = req
  show(req)
end

--- Close the prompt of a call that got its result or was answered elsewhere (`permission/resolved`,
--- `settled`), or every prompt of a session whose turn ended.
function M.resolved(session_id, call_id, settled)
  if settled and call_id then
    M.settled[key(session_id, call_id)] = true
  end
  for k, req in pairs(M.open) do
    if req.params.sessionId == session_id and (call_id == nil or req.params.callId == call_id) then
      M.open[k] = nil
      req.finish('cancelled', true)
    end
  end
end

--- The open requests (tests and :checkhealth).
function M.list()
  local out = {}
  for _, req in pairs(M.open) do
    out[#out + 1] = req.params
  end
  return out
end

return M
