-- Ambient editor state (opt-in, `ambient = true`): the active file, the cursor or selection, the
-- visible lines and the diagnostics near the cursor, pushed as the latest-wins notification
-- `dsh/context/didChange`. The daemon adds one short `snapshot` message to a model request only when
-- this state changed since the last one it sent.
local api = vim.api
local config = require('dsh.config')
local client = require('dsh.client')
local selections = require('dsh.selection')
local utf16 = selections.utf16
local chats = require('dsh.state')

local M = {}

local function line_text(buf, lnum0)
  return api.nvim_buf_get_lines(buf, lnum0, lnum0 + 1, false)[1] or ''
end

local function position(buf, lnum0, col0)
  return { line = lnum0, character = utf16(line_text(buf, lnum0), col0) }
end

--- The state of the current window, or nil when it shows no file.
function M.state()
  local buf = api.nvim_get_current_buf()
  local name = api.nvim_buf_get_name(buf)
  if vim.bo[buf].buftype ~= '' or name == '' or name:match('^%a[%w+.-]*://') then
    return nil
  end
  local cursor = api.nvim_win_get_cursor(0)
  local here = position(buf, cursor[1] - 1, cursor[2])
  local selection = { start = here, ['end'] = here }
  local mode = vim.fn.mode()
  if mode == 'v' or mode == 'V' or mode == '\22' then
    local sel = selections.from_positions(
      buf,
      mode,
      vim.fn.getpos('v'),
      vim.fn.getpos('.'),
      vim.fn.getcurpos()[5] == vim.v.maxcol
    )
    if sel then
      selection = sel.range
    end
  end
  local top, bottom = vim.fn.line('w0'), vim.fn.line('w$')
  local diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if math.abs(d.lnum - (cursor[1] - 1)) <= 3 then
      diagnostics[#diagnostics + 1] = {
        range = {
          start = position(buf, d.lnum, d.col),
          ['end'] = position(buf, d.end_lnum or d.lnum, d.end_col or d.col),
        },
        severity = d.severity,
        message = d.message,
        source = d.source,
      }
    end
  end
  return {
    buf = buf,
    params = {
      activeUri = vim.uri_from_bufnr(buf),
      selection = selection,
      visibleRange = {
        start = { line = top - 1, character = 0 },
        ['end'] = position(buf, bottom - 1, #line_text(buf, bottom - 1)),
      },
      diagnostics = diagnostics,
    },
  }
end

local last = {}

--- Send the current state to the daemon of its project, if that project has a chat and it changed.
--- Returns what it did: 'sent', 'unchanged', 'off', 'no-file' or 'no-chat'.
function M.push()
  if not config.options.ambient then
    return 'off'
  end
  local state = M.state()
  if not state then
    return 'no-file'
  end
  local root = client.root_for(state.buf)
  local entry = client.roots[root]
  if not (entry and entry.ready and chats.current[root]) then
    return 'no-chat'
  end
  local encoded = vim.json.encode(state.params)
  if last[root] == encoded then
    return 'unchanged'
  end
  last[root] = encoded
  client.attach(root, state.buf) -- the daemon reads the selected text from its copy of the buffer
  entry.client:notify('dsh/context/didChange', state.params)
  return 'sent'
end

local timer
function M.schedule()
  if not config.options.ambient then
    return
  end
  timer = timer or vim.uv.new_timer()
  timer:stop()
  timer:start(config.options.ambient_debounce or 300, 0, vim.schedule_wrap(M.push))
end

function M.setup(group)
  api.nvim_create_autocmd({ 'CursorHold', 'BufEnter', 'ModeChanged', 'DiagnosticChanged', 'WinScrolled' }, {
    group = group,
    callback = M.schedule,
  })
end

return M
