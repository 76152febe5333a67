-- The chat's windows: the transcript and the input below it, as a right-hand split, a bottom split,
-- a tab or centred floats; :DshToggle closes and reopens them.
--
-- Invariants kept here (issue 22 item 8):
-- * the input keeps its height (`input_height`, or the height the person gave it) when any other
--   window of its tab opens or closes: the queue buffer opens in the chat's own column, and a
--   closed window (the queue, the quickfix list of :DshEdits) never leaves its space to the input;
-- * closing a window the plugin opened (the queue, the :DshEdits list) while it has focus returns
--   focus to the window that had it before, never to the code window a prompt was not meant for;
-- * the input's key hints are set every time the chat is shown (:DshNew, :DshResume included).
local api = vim.api
local config = require('dsh.config')

local M = {}

local group = api.nvim_create_augroup('dsh.layout', { clear = true })

local function find(buf)
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
end

function M.input_window(chat)
  return find(chat.input)
end

function M.transcript_window(chat)
  return find(chat.buf)
end

--- The key hints in the input's window bar.
function M.hints()
  local k = config.options.keys.chat or {}
  local first = config.key
  local parts = {}
  local function add(lhs, what)
    if lhs then
      parts[#parts + 1] = lhs .. ' ' .. what
    end
  end
  add(first(k.send_input) or first(k.send), 'send')
  add(first(k.steer), 'steer')
  add(first(k.stop), 'stop')
  add(first(k.queue), 'queue')
  add(first(k.help), 'keys')
  return (' ' .. table.concat(parts, ' · ')):gsub('%%', '%%%%')
end

local function transcript_options(chat, win)
  local wo = vim.wo[win]
  wo.wrap, wo.linebreak, wo.number, wo.relativenumber = true, true, false, false
  wo.signcolumn, wo.foldcolumn, wo.spell, wo.list = 'no', '0', false, false
  -- With tree-sitter, concealing makes its highlighter parse again for every line drawn (markdown
  -- conceals whole fence lines): a streaming transcript shows its text as it is instead.
  wo.conceallevel = chat.treesitter and 0 or 2
end

local function input_options(chat, win)
  local wo = vim.wo[win]
  wo.winfixheight, wo.number, wo.relativenumber, wo.signcolumn = true, false, false, 'no'
  wo.winbar = M.hints()
  chat.input_height = chat.input_height or config.options.input_height
end

--- Open the transcript window for `chat` in the current tab (per `layout`); returns it.
local function open_transcript(chat)
  local opts = config.options
  if opts.layout == 'float' then
    local width = math.max(40, math.floor(vim.o.columns * math.max(opts.width, 0.6)))
    local height = math.max(8, math.floor(vim.o.lines * 0.8) - opts.input_height - 4)
    local row = math.max(0, math.floor((vim.o.lines - height - opts.input_height - 4) / 2))
    local col = math.max(0, math.floor((vim.o.columns - width) / 2))
    chat.float_geometry = { width = width, height = height, row = row, col = col }
    return api.nvim_open_win(chat.buf, true, {
      relative = 'editor',
      row = row,
      col = col,
      width = width,
      height = height,
      border = 'rounded',
      title = ' dsh ',
      zindex = 30,
    })
  elseif opts.layout == 'tab' then
    vim.cmd('tab sbuffer ' .. chat.buf)
  elseif opts.layout == 'split' then
    vim.cmd('botright sbuffer ' .. chat.buf)
    api.nvim_win_set_height(0, math.max(8, math.floor(vim.o.lines * opts.height)))
  else
    vim.cmd('botright vertical sbuffer ' .. chat.buf)
    api.nvim_win_set_width(0, math.max(30, math.floor(vim.o.columns * opts.width)))
  end
  return api.nvim_get_current_win()
end

local function open_input(chat, win)
  local opts = config.options
  local g = chat.float_geometry
  if opts.layout == 'float' and g and api.nvim_win_get_config(win).relative ~= '' then
    return api.nvim_open_win(chat.input, true, {
      relative = 'editor',
      row = g.row + g.height + 2,
      col = g.col,
      width = g.width,
      height = opts.input_height,
      border = 'rounded',
      zindex = 30,
    })
  end
  api.nvim_set_current_win(win)
  vim.cmd('belowright sbuffer ' .. chat.input)
  local iwin = api.nvim_get_current_win()
  api.nvim_win_set_height(iwin, chat.input_height or opts.input_height)
  return iwin
end

--- Show the chat in the current tab (transcript + input) and focus the input.
function M.open(chat)
  local win = M.transcript_window(chat)
  if not win then
    -- Another chat shown in this tab: show this one in its windows instead of opening more.
    for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
      local b = api.nvim_win_get_buf(w)
      if vim.b[b].dsh_kind == 'chat' then
        api.nvim_win_set_buf(w, chat.buf)
        win = w
      elseif vim.b[b].dsh_kind == 'input' then
        api.nvim_win_set_buf(w, chat.input)
      end
    end
  end
  if not win then
    win = open_transcript(chat)
    transcript_options(chat, win)
    api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(chat.buf), 0 })
  end
  local iwin = M.input_window(chat)
  if not iwin then
    iwin = open_input(chat, win)
  end
  input_options(chat, iwin)
  chat:refresh_bar()
  api.nvim_set_current_win(iwin)
  M.watch(chat)
  return iwin
end

--- Close the chat's windows in the current tab (a window that is the tab's last one shows an empty
--- buffer instead). Returns whether anything was closed.
function M.close(chat)
  local closed = false
  for _, buf in ipairs({ chat.input, chat.buf }) do
    for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
      if api.nvim_win_is_valid(win) and api.nvim_win_get_buf(win) == buf then
        closed = true
        if #api.nvim_tabpage_list_wins(0) > 1 then
          pcall(api.nvim_win_close, win, false)
        else
          api.nvim_win_call(win, function()
            vim.cmd('enew')
          end)
        end
      end
    end
  end
  return closed
end

--- Whether the chat is shown in the current tab.
function M.visible(chat)
  return M.transcript_window(chat) ~= nil or M.input_window(chat) ~= nil
end

--- Keep the input's height when other windows of its tab open or close; remember a height the
--- person set by hand.
function M.watch(chat)
  if chat.watching then
    return
  end
  chat.watching = true
  api.nvim_create_autocmd('WinClosed', {
    group = group,
    callback = function(ev)
      if not api.nvim_buf_is_valid(chat.buf) then
        return true -- the chat is gone: drop this autocmd
      end
      if tonumber(ev.match) == M.input_window(chat) then
        return
      end
      chat.relayout = true
      vim.schedule(function()
        chat.relayout = false
        local iwin = M.input_window(chat)
        if iwin and api.nvim_win_get_height(iwin) ~= chat.input_height then
          pcall(api.nvim_win_set_height, iwin, chat.input_height)
        end
        chat:refresh_queue()
      end)
    end,
  })
  api.nvim_create_autocmd('WinResized', {
    group = group,
    callback = function()
      if not api.nvim_buf_is_valid(chat.buf) then
        return true
      end
      local iwin = M.input_window(chat)
      if iwin and not chat.relayout and vim.tbl_contains(vim.v.event.windows or {}, iwin) then
        chat.input_height = api.nvim_win_get_height(iwin) -- resized by the person
      end
      chat:refresh_queue()
    end,
  })
  api.nvim_create_autocmd('WinScrolled', {
    group = group,
    buffer = chat.buf,
    callback = function()
      chat:refresh_queue()
    end,
  })
end

--- When `win` (opened by the plugin from `prev`) is closed while it has focus, focus `prev` again.
function M.return_focus(win, prev)
  api.nvim_create_autocmd('WinClosed', {
    group = group,
    pattern = tostring(win),
    once = true,
    callback = function()
      if api.nvim_get_current_win() ~= win then
        return -- closed from elsewhere: focus is where the person put it
      end
      vim.schedule(function()
        if prev and api.nvim_win_is_valid(prev) then
          api.nvim_set_current_win(prev)
        end
      end)
    end,
  })
end

--- Open `buf` in the chat's column, between the transcript and the input (else at the bottom), with
--- `height`; focus comes back to the current window when it is closed.
function M.open_in_column(chat, buf, height)
  local prev = api.nvim_get_current_win()
  local twin = M.transcript_window(chat)
  if twin and api.nvim_win_get_config(twin).relative == '' then
    api.nvim_set_current_win(twin)
    vim.cmd('belowright sbuffer ' .. buf)
  else
    vim.cmd('botright sbuffer ' .. buf)
  end
  local win = api.nvim_get_current_win()
  pcall(api.nvim_win_set_height, win, height)
  M.return_focus(win, prev)
  local iwin = M.input_window(chat)
  if iwin then
    pcall(api.nvim_win_set_height, iwin, chat.input_height or config.options.input_height)
  end
  return win
end

return M
