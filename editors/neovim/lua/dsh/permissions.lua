-- dsh/requestPermission: the agent asks before it edits a file or runs a command.
--
-- Invariants kept here (issue 22 item 1):
-- * A request never takes focus. It is announced — the chat's window bar (`⚠ 1 permission
--   waiting`), the status line component, one `vim.notify` line, and a float over the transcript
--   window when the chat is shown — and the person goes to it on purpose: :DshPermission, or the
--   chat's key (\p by default), or a mapping of <Plug>(dsh-permission).
-- * Going to it leaves insert mode, and no single key answers: an answer is <CR> on a choice line
--   (the cursor starts below them) or a two-key g-command (gy once, gY always, gn reject, gC cancel
--   the turn; `keys.prompt`). `a`, `y`, `n`, `r`, `c`, `q`, <Esc> typed anywhere allow nothing.
-- * q / <Esc> (or closing the float) only hide it: the request stays open, announced, and
--   :DshPermission shows it again. Nothing here cancels a turn except the explicit cancel choice.
-- * Each request is answered once, by whoever answers first: the reply to the daemon's request
--   (Neovim runs the handler in a coroutine that waits), or `dsh/permissions/respond` for one shown
--   again from an attach reply or `dsh/permissions/list`; `permission/resolved`, the call's result
--   or the turn's end close it when the daemon no longer needs an answer.
local api = vim.api
local config = require('dsh.config')
local client = require('dsh.client')
local notify = require('dsh.notify')
local state = require('dsh.state')
local labels = require('dsh.labels')
local review = require('dsh.review')

local M = {}

---@type table<string, table> key (sessionId .. '\0' .. callId) -> open request
M.open = {}
---@type table<string, boolean> keys of requests the daemon said were resolved (`permission/resolved`)
M.settled = {}
M.ns = api.nvim_create_namespace('dsh.permission')

local order = 0

local function key(session_id, call_id)
  return tostring(session_id) .. '\0' .. tostring(call_id)
end

--- How many requests of `session_id` wait for an answer (all sessions when nil).
function M.count(session_id)
  local n = 0
  for _, req in pairs(M.open) do
    if session_id == nil or req.params.sessionId == session_id then
      n = n + 1
    end
  end
  return n
end

--- The oldest open request (of `session_id` first, else of any session).
function M.first(session_id)
  local best
  for _, req in pairs(M.open) do
    local mine = session_id == nil or req.params.sessionId == session_id
    if not best or (mine and not best.mine) or (mine == best.mine and req.order < best.req.order) then
      best = { req = req, mine = mine }
    end
  end
  return best and best.req
end

local function changed(req)
  local chat = state.chats[req.params.sessionId]
  if chat then
    chat:refresh_bar()
  end
  pcall(vim.cmd.redrawstatus)
end

-- ---- the prompt float ----------------------------------------------------------------------------

local function is_edit(params)
  return type(params.preview) == 'table' and type(params.preview.diff) == 'string'
end

--- A plan's approval (`propose_plan`, protocol.md §3 "Plan approval"): the preview is the plan.
local function is_plan(params)
  return type(params.preview) == 'table' and params.preview.kind == 'plan'
end
M.is_plan = is_plan

--- A widening of the sandbox the agent asks for (protocol.md §16): `{reason, writable, network,
--- unconfined}`, or nil.
local function escalation(params)
  local e = type(params.preview) == 'table' and params.preview.escalation
  return type(e) == 'table' and e or nil
end
M.escalation = escalation

local function list_of(v)
  return type(v) == 'table' and v or {}
end

local function preview_lines(params)
  local pv = params.preview
  local e = escalation(params)
  if e then -- what runs, why, the exact widening: first, as the float shows only its top
    local lines = {
      'Widen the sandbox (now ' .. tostring(pv.sandbox or '?') .. ') to run:',
      '$ ' .. tostring(pv.command),
      'Why: ' .. tostring(e.reason or '?'):gsub('[\r\n]+', ' '),
    }
    for _, p in ipairs(list_of(e.writable)) do
      lines[#lines + 1] = '  + writable: ' .. p
    end
    for _, d in ipairs(list_of(e.network)) do
      lines[#lines + 1] = '  + network:  ' .. d
    end
    if e.unconfined then
      lines[#lines + 1] = '  + UNCONFINED: the command runs with no sandbox at all'
      lines[#lines + 1] = 'For this session: exactly this command, unconfined again.'
    else
      lines[#lines + 1] = 'For this session: every later command, widened so.'
    end
    lines[#lines + 1] = 'cwd: ' .. tostring(pv.cwd or '?')
    return lines, 'sh'
  end
  if is_edit(params) then
    return vim.split(pv.diff:gsub('\n$', ''), '\n', { plain = true }), 'diff'
  end
  if is_plan(params) then
    return vim.split(tostring(pv.plan or ''), '\n', { plain = true }), 'markdown'
  end
  if type(pv) == 'table' and pv.command then
    return { '$ ' .. tostring(pv.command), '', 'cwd: ' .. tostring(pv.cwd or '?') }, 'sh'
  end
  local ok, text = pcall(vim.json.encode, params.arguments or {})
  return vim.split(ok and text or vim.inspect(params.arguments), '\n', { plain = true }), 'json'
end

--- The edit overlaps the person's unsaved changes in its file (preview.unsaved, protocol.md §8):
--- they choose whether those are written with it.
local function overlaps_unsaved(params)
  return is_edit(params) and params.preview.unsaved == 'overlaps'
end

--- What the prompt says of the person's unsaved changes in the edited file, above the diff.
local function unsaved_lines(params)
  local name = vim.fs.basename(tostring(params.preview.path or '?'))
  if overlaps_unsaved(params) then
    return {
      ('%s: this edit overlaps your unsaved changes.'):format(name),
      'Buffer only: not saved, commands will not see it.',
      'Write both: your unsaved changes are saved too.',
    }
  elseif is_edit(params) and params.preview.unsaved == 'apart' then
    return { ('%s: your unsaved changes stay unsaved;'):format(name), 'only this edit is written to the file.' }
  end
  return {}
end

--- The choice lines, farthest from the cursor's starting line first: allowing is at the top.
--- `persistable`: the daemon can save a widening to its config (flag `persistWidening`).
local function choices(params, persistable)
  local k = config.options.keys.prompt or {}
  local function lhs(name)
    return config.key(k[name])
  end
  local e = escalation(params)
  if e then -- the four answers of a widening (WAVE2/protocol.md §16), then cancel
    -- The exact widening is in the preview under the choices; the labels stay short enough not to
    -- wrap in a narrow transcript window.
    local list = {
      { label = 'Allow once (this command)', outcome = 'allow-once', key = lhs('allow_once') },
      { label = 'Allow for this session', outcome = 'allow-always', key = lhs('allow_always') },
    }
    -- Saved to config.json: every later session gets it too; offered only when the daemon says it can
    -- (flag `persistWidening`); an unconfined widening is never saved.
    if persistable and not e.unconfined then
      list[#list + 1] =
        { label = 'Always (saved to config)', outcome = 'allow-always', persist = true, key = lhs('allow_saved') }
    end
    list[#list + 1] = { label = 'Reject (nothing runs)', outcome = 'reject', key = lhs('reject') }
    list[#list + 1] = { label = 'Cancel the turn (the queue is kept)', outcome = 'cancelled', key = lhs('cancel') }
    return list
  end
  if is_plan(params) then -- approve into accept edits or ask, revise (with the person's words), cancel
    return {
      { label = 'Approve: accept edits (the plan runs now)', outcome = 'allow-once', mode = 'accept-edits', key = lhs('allow_once') },
      { label = 'Approve: ask before each edit', outcome = 'allow-once', mode = 'ask', key = lhs('approve_ask') },
      { label = 'Revise: tell the agent what to change', action = 'revise', key = lhs('reject') },
      { label = 'Cancel the turn (the queue is kept)', outcome = 'cancelled', key = lhs('cancel') },
    }
  end
  if overlaps_unsaved(params) then -- the three answers of issue 37, then cancel
    return {
      {
        label = 'Keep it in the buffer only',
        outcome = 'allow-once',
        unsaved = 'buffer-only',
        key = lhs('allow_once'),
      },
      {
        label = 'Write both to the file',
        outcome = 'allow-once',
        unsaved = 'both',
        key = lhs('allow_both'),
      },
      { label = 'Reject: the agent is told and goes on', outcome = 'reject', key = lhs('reject') },
      { label = 'Cancel the turn (the queue is kept)', outcome = 'cancelled', key = lhs('cancel') },
    }
  end
  local always = params.tool == 'run_command' and 'Allow always: exactly this command, this session'
    or ('Allow always: every %s call, this session'):format(params.tool or 'such')
  local list = {
    { label = 'Allow once', outcome = 'allow-once', key = lhs('allow_once') },
    { label = always, outcome = 'allow-always', key = lhs('allow_always') },
  }
  if is_edit(params) then
    list[#list + 1] = { label = 'Review hunk by hunk (a diff tab)', action = 'review', key = lhs('review') }
    list[#list + 1] = { label = 'Review in the file (keep/reject each hunk)', action = 'review_inline', key = lhs('review_inline') }
  end
  list[#list + 1] = { label = 'Reject: the agent is told and goes on', outcome = 'reject', key = lhs('reject') }
  list[#list + 1] = { label = 'Cancel the turn (the queue is kept)', outcome = 'cancelled', key = lhs('cancel') }
  return list
end

local function footer(req)
  local k = config.options.keys.prompt or {}
  local hide = config.key(k.hide)
  local saved = ''
  for _, c in ipairs(req.choices) do
    if c.persist and config.key(k.allow_saved) then
      saved = ' · ' .. config.key(k.allow_saved) .. ' saved'
    end
  end
  if is_plan(req.params) then
    return (' <CR> on a choice · %s approve · %s approve, ask · %s revise%s '):format(
      config.key(k.allow_once) or '-',
      config.key(k.approve_ask) or '-',
      config.key(k.reject) or '-',
      hide and (' · ' .. hide .. ' hide') or ''
    )
  end
  if overlaps_unsaved(req.params) then
    return (' <CR> on a choice · %s buffer only · %s write both · %s reject%s '):format(
      config.key(k.allow_once) or '-',
      config.key(k.allow_both) or '-',
      config.key(k.reject) or '-',
      hide and (' · ' .. hide .. ' hide') or ''
    )
  end
  return (' <CR> on a choice · %s once · %s %s%s · %s reject%s '):format(
    config.key(k.allow_once) or '-',
    config.key(k.allow_always) or '-',
    req.escalation and 'session' or 'always',
    saved,
    config.key(k.reject) or '-',
    hide and (' · ' .. hide .. ' hide') or ''
  )
end

local function build(req)
  local params = req.params
  local preview, ft = preview_lines(params)
  local list = choices(params, (client.info(req.root) or {}).persistWidening and true)
  req.escalation = escalation(params) ~= nil
  local width = 20
  for _, l in ipairs(preview) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  local lines = {}
  for _, c in ipairs(list) do
    local text = '  ▸ ' .. c.label
    width = math.max(width, vim.fn.strdisplaywidth(text) + 6)
    lines[#lines + 1] = text
  end
  lines[#lines + 1] = string.rep('─', 40)
  for _, l in ipairs(unsaved_lines(params)) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
    lines[#lines + 1] = l
  end
  vim.list_extend(lines, preview)
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  vim.b[buf].dsh_permission = { sessionId = params.sessionId, callId = params.callId, tool = params.tool }
  vim.b[buf].dsh_float = 'permission'
  for i, c in ipairs(list) do
    api.nvim_buf_set_extmark(buf, M.ns, i - 1, 4, { end_col = #lines[i], hl_group = 'DshChoice' })
    if c.key then
      api.nvim_buf_set_extmark(buf, M.ns, i - 1, 0, {
        virt_text = { { c.key, 'DshChoiceKey' } },
        virt_text_pos = 'right_align',
      })
    end
  end
  -- The preview keeps its own highlighting: a diff's lines, a command.
  if ft == 'diff' then
    for i = #list + 2, #lines do
      local l = lines[i]
      local hl = l:match('^%+') and 'DiffAdd' or l:match('^%-') and 'DiffDelete' or l:match('^@@') and 'DiffChange' or nil
      if hl then
        api.nvim_buf_set_extmark(buf, M.ns, i - 1, 0, { end_col = #l, hl_group = hl })
      end
    end
  end
  req.choices, req.first_preview = list, #list + 1
  return buf, lines, width
end

local function close_float(req)
  local win, buf = req.win, req.buf
  req.win, req.buf = nil, nil
  if win and api.nvim_win_is_valid(win) then
    pcall(api.nvim_win_close, win, true)
  end
  if buf and api.nvim_buf_is_valid(buf) then
    pcall(api.nvim_buf_delete, buf, { force = true })
  end
end

local function focused(req)
  return req.win and api.nvim_get_current_win() == req.win
end

local show -- defined below

--- Revise a plan: the person's words (an empty line: none, the agent asks) go back with the
--- rejection; dismissing the input leaves the request open.
local function revise(req)
  vim.ui.input({ prompt = 'What should change in the plan? ' }, function(text)
    if text == nil or req.done then
      return
    end
    req.feedback = vim.trim(text) ~= '' and vim.trim(text) or nil
    req.finish('reject')
  end)
end

local function act(req, choice)
  if choice.action == 'review' or choice.action == 'review_inline' then
    return M.review(req, choice.action == 'review_inline')
  end
  if choice.action == 'revise' then
    return revise(req)
  end
  req.mode = choice.mode -- a plan's approval: the mode it runs in
  req.persist = choice.persist or nil -- "Always (saved to config)": allow-always + persist
  req.unsaved = choice.unsaved -- an edit overlapping unsaved changes: "both" or "buffer-only"
  req.finish(choice.outcome)
end

local function set_keys(req, buf)
  local k = config.options.keys.prompt or {}
  for _, c in ipairs(req.choices) do
    local name = c.persist and 'allow_saved'
      or (c.unsaved == 'both' and 'allow_both')
      or (c.mode == 'ask' and 'approve_ask')
      or (c.action == 'revise' and 'reject')
      or ({
        ['allow-once'] = 'allow_once',
        ['allow-always'] = 'allow_always',
        reject = 'reject',
        cancelled = 'cancel',
      })[c.outcome]
      or (c.action == 'review' and 'review')
      or (c.action == 'review_inline' and 'review_inline')
    for _, lhs in ipairs(config.lhs_list(name and k[name])) do
      vim.keymap.set('n', lhs, function()
        act(req, c)
      end, { buffer = buf, nowait = true, desc = 'dsh: ' .. c.label })
    end
  end
  vim.keymap.set('n', '<CR>', function()
    local row = api.nvim_win_get_cursor(0)[1]
    local c = req.choices[row]
    if c then
      act(req, c)
    else
      notify.notify('put the cursor on a choice (the ▸ lines) and press <CR>')
    end
  end, { buffer = buf, nowait = true, desc = 'dsh: the choice under the cursor' })
  for _, lhs in ipairs(config.lhs_list(k.hide)) do
    vim.keymap.set('n', lhs, function()
      M.hide(req)
    end, { buffer = buf, nowait = true, desc = 'dsh: hide (the request stays open)' })
  end
end

--- Show the prompt of `req`: with `focus`, centred and entered (insert mode left); without, over
--- the transcript window when the chat is shown in this tab (never entered), else not at all.
show = function(req, focus)
  local transcript
  local chat = state.chats[req.params.sessionId]
  if chat and api.nvim_buf_is_valid(chat.buf) then
    transcript = chat:windows()[1]
  end
  if not focus and not transcript then
    return
  end
  if req.win and api.nvim_win_is_valid(req.win) then
    if focus then
      req.prev_win = api.nvim_get_current_win()
      api.nvim_set_current_win(req.win)
      vim.cmd.stopinsert()
      api.nvim_win_set_cursor(req.win, { req.first_preview, 0 })
    end
    return
  end
  local buf, lines, width = build(req)
  local title = ' dsh: ' .. tostring(req.params.title or req.params.tool or 'permission') .. ' '
  local foot = footer(req)
  width = math.max(width, vim.fn.strdisplaywidth(title), vim.fn.strdisplaywidth(foot)) + 2
  local cfg = {
    style = 'minimal',
    border = 'rounded',
    title = title,
    title_pos = 'center',
    footer = foot,
    footer_pos = 'center',
    zindex = 50,
  }
  if focus then
    width = math.min(width, math.max(20, vim.o.columns - 6))
    local height = math.max(1, math.min(#lines, math.floor(vim.o.lines * 0.6)))
    cfg.relative, cfg.width, cfg.height = 'editor', width, height
    cfg.row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1)
    cfg.col = math.max(0, math.floor((vim.o.columns - width) / 2))
  else
    local ww, wh = api.nvim_win_get_width(transcript), api.nvim_win_get_height(transcript)
    cfg.relative, cfg.win = 'win', transcript
    cfg.width = math.max(10, math.min(width, ww - 2))
    cfg.height = math.max(1, math.min(#lines, math.floor(wh * 0.6)))
    cfg.row, cfg.col = 0, 0
  end
  req.prev_win = api.nvim_get_current_win()
  local win = api.nvim_open_win(buf, focus, cfg)
  vim.wo[win].wrap = not is_edit(req.params) -- a command wraps; a diff keeps its columns
  vim.wo[win].cursorline = true
  req.buf, req.win = buf, win
  api.nvim_win_set_cursor(win, { req.first_preview, 0 })
  set_keys(req, buf)
  api.nvim_create_autocmd('WinEnter', {
    buffer = buf,
    callback = function()
      vim.cmd.stopinsert() -- reached from insert mode: the answer keys are normal-mode keys
    end,
  })
  api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      if req.buf == buf then
        req.buf, req.win = nil, nil
        req.hidden = true -- closed by hand: hidden, still open
      end
    end,
  })
  if focus then
    vim.cmd.stopinsert()
  end
end

--- q / <Esc>: hide the prompt; the request stays open and announced.
function M.hide(req)
  local was_focused = focused(req)
  req.hidden = true
  close_float(req)
  if was_focused and req.prev_win and api.nvim_win_is_valid(req.prev_win) then
    api.nvim_set_current_win(req.prev_win)
  end
  local k = config.key((config.options.keys.chat or {}).permission)
  notify.notify(('permission request hidden, still open: :DshPermission%s shows it'):format(k and (' or ' .. k) or ''))
end

--- Announce a new request without taking focus.
local function announce(req)
  changed(req)
  local p = req.params
  local what = labels.first_line(p.title or p.tool or 'a tool', 60)
  local k = config.key((config.options.keys.chat or {}).permission)
  notify.line(
    ('asks permission: %s — :DshPermission%s to answer'):format(what, k and (' or ' .. k .. ' in the chat') or ''),
    vim.log.levels.WARN
  )
  if not M.shown_request() then
    show(req, false)
  end
end

--- The request whose float is shown now, if any.
function M.shown_request()
  for _, req in pairs(M.open) do
    if req.win and api.nvim_win_is_valid(req.win) then
      return req
    end
  end
end

--- After an answer: the next waiting request (of any session) is shown the same way, focused if
--- the person was answering in the float.
local function next_after(was_focused)
  local req = M.first(nil)
  if req and not M.shown_request() then
    show(req, was_focused)
  end
end

-- ---- requests ------------------------------------------------------------------------------------

--- A request record; `reply(outcome)` delivers the answer.
local function new_request(root, params, reply)
  local k = key(params.sessionId, params.callId)
  order = order + 1
  local req = { params = params, root = root, done = false, order = order }
  -- quiet: the daemon no longer needs an answer; new_text: the edit as the person accepted it
  req.finish = function(outcome, quiet, new_text)
    if req.done then
      return
    end
    req.done = true
    req.outcome = outcome
    req.new_text = new_text
    if M.open[k] == req then
      M.open[k] = nil
    end
    local was_focused = focused(req)
    local prev = req.prev_win
    if req.reviewing then -- answered elsewhere while it was being reviewed: the review goes
      (req.reviewing.kind == 'inline' and require('dsh.inline') or review).dismiss(req.reviewing)
      req.reviewing = nil
    end
    vim.schedule(function()
      close_float(req)
      if was_focused and prev and api.nvim_win_is_valid(prev) then
        pcall(api.nvim_set_current_win, prev)
      end
      changed(req)
      reply(outcome, quiet, new_text)
      next_after(was_focused)
    end)
  end
  return req, k
end

--- The handler (runs inside the coroutine Neovim made for this server request).
function M.request(root, params, _ctx)
  local co, is_main = coroutine.running()
  local answered
  local req, k = new_request(root, params, function(outcome)
    answered = outcome
    if co and not is_main and coroutine.status(co) == 'suspended' then
      coroutine.resume(co, outcome)
    end
  end)
  if M.open[k] then
    M.open[k].finish('cancelled', true)
  end
  M.settled[k] = nil
  M.open[k] = req
  announce(req)
  local outcome
  if co and not is_main then
    outcome = answered or coroutine.yield()
  else
    vim.wait(24 * 3600 * 1000, function()
      return req.done
    end, 50)
    outcome = req.outcome
  end
  return {
    outcome = outcome or 'cancelled',
    newText = req.new_text,
    persist = req.persist,
    unsaved = req.unsaved,
    mode = req.mode,
    feedback = req.feedback,
  }
end

--- Show again a request the daemon still has open (an attach reply, dsh/permissions/list), unless
--- it is open here already; the answer goes back as `dsh/permissions/respond`.
function M.reopen(root, params)
  local k = key(params.sessionId, params.callId)
  if M.open[k] or M.settled[k] then
    return M.open[k]
  end
  local req
  req = new_request(root, params, function(outcome, quiet, new_text)
    if quiet then
      return
    end
    local answer = {
      sessionId = params.sessionId,
      callId = params.callId,
      outcome = outcome,
      newText = new_text,
      persist = req.persist,
      unsaved = req.unsaved,
      mode = req.mode,
      feedback = req.feedback,
    }
    client.request(root, 'dsh/permissions/respond', answer, function(err, res)
      if err then
        notify.error('could not answer the permission request: ' .. (err.message or ''))
      elseif res and res.answered == false then
        notify.warn('that permission request was no longer open')
      end
    end)
  end)
  req.reopened = true
  M.open[k] = req
  announce(req)
  return req
end

--- :DshPermission — go to the oldest open request (of the chat's session first), leaving insert
--- mode. With none open here, ask the daemon (`dsh/permissions/list`) for the session's.
function M.focus(chat)
  local sid = chat and chat.id
  local req = M.first(sid)
  if req then
    for _, other in pairs(M.open) do -- one prompt at a time
      if other ~= req and other.win then
        close_float(other)
      end
    end
    return show(req, true)
  end
  if not (chat and sid) then
    return notify.notify('no permission request is waiting')
  end
  client.request(chat.root, 'dsh/permissions/list', { sessionId = sid }, function(err, res)
    if err or not res or #(res.open or {}) == 0 then
      return notify.notify('no permission request is waiting')
    end
    for _, params in ipairs(res.open) do
      params.sessionId = params.sessionId or sid
      M.reopen(chat.root, params)
    end
    local first = M.first(sid)
    if first then
      show(first, true)
    end
  end)
end

-- ---- hunk review ---------------------------------------------------------------------------------

--- A person took some hunks of an edit out (or changed it by hand): the accepted text goes back as
--- allow-once with `newText` (protocol.md §8, flag `editedAccept`); the daemon writes exactly it and
--- tells the model what the person changed. An older daemon cannot take it: the edit is rejected as
--- a whole and the person is told so.
function M.partial(req, decision)
  local pv_path = req.params.preview and req.params.preview.path
  local path = labels.first_line(pv_path and vim.fn.fnamemodify(pv_path, ':~:.') or req.params.title, 60)
  local chat = state.chats[req.params.sessionId]
  local info = client.info(req.root) or {}
  if info.editedAccept then
    req.finish('allow-once', nil, decision.text)
    if chat then
      chat:note(('✓ allowed your version of the edit to %s'):format(path), 'DshAccepted')
    end
    return
  end
  req.finish('reject')
  local msg = ('kept %s of the edit to %s: this daemon cannot take a partial edit, so the whole edit was rejected'):format(
    decision.rejected and decision.rejected > 0 and 'part' or 'a changed version',
    path
  )
  notify.warn(msg)
  if chat then
    chat:note('✗ ' .. msg, 'DshError')
  end
end

--- Review an edit's diff hunk by hunk (in a diff tab, or `inline` in the file's buffer); the decision
--- answers the request.
function M.review(req, inline)
  local pv = req.params.preview or {}
  if not is_edit(req.params) then
    return notify.notify('only an edit can be reviewed hunk by hunk')
  end
  if pv.truncated then
    return notify.warn('this edit is too large to review here (the preview was cut); answer it from the prompt')
  end
  local was_focused = focused(req)
  req.hidden = true
  close_float(req)
  if was_focused and req.prev_win and api.nvim_win_is_valid(req.prev_win) then
    api.nvim_set_current_win(req.prev_win)
  end
  req.reviewing = (inline and require('dsh.inline') or review).open({
    path = pv.path,
    old_text = pv.oldText or '',
    new_text = pv.newText or '',
    on_decision = function(decision)
      req.reviewing = nil
      if req.done then
        return notify.warn('that permission request was answered meanwhile')
      end
      if decision.outcome == 'accept' then
        req.finish('allow-once')
      elseif decision.outcome == 'reject' then
        req.finish('reject')
      else
        M.partial(req, decision)
      end
    end,
    on_close = function()
      req.reviewing = nil
      changed(req)
    end,
  })
end

--- :DshReview — review the oldest open edit request hunk by hunk.
function M.review_first(chat)
  local req = M.first(chat and chat.id)
  if not req then
    return notify.notify('no edit is waiting for permission')
  end
  M.review(req)
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
