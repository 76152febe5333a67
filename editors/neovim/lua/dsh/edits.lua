-- workspace/applyEdit from the daemon: applied with Neovim's own workspace-edit code (undoable; the
-- daemon then asks for the edited buffer to be written, dsh/document/save in editor.lua), without the
-- built-in handler's "Workspace edit" message;
-- changed lines flash, and :DshEdits lists every touched place in the quickfix list. A file with no
-- loaded buffer is edited in a hidden, unlisted one, let go when the agent is done (borrowed.lua).
local api = vim.api
local borrowed = require('dsh.borrowed')
local config = require('dsh.config')
local layout = require('dsh.layout')
local notify = require('dsh.notify')

local M = {}
M.ns = api.nvim_create_namespace('dsh.edits')
---@type vim.quickfix.entry[]
M.touched = {}

local function uris_of(edit)
  local uris, seen = {}, {}
  local function add(uri)
    if uri and not seen[uri] then
      seen[uri] = true
      uris[#uris + 1] = uri
    end
  end
  for uri in pairs(edit.changes or {}) do
    add(uri)
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument then
      add(change.textDocument.uri)
    elseif change.kind == 'create' then
      add(change.uri)
    elseif change.kind == 'rename' then
      add(change.newUri)
    end
  end
  return uris
end

--- The lines an edit starts from: the loaded buffer's, else the file's (none for a new file).
local function lines_before(uri)
  local buf = borrowed.existing(uri)
  if buf and api.nvim_buf_is_loaded(buf) then
    return api.nvim_buf_get_lines(buf, 0, -1, false)
  end
  local fname = vim.uri_to_fname(uri)
  return vim.fn.filereadable(fname) == 1 and vim.fn.readfile(fname) or {}
end

local diff = (vim.text and vim.text.diff) or vim.diff

--- The changed line ranges of `after` against `before` (1-based {first, last} in `after`).
local function changed(before, after)
  local a = table.concat(before, '\n') .. '\n'
  local b = table.concat(after, '\n') .. '\n'
  local hunks = diff(a, b, { result_type = 'indices' }) or {}
  local out = {}
  for _, h in ipairs(hunks) do
    local start_b, count_b = h[3], h[4]
    if count_b == 0 then
      out[#out + 1] = { math.max(1, start_b), math.max(1, start_b) }
    else
      out[#out + 1] = { start_b, start_b + count_b - 1 }
    end
  end
  return out
end
M.changed = changed

local function flash(buf, ranges)
  local ms = config.options.flash_ms or 0
  if ms <= 0 or not api.nvim_buf_is_valid(buf) then
    return
  end
  local n = api.nvim_buf_line_count(buf)
  for _, r in ipairs(ranges) do
    for lnum = r[1], math.min(r[2], n) do
      api.nvim_buf_set_extmark(buf, M.ns, lnum - 1, 0, { line_hl_group = 'DshEditFlash', priority = 250 })
    end
  end
  vim.defer_fn(function()
    if api.nvim_buf_is_valid(buf) then
      api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
    end
  end, ms)
end

function M.apply(_root, params, ctx)
  local edit = params and params.edit
  if type(edit) ~= 'table' then
    return nil, vim.lsp.rpc_response_error(vim.lsp.protocol.ErrorCodes.InvalidParams, 'no edit')
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local uris = uris_of(edit)
  local before, state = {}, {}
  for _, uri in ipairs(uris) do
    before[uri] = lines_before(uri)
    state[uri] = borrowed.state(uri)
  end
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, edit, client and client.offset_encoding or 'utf-16')
  for _, uri in ipairs(uris) do
    local buf = borrowed.existing(uri)
    if buf then
      borrowed.edited(buf, state[uri]) -- loaded (and listed) by the edit: hidden again, held
    end
  end
  if not ok then
    return { applied = false, failureReason = tostring(err) }
  end
  local label = params.label or 'dsh edit'
  for _, uri in ipairs(uris) do
    local buf = vim.uri_to_bufnr(uri)
    if api.nvim_buf_is_loaded(buf) then
      -- A buffer the person never opened is let go: the quickfix entry names the file.
      local qbuf = not borrowed.held(buf) and buf or nil
      local ranges = changed(before[uri], api.nvim_buf_get_lines(buf, 0, -1, false))
      flash(buf, ranges)
      for _, r in ipairs(ranges) do
        M.touched[#M.touched + 1] = { bufnr = qbuf, filename = vim.uri_to_fname(uri), lnum = r[1], end_lnum = r[2], text = label }
      end
      if #ranges == 0 then
        M.touched[#M.touched + 1] = { bufnr = qbuf, filename = vim.uri_to_fname(uri), lnum = 1, text = label }
      end
    end
  end
  return { applied = true }
end

--- :DshEdits: the touched places in the quickfix list (closing it while it has focus gives focus
--- back to the window :DshEdits was run from; the chat input keeps its height: layout.lua).
function M.quickfix()
  vim.fn.setqflist({}, 'r', { title = 'dsh edits', items = M.touched })
  if #M.touched == 0 then
    notify.notify('no edits yet')
    return
  end
  local prev = api.nvim_get_current_win()
  vim.cmd('botright copen')
  local win = api.nvim_get_current_win()
  if win ~= prev then
    layout.return_focus(win, prev)
  end
end

return M
