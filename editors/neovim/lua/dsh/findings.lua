-- Review findings (protocol.md §19, flag `review`): :DshReview starts a review (`dsh/review/start`);
-- each live finding is a `vim.diagnostic` in the `dsh-review` namespace on its file's buffer and an
-- entry of :DshReviewList's quickfix list; dismissing one (:DshReviewDismiss, or `x` in that list)
-- calls `dsh/review/dismiss`, and so does a change to the lines a finding points at (the finding no
-- longer describes them; rewriting them with the same text is no change). Lines of an edit above a
-- finding move it along.
--
-- The daemon holds the truth (`dsh/review/list` folds the log); the live `review/*` events only keep
-- what is shown current between lists.
local api = vim.api
local notify = require('dsh.notify')

local M = {}

M.ns = api.nvim_create_namespace('dsh-review')

-- sessionId -> {order = {findingId...}, by_id = {findingId -> finding}, root}
local live = {}
-- findingId -> {buf, s, e, text} (0-based inclusive lines, as moved by edits above it; the text
-- they held when first shown)
local placed = {}
local attached = {} -- buf -> true while on_lines watches it

local SEVERITY = {
  error = vim.diagnostic.severity.ERROR,
  warning = vim.diagnostic.severity.WARN,
  info = vim.diagnostic.severity.INFO,
}
local QF_TYPE = { error = 'E', warning = 'W', info = 'I' }

local function client()
  return require('dsh.client')
end

local function of(sid, root)
  live[sid] = live[sid] or { order = {}, by_id = {}, root = root }
  if root then
    live[sid].root = root
  end
  return live[sid]
end

--- The absolute path of a finding (`path` is relative to the session's cwd unless absolute).
function M.abspath(root, path)
  if type(path) ~= 'string' then
    return nil
  end
  if path:sub(1, 1) == '/' then
    return path
  end
  return vim.fs.normalize(root .. '/' .. path)
end

local function all_findings()
  local out = {}
  for sid, s in pairs(live) do
    for _, id in ipairs(s.order) do
      local f = s.by_id[id]
      if f then
        out[#out + 1] = { sid = sid, root = s.root, f = f }
      end
    end
  end
  return out
end

local redraw -- forward

--- Watch `buf` for changes: an edit inside a finding's lines dismisses it, one above moves it.
local function watch(buf)
  if attached[buf] or not api.nvim_buf_is_loaded(buf) then
    return
  end
  attached[buf] = true
  api.nvim_buf_attach(buf, false, {
    on_lines = function(_, b, _, first, last_old, last_new)
      local delta, hit, any = last_new - last_old, {}, false
      for id, p in pairs(placed) do
        if p.buf == b then
          any = true
          if last_old <= p.s and not (first == p.s and last_old == p.s and last_new == p.s) then
            p.s, p.e = p.s + delta, p.e + delta -- lines above it changed: it moves along
          elseif first <= p.e then
            hit[#hit + 1] = id -- its own lines changed
          end
        end
      end
      if not any then
        attached[b] = nil
        return true -- detach: nothing of ours on it
      end
      vim.schedule(function()
        for _, id in ipairs(hit) do
          local p = placed[id]
          -- A change that rewrote them with the same text (a reload, the agent writing the whole
          -- file) leaves the finding where it is.
          if not (p and p.text and api.nvim_buf_is_loaded(b) and vim.deep_equal(api.nvim_buf_get_lines(b, p.s, p.e + 1, false), p.text)) then
            M.dismiss_id(id, 'its lines changed')
          end
        end
        redraw()
      end)
    end,
    on_detach = function(_, b)
      attached[b] = nil
    end,
  })
end

--- Set the diagnostics of every buffer holding a finding (and clear those that no longer do).
redraw = function()
  local per_buf = {}
  for _, x in ipairs(all_findings()) do
    local f = x.f
    local path = M.abspath(x.root, f.path)
    local p = placed[f.findingId]
    if not p and path then
      local buf = vim.fn.bufadd(path)
      p = { buf = buf, s = (tonumber(f.startLine) or 1) - 1, e = (tonumber(f.endLine) or 1) - 1 }
      placed[f.findingId] = p
    end
    if p then
      watch(p.buf)
      per_buf[p.buf] = per_buf[p.buf] or {}
      local end_col = 0
      if api.nvim_buf_is_loaded(p.buf) then
        p.text = p.text or api.nvim_buf_get_lines(p.buf, p.s, p.e + 1, false) -- what it points at
        local l = p.text[#p.text]
        end_col = l and #l or 0
      end
      table.insert(per_buf[p.buf], {
        lnum = p.s,
        end_lnum = p.e,
        col = 0,
        end_col = end_col,
        severity = SEVERITY[f.severity] or vim.diagnostic.severity.INFO,
        source = 'dsh review',
        code = f.findingId,
        message = tostring(f.title or '') .. ((f.body and f.body ~= '') and ('\n' .. f.body) or ''),
        user_data = { findingId = f.findingId, sessionId = x.sid, suggestedPatch = f.suggestedPatch },
      })
    end
  end
  for _, d in ipairs(vim.diagnostic.get(nil, { namespace = M.ns })) do
    per_buf[d.bufnr] = per_buf[d.bufnr] or {}
  end
  for buf, diags in pairs(per_buf) do
    if api.nvim_buf_is_valid(buf) then
      vim.diagnostic.set(M.ns, buf, diags)
    end
  end
  M.refresh_quickfix()
end

local function forget(id)
  for _, s in pairs(live) do
    if s.by_id[id] then
      s.by_id[id] = nil
      s.order = vim.tbl_filter(function(x)
        return x ~= id
      end, s.order)
    end
  end
  placed[id] = nil
end

--- A live `review/*` event (or a cut) of a chat's session.
function M.on_event(chat, ev)
  local d, sid = ev.data or {}, ev.sessionId
  if ev.type == 'review/finding' and d.findingId then
    local s = of(sid, chat.root)
    if not s.by_id[d.findingId] then
      s.order[#s.order + 1] = d.findingId
    end
    s.by_id[d.findingId] = d
    redraw()
  elseif ev.type == 'review/dismissed' and d.findingId then
    forget(d.findingId)
    redraw()
  elseif ev.type == 'review/completed' then
    local n = tonumber(d.findings) or 0
    notify.notify(('review done: %d finding%s (:DshReviewList)'):format(n, n == 1 and '' or 's'))
    M.refetch(chat)
  elseif ev.type == 'conversation/cut' and live[sid] then
    M.refetch(chat) -- a cut takes back the findings of the turns it cut
  end
end

--- Replace what is shown for a chat's session with `dsh/review/list`, then `cb()`.
function M.refetch(chat, cb)
  client().request(chat.root, 'dsh/review/list', { sessionId = chat.id }, function(err, res)
    if err then
      return notify.error('could not list the review findings: ' .. (err.message or ''))
    end
    local s = of(chat.id, chat.root)
    local keep = {}
    for _, f in ipairs(res.findings or {}) do
      keep[f.findingId] = true
    end
    for _, id in ipairs(s.order) do
      if not keep[id] then
        placed[id] = nil
      end
    end
    s.order, s.by_id = {}, {}
    for _, f in ipairs(res.findings or {}) do
      s.order[#s.order + 1] = f.findingId
      s.by_id[f.findingId] = f
    end
    redraw()
    if cb then
      cb()
    end
  end)
end

-- ---- quickfix -----------------------------------------------------------------------------------

local TITLE = 'dsh review findings'

function M.qf_items()
  local items = {}
  for _, x in ipairs(all_findings()) do
    local f, p = x.f, placed[x.f.findingId]
    local path = M.abspath(x.root, f.path)
    items[#items + 1] = {
      filename = path,
      bufnr = p and p.buf or nil,
      lnum = p and (p.s + 1) or tonumber(f.startLine) or 1,
      end_lnum = p and (p.e + 1) or tonumber(f.endLine) or 1,
      type = QF_TYPE[f.severity] or 'I',
      text = ('[%s] %s'):format(tostring(f.severity or 'info'), tostring(f.title or '')),
      user_data = { findingId = f.findingId, sessionId = x.sid },
    }
  end
  return items
end

local function ours()
  local ctx = vim.fn.getqflist({ context = 0 }).context
  return type(ctx) == 'table' and ctx.dsh == 'review'
end

--- Keep the list current when it is the quickfix list shown.
function M.refresh_quickfix()
  if ours() then
    vim.fn.setqflist({}, 'r', { title = TITLE, items = M.qf_items(), context = { dsh = 'review' } })
  end
end

--- :DshReviewList: the live findings of the chat's session in the quickfix list.
function M.list(chat)
  M.refetch(chat, function()
    vim.fn.setqflist({}, ' ', { title = TITLE, items = M.qf_items(), context = { dsh = 'review' } })
    vim.cmd('botright copen')
    M.map_quickfix(api.nvim_get_current_buf())
  end)
end

--- `x` in the quickfix window of the findings dismisses the entry under the cursor.
function M.map_quickfix(buf)
  vim.keymap.set('n', 'x', function()
    if ours() then
      M.dismiss()
    else
      vim.cmd('normal! x')
    end
  end, { buffer = buf, desc = 'dsh: dismiss the review finding' })
end

-- ---- dismiss ------------------------------------------------------------------------------------

local function session_of(id)
  for sid, s in pairs(live) do
    if s.by_id[id] then
      return sid, s.root
    end
  end
end

--- Dismiss a finding by id (`dsh/review/dismiss`); it is taken off at once, and back if refused.
function M.dismiss_id(id, why)
  local sid, root = session_of(id)
  if not sid then
    return
  end
  forget(id)
  redraw()
  client().request(root, 'dsh/review/dismiss', { sessionId = sid, findingId = id }, function(err)
    if err then
      notify.error('could not dismiss the finding: ' .. (err.message or ''))
      local chat = require('dsh.state').chats[sid]
      if chat then
        M.refetch(chat)
      end
    elseif why then
      notify.notify('review finding dismissed: ' .. why)
    end
  end)
end

--- The finding under the cursor: the quickfix entry in the findings list, else a diagnostic of
--- ours on the cursor's line.
function M.at_cursor()
  if vim.bo.buftype == 'quickfix' then
    local idx = vim.fn.line('.')
    local item = vim.fn.getqflist({ idx = idx, items = 0 }).items[1]
    return item and type(item.user_data) == 'table' and item.user_data.findingId or nil
  end
  local lnum = api.nvim_win_get_cursor(0)[1] - 1
  for id, p in pairs(placed) do
    if p.buf == api.nvim_get_current_buf() and p.s <= lnum and lnum <= p.e then
      return id
    end
  end
end

--- :DshReviewDismiss: dismiss the finding under the cursor.
function M.dismiss()
  local id = M.at_cursor()
  if not id then
    return notify.notify('no review finding here')
  end
  M.dismiss_id(id)
end

-- ---- :DshReview ---------------------------------------------------------------------------------

--- The params of `dsh/review/start` from :DshReview's words: `base REF` / `commit REF` first, the
--- rest the instructions.
function M.parse(args)
  local params = {}
  local kind, ref, rest = (args or ''):match('^%s*(%a+)%s+(%S+)%s*(.*)$')
  if kind == 'base' or kind == 'commit' then
    params[kind] = ref
  else
    rest = args or ''
  end
  rest = vim.trim(rest)
  if rest ~= '' then
    params.instructions = rest
  end
  return params
end

--- What a review message is, in words (the transcript shows this, not the diff it carries).
function M.describe(review)
  local t = type(review) == 'table' and review.target or {}
  local what
  if t.kind == 'base' then
    what = 'the changes since ' .. tostring(t.ref)
  elseif t.kind == 'commit' then
    what = 'commit ' .. tostring(t.ref):sub(1, 12)
  else
    what = 'the uncommitted changes'
  end
  local text = '/review ' .. what
  if type(review.instructions) == 'string' and review.instructions ~= '' then
    text = text .. ': ' .. review.instructions
  end
  return text
end

function M.start(args)
  local sessions = require('dsh.sessions')
  local params = M.parse(args)
  sessions.open(function(chat)
    sessions.materialize(chat, function()
      params.sessionId = chat.id
      of(chat.id, chat.root)
      client().request(chat.root, 'dsh/review/start', params, function(err, res)
        if err then
          return notify.error('review not started: ' .. (err.message or ''))
        end
        local n = #(res.files or {})
        notify.notify(('review of %d file%s queued%s'):format(n, n == 1 and '' or 's', res.truncated and ' (diff cut)' or ''))
      end)
    end)
  end)
end

--- Forget everything (tests; a daemon restart keeps the log, so :DshReviewList brings them back).
function M.reset()
  live, placed = {}, {}
  for _, d in ipairs(vim.diagnostic.get(nil, { namespace = M.ns })) do
    vim.diagnostic.reset(M.ns, d.bufnr)
  end
end

return M
