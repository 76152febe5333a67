-- Sending: prompts, steers and injects, with the editor context that goes with them — attachments
-- waiting for the next prompt (visual keys, :DshAddFile), and context typed in the input
-- (`#buffer`, `#selection`, `@path`), which produce the same attachments.
--
-- Invariant: attachments travel with their prompt. With a daemon that reads `context` on a send they
-- are in the same request (one queued item); attachments the plugin wrote itself (blocks, buffers
-- without a file), and all of them with an older daemon, go first as injected context. A send that
-- fails puts what was typed back into the input and the attachments back in front of the next prompt.
local api = vim.api
local client = require('dsh.client')
local notify = require('dsh.notify')
local selection = require('dsh.selection')
local contextwords = require('dsh.contextwords')
local state = require('dsh.state')
local sessions = require('dsh.sessions')

local M = {}

--- Run requests one after another (the daemon must see them in this order); `done(err, i)` names
--- the step that failed (the ones after it were not sent).
local function run_steps(root, steps, done)
  local i = 0
  local function step()
    i = i + 1
    local s = steps[i]
    if not s then
      return done and done(nil)
    end
    client.request(root, s.method, s.params, function(err, result)
      if err then
        return done and done(err, i)
      end
      if s.after then
        s.after(result)
      end
      step()
    end)
  end
  step()
end

--- Whether the daemon of `root` reads `context` on a send (protocol.md §4).
function M.send_context(root)
  return (client.info(root) or {}).sendContext == true
end

--- The ContextRef of an attachment the daemon reads itself (nil for a message the plugin wrote).
local function context_ref(att)
  if att.message then
    return nil
  end
  return { uri = att.uri, kind = att.kind or 'selection', range = att.range }
end

--- The request that delivers an attachment on its own as `delivery` ('inject' | 'steer' | 'followup').
local function attachment_step(chat, att, delivery)
  if att.message then
    return { method = 'dsh/' .. delivery, params = { sessionId = chat.id, message = att.message }, atts = { att } }
  end
  return {
    method = 'dsh/context/add',
    params = { sessionId = chat.id, uri = att.uri, kind = att.kind or 'selection', range = att.range, delivery = delivery },
    atts = { att },
  }
end

--- Send text as 'followup' | 'steer' | 'inject'. A followup or steer takes the attachments waiting
--- for the next prompt with it; `opts.context` adds attachments for this message only. A draft gets
--- its session first.
function M.send(chat, kind, text, opts)
  opts = opts or {}
  local atts, waiting = {}, {}
  if kind == 'followup' or kind == 'steer' then
    for _, att in ipairs(chat.attachments) do
      atts[#atts + 1] = att
      waiting[att] = true
    end
    if #chat.attachments > 0 then
      chat.attachments = {}
      chat:refresh_queue()
    end
  end
  vim.list_extend(atts, opts.context or {})
  local function failed(message, unsent)
    notify.error(kind .. ' failed: ' .. message)
    if opts.from_input then
      chat:restore_input(text)
    end
    -- Attachments that were not delivered wait for the next prompt again.
    local back = vim.tbl_filter(function(att)
      return waiting[att] and unsent[att]
    end, atts)
    if #back > 0 then
      chat.attachments = vim.list_extend(back, chat.attachments)
      chat:refresh_queue()
    end
  end
  local function all_unsent(message)
    local unsent = {}
    for _, att in ipairs(atts) do
      unsent[att] = true
    end
    failed(message, unsent)
  end
  client.ensure(chat.root, function()
    sessions.materialize(chat, function()
      local steps, refs, carried = {}, {}, {}
      local with_context = M.send_context(chat.root)
      for _, att in ipairs(atts) do
        local ref = with_context and context_ref(att)
        if ref then
          refs[#refs + 1] = ref
          carried[#carried + 1] = att
        else
          steps[#steps + 1] = attachment_step(chat, att, 'inject')
        end
      end
      local params = { sessionId = chat.id, message = { content = text } }
      if #refs > 0 then
        params.context = refs
      end
      steps[#steps + 1] = { method = 'dsh/' .. kind, params = params, atts = carried }
      run_steps(chat.root, steps, function(err, at)
        if err then
          local unsent = {}
          for i = at, #steps do
            for _, att in ipairs(steps[i].atts or {}) do
              unsent[att] = true
            end
          end
          failed(err.message or vim.inspect(err), unsent)
        end
      end)
    end, all_unsent)
  end, all_unsent)
end

-- ---- typed context -------------------------------------------------------------------------------

--- The file buffer the person was last in (what #buffer and #selection mean).
function M.code_buffer()
  local buf = state.last_file_buf
  if buf and api.nvim_buf_is_valid(buf) and vim.bo[buf].buftype == '' then
    return buf
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    local b = api.nvim_win_get_buf(win)
    if vim.bo[b].buftype == '' and api.nvim_buf_get_name(b) ~= '' then
      return b
    end
  end
end

local function file_attachment(root, path)
  local buf = vim.fn.bufnr(path)
  if buf > 0 then
    client.attach(root, buf) -- the daemon reads its unsaved text
  end
  return { label = 'file ' .. vim.fn.fnamemodify(path, ':~:.'), uri = vim.uri_from_fname(path), kind = 'file' }
end

local function attachment_for(sel)
  if sel.mode == '\22' or not vim.startswith(sel.uri, 'file:') then
    return { label = sel.label, message = selection.message(sel) }
  end
  local r = sel.range
  -- A range that ends at the start of a line (a selected line break) ends instead at the end of the
  -- line before, so the daemon's "lines A-B" label names only the selected lines.
  if r['end'].character == 0 and r['end'].line > r.start.line then
    local line = api.nvim_buf_get_lines(sel.buf, r['end'].line - 1, r['end'].line, false)[1] or ''
    r = { start = r.start, ['end'] = { line = r['end'].line - 1, character = selection.utf16(line, #line) } }
  end
  return { label = sel.label, uri = sel.uri, range = r, kind = 'selection' }
end
M.attachment_for = attachment_for

--- The attachments that the `#buffer`, `#selection`, `@path` words (and contextwords.lua's) of `text` name, and what is
--- wrong with any of them. The words stay in the text the model reads.
function M.typed_context(root, text)
  local atts, problems, seen = {}, {}, {}
  local function add(att)
    if att and not seen[att.label] then
      seen[att.label] = true
      atts[#atts + 1] = att
    end
  end
  for word in (' ' .. text):gmatch('%s#(%a+)') do
    local buf = M.code_buffer()
    if word == 'buffer' then
      if buf then
        client.attach(root, buf)
        add({ label = 'file ' .. vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ':~:.'), uri = vim.uri_from_bufnr(buf), kind = 'file' })
      else
        problems[#problems + 1] = '#buffer: no file buffer'
      end
    elseif word == 'selection' then
      local sel = buf and selection.last_in(buf)
      if sel then
        client.attach(root, buf)
        add(attachment_for(sel))
      else
        problems[#problems + 1] = '#selection: no selection in ' .. (buf and vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ':t') or 'a file')
      end
    else
      local att, problem = contextwords.attachment(word, root, buf)
      if att then
        if att.uri and not att.message and buf then
          client.attach(root, buf) -- the daemon reads the range from the buffer's text
        end
        add(att)
      elseif problem then
        problems[#problems + 1] = problem
      end
    end
  end
  for word in (' ' .. text):gmatch('%s@([%w%._/%-~]+)') do
    local path = word:gsub('[%.,;:]$', '')
    local abs = vim.fn.fnamemodify(vim.startswith(path, '/') and path or (root .. '/' .. path), ':p')
    if vim.fn.filereadable(abs) == 1 then
      add(file_attachment(root, abs))
    else
      problems[#problems + 1] = '@' .. path .. ': no such file'
    end
  end
  return atts, problems
end

--- `/symbols [text]` opening the input: the buffer's document symbols, asked without blocking,
--- are attached to the next prompt (or sent now with `text`). True when `text` was such a word.
function M.slash_word(chat, kind, text)
  local rest = text:match('^/symbols$') and '' or text:match('^/symbols%s+(.*)$')
  if not rest then
    return false
  end
  local buf = M.code_buffer()
  if not buf then
    chat:restore_input(text)
    notify.warn('/symbols: no file buffer')
    return true
  end
  contextwords.symbols_async(chat.root, buf, function(att, problem)
    if not att then
      chat:restore_input(text)
      return notify.warn(problem)
    end
    if rest == '' then
      table.insert(chat.attachments, att)
      chat:refresh_queue()
      return notify.notify('attached ' .. att.label .. ' to the next prompt')
    end
    local typed, problems = M.typed_context(chat.root, rest)
    if #problems > 0 then
      chat:restore_input(text)
      return notify.warn(table.concat(problems, '; '))
    end
    M.send(chat, kind, rest, { from_input = true, context = vim.list_extend({ att }, typed) })
  end)
  return true
end

--- The input as `kind` (followup | steer), with the context typed in it.
function M.send_input(kind)
  return function()
    local gone = state.chats[vim.b.dsh_session or '']
    if gone and gone.deleted then
      -- The chat's session was deleted: what is typed in its input starts a new session (with the
      -- attachments that were waiting for it), shown in its place.
      local text = gone:take_input()
      if not text then
        return
      end
      local chat = sessions.draft(gone.root)
      chat.attachments = vim.list_extend(gone.attachments or {}, chat.attachments)
      local typed = M.typed_context(chat.root, text)
      return M.send(chat, kind, text, { from_input = true, context = typed })
    end
    local chat = sessions.chat_for(0)
    if not chat then
      return
    end
    local text = chat:take_input()
    if not text then
      return
    end
    if M.slash_word(chat, kind, text) then
      return
    end
    local typed, problems = M.typed_context(chat.root, text)
    if #problems > 0 then
      chat:restore_input(text)
      return notify.warn(table.concat(problems, '; '))
    end
    M.send(chat, kind, text, { from_input = true, context = typed })
  end
end

--- Deliver a selection: 'steer' | 'inject' now, or 'attach' it to the next prompt. A steer takes
--- `text` (else what is typed in the chat input) as its message, with the selection as its context
--- in the same request; without a text the selection is sent alone (dsh/context/add).
function M.send_selection(delivery, sel, text)
  sel = sel or selection.current()
  if not sel then
    return notify.warn('no selection')
  end
  local root = client.root_for(sel.buf)
  -- The daemon builds the message from its copy of the buffer: make sure it has it (unsaved text).
  client.attach(root, sel.buf)
  sessions.with_chat(function(chat)
    local att = attachment_for(sel)
    if delivery == 'attach' then
      table.insert(chat.attachments, att)
      chat:refresh_queue()
      return notify.notify('attached ' .. att.label .. ' to the next prompt')
    end
    local from_input = false
    if not text and delivery == 'steer' then
      text = chat:take_input()
      from_input = text ~= nil
    end
    if text then
      return M.send(chat, delivery, text, { context = { att }, from_input = from_input })
    end
    sessions.materialize(chat, function()
      run_steps(chat.root, { attachment_step(chat, att, delivery) }, function(err)
        if err then
          notify.error(delivery .. ' failed: ' .. (err.message or ''))
        end
      end)
    end)
  end, sel.buf, true)
end

--- :DshAddFile [path]: attach a file (default: the current buffer) to the next prompt, read when
--- the prompt is sent; `now` (:DshAddFile!), or a daemon without `context` on sends: add it at once
--- as context for the next model request.
function M.add_file(path, now)
  local buf
  if path and path ~= '' then
    path = vim.fn.fnamemodify(vim.fn.expand(path), ':p')
    buf = vim.fn.bufnr(path)
  else
    buf = api.nvim_get_current_buf()
    path = api.nvim_buf_get_name(buf)
    if path == '' or vim.bo[buf].buftype ~= '' then
      return notify.warn('this buffer is not a file')
    end
  end
  local root = client.root_for(buf > 0 and buf or 0)
  if buf > 0 then
    client.attach(root, buf)
  end
  sessions.with_chat(function(chat)
    client.ensure(chat.root, function()
      local uri = vim.uri_from_fname(path)
      if not now and M.send_context(chat.root) then
        local label = 'file ' .. vim.fn.fnamemodify(path, ':~:.')
        table.insert(chat.attachments, { label = label, uri = uri, kind = 'file' })
        chat:refresh_queue()
        return notify.notify('attached ' .. label .. ' to the next prompt')
      end
      sessions.materialize(chat, function()
        client.request(chat.root, 'dsh/context/add', { sessionId = chat.id, uri = uri, kind = 'file', delivery = 'inject' })
      end)
    end)
  end, buf > 0 and buf or nil, true)
end

--- :DshSteer / :DshInject: the range's selection (with the text, if any, as its message), the text,
--- or what is typed in the chat input.
function M.text_or_selection(delivery)
  return function(o)
    if o.range > 0 then
      return M.send_selection(delivery, selection.last(), o.args ~= '' and o.args or nil)
    end
    if o.args ~= '' then
      return sessions.with_chat(function(chat)
        M.send(chat, delivery, o.args)
      end)
    end
    local chat = sessions.chat_for(0)
    local text = chat and chat:take_input()
    if not text then
      return notify.notify('nothing to ' .. delivery .. ': give a text, a range, or type in the chat input')
    end
    M.send(chat, delivery, text, { from_input = true })
  end
end

return M
