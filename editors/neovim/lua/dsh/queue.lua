-- :DshQueue: the session's pending inbox as an editable buffer.
--   `dd`            removes the item under the cursor at once (dsh/inbox/remove)
--   edit a line, :w replaces that item (dsh/inbox/replace)
--   reorder lines (J/K or :m), :w moves items (dsh/inbox/move);
--   a line moved under the other header changes its list (next turn <-> next step)
--   a new line, :w adds a prompt there without waking the agent (dsh/send wakeup=false)
-- Each item line starts with `#N ` (N numbers the items of the last rendering); multi-line texts
-- show their line breaks as `\n` (and a backslash as `\\`). How an item was sent (its verb) and the
-- editor context it carries are shown after the line as virtual text, so they are not edited: a
-- reworded item keeps its context.
local api = vim.api
local session = require('dsh.session')
local labels = require('dsh.labels')
local client = require('dsh.client')
local layout = require('dsh.layout')
local notify = require('dsh.notify')

local M = {}
M.ns = api.nvim_create_namespace('dsh.queue.labels')

local HEAD_TURN = '# next turn: prompts, each its own turn, in order'
local HEAD_STEP = '# next step: steering and context for the next model request'
local HELP = '# dd remove · edit a line + :w replace · J/K reorder + :w move · new line + :w add (parked)'

local function escape(text)
  return (text:gsub('\\', '\\\\'):gsub('\n', '\\n'))
end

local function unescape(text)
  return (text:gsub('\\(.)', function(c)
    return c == 'n' and '\n' or c
  end))
end

local function is_text_message(m)
  local source = m.source or { kind = 'user' }
  if source.kind == 'editor' then
    return false
  end
  if type(m.content) == 'string' then
    return true
  end
  for _, block in ipairs(m.content or {}) do
    if block.type ~= 'text' then
      return false
    end
  end
  return true
end

local function item_line(chat, n, m)
  if is_text_message(m) then
    return ('#%d %s'):format(n, escape(session.text_of(m)))
  end
  return ('#%d [%s]'):format(n, labels.preview(chat.root, m))
end

--- Label each item line (`#N …`) with its verb and the context it carries (virtual text, so
--- moving or editing lines keeps the labels with their items).
function M.decorate(chat)
  local buf = chat.queue_buf
  if not (buf and api.nvim_buf_is_valid(buf)) then
    return
  end
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  local items = chat.queue_items or {}
  for i, line in ipairs(api.nvim_buf_get_lines(buf, 0, -1, false)) do
    local n = tonumber(line:match('^#(%d+)'))
    local item = n and items[n]
    if item then
      local verb = labels.verb_of(item.message, item.target)
      local vt = { { '  ' .. verb, 'DshQueueLabel' } }
      local ctx = labels.context_summary(chat.root, item.message.context)
      if ctx ~= '' then
        vt[#vt + 1] = { '  ' .. ctx, 'DshContext' }
      end
      api.nvim_buf_set_extmark(buf, M.ns, i - 1, 0, { virt_text = vt, virt_text_pos = 'eol' })
    end
  end
end

--- (Re)draw the queue buffer of `chat` unless the person has unsaved edits in it.
function M.render(chat, force)
  local buf = chat.queue_buf
  if not (buf and api.nvim_buf_is_valid(buf)) then
    return
  end
  if vim.bo[buf].modified and not force then
    return
  end
  local items = {}
  local lines = { HELP, HEAD_TURN }
  for _, m in ipairs(chat.state.inbox['next-turn']) do
    items[#items + 1] = { id = m.id, target = 'next-turn', message = m }
    lines[#lines + 1] = item_line(chat, #items, m)
  end
  lines[#lines + 1] = HEAD_STEP
  for _, m in ipairs(chat.state.inbox['next-step']) do
    items[#items + 1] = { id = m.id, target = 'next-step', message = m }
    lines[#lines + 1] = item_line(chat, #items, m)
  end
  chat.queue_items = items
  local view = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    view[win] = api.nvim_win_get_cursor(win)
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modified = false
  M.decorate(chat)
  for win, cursor in pairs(view) do
    pcall(api.nvim_win_set_cursor, win, { math.min(cursor[1], #lines), cursor[2] })
  end
end

function M.refresh(chat)
  M.render(chat, false)
end

--- Parse the buffer: { ['next-turn'] = {entry...}, ['next-step'] = {...} }, entry = {n?, text}.
local function parse(buf)
  local want = { ['next-turn'] = {}, ['next-step'] = {} }
  local target = 'next-turn'
  for _, line in ipairs(api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if line:match('^# ') or line == '#' then
      if line:find('next step', 1, true) then
        target = 'next-step'
      elseif line:find('next turn', 1, true) then
        target = 'next-turn'
      end
    else
      local n, rest = line:match('^#(%d+)%s?(.*)$')
      if n then
        table.insert(want[target], { n = tonumber(n), text = rest })
      elseif vim.trim(line) ~= '' then
        table.insert(want[target], { text = line })
      end
    end
  end
  return want
end

--- Run request steps one after another; `done(errors)` at the end.
local function chain(chat, steps, done)
  local errors = {}
  local i = 0
  local function next_step()
    i = i + 1
    local step = steps[i]
    if not step then
      return done(errors)
    end
    local params = type(step.params) == 'function' and step.params() or step.params
    client.request(chat.root, step.method, params, function(err, result)
      if err then
        errors[#errors + 1] = ('%s: %s'):format(step.what or step.method, err.message or vim.inspect(err))
      elseif step.after then
        step.after(result)
      end
      next_step()
    end)
  end
  next_step()
end

--- What a :w of the queue changes, in words ('1 removed, 1 reworded, order changed', or 'no change').
function M.summary(items, want, steps)
  local count = { remove = 0, replace = 0, add = 0 }
  for _, step in ipairs(steps) do
    local verb = (step.what or ''):match('^(%a+)')
    if count[verb] then
      count[verb] = count[verb] + 1
    end
  end
  local moved = false
  for _, target in ipairs({ 'next-turn', 'next-step' }) do
    local was, now = {}, {}
    for n, item in ipairs(items) do
      if item.target == target then
        was[#was + 1] = n
      end
    end
    for _, e in ipairs(want[target]) do
      if e.n and items[e.n] then
        now[#now + 1] = e.n
      end
    end
    local kept = vim.tbl_filter(function(n)
      return vim.tbl_contains(now, n)
    end, was)
    moved = moved or not vim.deep_equal(kept, now)
  end
  local parts = {}
  for _, p in ipairs({ { 'remove', 'removed' }, { 'replace', 'reworded' }, { 'add', 'added' } }) do
    if count[p[1]] > 0 then
      parts[#parts + 1] = count[p[1]] .. ' ' .. p[2]
    end
  end
  if moved then
    parts[#parts + 1] = 'order changed'
  end
  return #parts > 0 and table.concat(parts, ', ') or 'no change'
end

--- :w in the queue buffer: removals, replacements, moves and additions, in that order.
function M.write(chat)
  local buf = chat.queue_buf
  local items = chat.queue_items or {}
  local want = parse(buf)
  local sid = chat.id
  local steps = {}
  local present = {}
  local ids = {} -- item number -> current message id (a replace may mint a new one)
  for _, target in ipairs({ 'next-turn', 'next-step' }) do
    for _, e in ipairs(want[target]) do
      if e.n and items[e.n] then
        present[e.n] = true
      end
    end
  end
  for n, item in ipairs(items) do
    ids[n] = item.id
    if not present[n] and not item.removed then -- (dd removed it already)
      steps[#steps + 1] =
        { method = 'dsh/inbox/remove', params = { sessionId = sid, messageId = item.id }, what = 'remove #' .. n }
    end
  end
  for _, target in ipairs({ 'next-turn', 'next-step' }) do
    for _, e in ipairs(want[target]) do
      local item = e.n and items[e.n]
      if item then
        local old = is_text_message(item.message) and escape(session.text_of(item.message))
          or ('[' .. labels.preview(chat.root, item.message) .. ']')
        if e.text ~= old then
          if is_text_message(item.message) then
            local n = e.n
            steps[#steps + 1] = {
              method = 'dsh/inbox/replace',
              params = {
                sessionId = sid,
                messageId = item.id,
                message = { content = unescape(e.text), source = item.message.source },
              },
              what = 'replace #' .. n,
              after = function(result)
                ids[n] = result and result.messageId or ids[n]
              end,
            }
          else
            notify.warn('editor context #' .. e.n .. ' cannot be reworded; it was kept')
          end
        end
      end
    end
  end
  -- Moves: place each listed item at its index, first to last (the ids are read when the step runs).
  for _, target in ipairs({ 'next-turn', 'next-step' }) do
    local index = 0
    for _, e in ipairs(want[target]) do
      local item = e.n and items[e.n]
      if item then
        local n, at = e.n, index
        local step = { method = 'dsh/inbox/move', what = 'move #' .. n }
        step.params = function() -- the id is read when the step runs (a replace may have changed it)
          return { sessionId = sid, messageId = ids[n], target = target, index = at }
        end
        steps[#steps + 1] = step
        index = index + 1
      end
    end
  end
  for _, target in ipairs({ 'next-turn', 'next-step' }) do
    for _, e in ipairs(want[target]) do
      if not e.n then
        steps[#steps + 1] = {
          method = 'dsh/send',
          params = { sessionId = sid, message = { content = unescape(e.text) }, target = target, wakeup = false },
          what = 'add',
        }
      end
    end
  end
  local said = M.summary(items, want, steps)
  chain(chat, steps, function(errors)
    if #errors > 0 then
      notify.warn('queue: ' .. table.concat(errors, '; '))
    else
      notify.notify('queue saved: ' .. said)
    end
    -- The inbox events have updated the state; show it as it now is.
    client.request(chat.root, 'dsh/inbox/list', { sessionId = sid }, function(err, inbox)
      if not err and inbox then
        session.set_inbox(chat.state, inbox)
        chat:render({ op = 'inbox' })
      end
      M.render(chat, true)
    end)
  end)
end

local function item_at_cursor(chat)
  local line = api.nvim_get_current_line()
  local n = tonumber(line:match('^#(%d+)'))
  return n and (chat.queue_items or {})[n], n
end

--- `dd`: remove the item under the cursor now.
function M.remove_current(chat)
  local item = item_at_cursor(chat)
  if not item then
    local line = api.nvim_get_current_line()
    if not line:match('^#') then
      vim.cmd('normal! dd') -- a new, unsent line: just delete it
    end
    return
  end
  local buf = chat.queue_buf
  client.request(chat.root, 'dsh/inbox/remove', { sessionId = chat.id, messageId = item.id }, function(err, res)
    if err then
      notify.warn('remove failed: ' .. (err.message or ''))
      return
    end
    item.removed = true
    if res and res.removed == false then
      notify.notify('already taken by the agent')
    end
    if api.nvim_buf_is_valid(buf) then
      local modified = vim.bo[buf].modified
      -- drop the line showing that item (wherever it is now)
      for i, l in ipairs(api.nvim_buf_get_lines(buf, 0, -1, false)) do
        local n = tonumber(l:match('^#(%d+)'))
        if n and chat.queue_items[n] == item then
          api.nvim_buf_set_lines(buf, i - 1, i, false, {})
          break
        end
      end
      vim.bo[buf].modified = modified
      M.render(chat, false)
    end
  end)
end

local function move_line(delta)
  local row = api.nvim_win_get_cursor(0)[1]
  local count = api.nvim_buf_line_count(0)
  local other = row + delta
  if other < 3 or other > count then
    return -- never above the help and first header
  end
  local a = api.nvim_buf_get_lines(0, row - 1, row, false)[1]
  local b = api.nvim_buf_get_lines(0, other - 1, other, false)[1]
  api.nvim_buf_set_lines(0, math.min(row, other) - 1, math.max(row, other), false, delta > 0 and { b, a } or { a, b })
  api.nvim_win_set_cursor(0, { other, 0 })
end

--- Open (or focus) the queue buffer of `chat`.
function M.open(chat)
  local buf = chat.queue_buf
  if not (buf and api.nvim_buf_is_valid(buf)) then
    local name = 'dsh://' .. chat.short .. '/queue'
    local old = vim.fn.bufnr('^' .. vim.pesc(name) .. '$')
    if old ~= -1 then
      pcall(api.nvim_buf_delete, old, { force = true })
    end
    buf = api.nvim_create_buf(false, false)
    vim.bo[buf].buftype = 'acwrite'
    vim.bo[buf].bufhidden = 'hide'
    vim.bo[buf].swapfile = false
    api.nvim_buf_set_name(buf, name)
    vim.bo[buf].filetype = 'dshqueue'
    vim.b[buf].dsh_root = chat.root
    vim.b[buf].dsh_session = chat.id
    chat.queue_buf = buf
    api.nvim_create_autocmd('BufWriteCmd', {
      buffer = buf,
      callback = function()
        M.write(chat)
      end,
    })
    api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
      buffer = buf,
      callback = function()
        M.decorate(chat)
      end,
    })
    vim.keymap.set('n', 'dd', function()
      M.remove_current(chat)
    end, { buffer = buf, desc = 'dsh: remove this queued item' })
    vim.keymap.set('n', 'K', function()
      move_line(-1)
    end, { buffer = buf, desc = 'dsh: move up (then :w)' })
    vim.keymap.set('n', 'J', function()
      move_line(1)
    end, { buffer = buf, desc = 'dsh: move down (then :w)' })
    vim.keymap.set('n', 'q', '<cmd>close<CR>', { buffer = buf, desc = 'close' })
    vim.api.nvim_buf_call(buf, function()
      vim.cmd([[syntax match DshQueueHeader /^# .*/]])
      vim.cmd([[syntax match DshQueueNumber /^#\d\+/]])
      vim.cmd([[highlight default link DshQueueHeader Comment]])
      vim.cmd([[highlight default link DshQueueNumber Number]])
    end)
  end
  M.render(chat, true)
  local win = vim.fn.win_findbuf(buf)[1]
  if win then
    api.nvim_set_current_win(win)
  else
    -- In the chat's column, between the transcript and the input: closing it gives its lines back
    -- to the transcript, and focus back to where it was (layout.lua).
    layout.open_in_column(chat, buf, math.min(15, math.max(5, api.nvim_buf_line_count(buf) + 1)))
  end
  api.nvim_win_set_cursor(0, { math.min(3, api.nvim_buf_line_count(buf)), 0 })
end

return M
