-- A turn's diff (protocol.md §15 "A turn's diff", flag `turnDiff`): :DshDiff puts the hunks the last
-- turn changed in the quickfix list (one entry a hunk, at its lines in the file as the turn left
-- it); :DshDiffUndo / :DshDiffKeep (or `u` / `a` in that list) take the hunk under the cursor back
-- (`dsh/turn/undo`, three-way against what the file holds now) or mark it reviewed
-- (`dsh/turn/keep`). A hunk that cannot be undone is reported with its reason; nothing is written
-- for it. The list follows the live `turn/diff` events while it is the quickfix list shown.
local api = vim.api
local notify = require('dsh.notify')

local M = {}

local TITLE = 'dsh turn diff'
local last = {} -- sessionId -> the last `dsh/turn/diff` result

local function client()
  return require('dsh.client')
end

--- The first changed line of a hunk's unified text (what the entry shows after its counts).
local function first_change(diff)
  for _, l in ipairs(vim.split(diff or '', '\n', { plain = true })) do
    local c = l:sub(1, 1)
    if (c == '+' or c == '-') and not l:match('^%+%+%+') and not l:match('^%-%-%-') then
      return vim.trim(l)
    end
  end
  return ''
end

--- Quickfix entries of a `dsh/turn/diff` result: one a hunk (a binary or unavailable file: one for
--- the whole file).
function M.qf_items(sid, res)
  local items = {}
  for _, f in ipairs(res.files or {}) do
    local hunks = f.hunks or {}
    if #hunks == 0 then
      items[#items + 1] = {
        filename = f.path,
        lnum = 1,
        text = ('[%s] %s %s'):format(tostring(f.state or 'pending'), f.status or '', f.binary and '(binary)' or tostring(f.unavailable or '')),
        user_data = { sessionId = sid, turn = res.turn, path = f.path },
      }
    end
    for _, h in ipairs(hunks) do
      local added, removed = 0, 0
      for _, l in ipairs(vim.split(h.diff or '', '\n', { plain = true })) do
        if l:sub(1, 1) == '+' then
          added = added + 1
        elseif l:sub(1, 1) == '-' then
          removed = removed + 1
        end
      end
      local start = math.max(1, tonumber(h.newStart) or 1)
      items[#items + 1] = {
        filename = f.path,
        lnum = start,
        end_lnum = math.max(start, start + (tonumber(h.newLines) or 0) - 1),
        type = h.state == 'pending' and 'W' or 'I',
        text = ('hunk %d [%s] +%d -%d %s'):format(h.index, tostring(h.state), added, removed, first_change(h.diff)),
        user_data = { sessionId = sid, turn = res.turn, path = f.path, hunk = h.index },
      }
    end
  end
  return items
end

local function ctx()
  local c = vim.fn.getqflist({ context = 0 }).context
  return type(c) == 'table' and c.dsh == 'diff' and c or nil
end

local function fetch(chat, cb)
  client().request(chat.root, 'dsh/turn/diff', { sessionId = chat.id }, function(err, res)
    if err then
      return notify.error('could not get the turn diff: ' .. (err.message or ''))
    end
    last[chat.id] = res
    cb(res)
  end)
end

local function set(chat, res, action)
  local idx = action == 'r' and vim.fn.getqflist({ idx = 0 }).idx or nil
  vim.fn.setqflist({}, action, {
    title = ('%s (turn %s)'):format(TITLE, tostring(res.turn)),
    items = M.qf_items(chat.id, res),
    context = { dsh = 'diff', sessionId = chat.id },
    idx = idx,
  })
end

--- :DshDiff: the last turn's hunks in the quickfix list (opened, `u` undoes, `a` keeps).
function M.open(chat)
  fetch(chat, function(res)
    if res.turn == nil or res.turn == vim.NIL then
      return notify.notify('no turn yet in this session')
    end
    set(chat, res, ' ')
    if #(res.files or {}) == 0 then
      notify.notify(('turn %s changed no file'):format(tostring(res.turn)))
    end
    vim.cmd('botright copen')
    local buf = api.nvim_get_current_buf()
    for key, act in pairs({ u = 'undo', a = 'keep' }) do
      vim.keymap.set('n', key, function()
        if ctx() then
          M.act(act)
        else
          vim.cmd('normal! ' .. key)
        end
      end, { buffer = buf, desc = 'dsh: ' .. act .. ' the hunk of the turn' })
    end
  end)
end

--- Refresh the list when it is the one shown (a `turn/diff` event, or after a keep or an undo).
function M.refresh(chat)
  local c = ctx()
  if not (c and c.sessionId == chat.id) then
    return
  end
  fetch(chat, function(res)
    if ctx() then
      set(chat, res, 'r')
    end
  end)
end

--- The hunk under the cursor: the quickfix entry in the diff list, else the hunk of the last diff
--- fetched whose lines (in the file as the turn left it) hold the cursor.
function M.at_cursor()
  if vim.bo.buftype == 'quickfix' then
    local item = vim.fn.getqflist({ idx = vim.fn.line('.'), items = 0 }).items[1]
    return item and type(item.user_data) == 'table' and item.user_data or nil
  end
  local path = vim.fs.normalize(api.nvim_buf_get_name(0))
  local lnum = api.nvim_win_get_cursor(0)[1]
  for sid, res in pairs(last) do
    for _, f in ipairs(res.files or {}) do
      if vim.fs.normalize(f.path) == path then
        for _, h in ipairs(f.hunks or {}) do
          local s = math.max(1, tonumber(h.newStart) or 1)
          local e = math.max(s, s + (tonumber(h.newLines) or 0) - 1)
          if s <= lnum and lnum <= e then
            return { sessionId = sid, turn = res.turn, path = f.path, hunk = h.index }
          end
        end
      end
    end
  end
end

--- Undo or keep (`act`) the hunk under the cursor; the result (and any conflict) is reported.
function M.act(act)
  local h = M.at_cursor()
  if not h then
    return notify.notify('no hunk of the turn here (:DshDiff lists them)')
  end
  local chat = require('dsh.state').chats[h.sessionId]
  if not chat then
    return notify.warn('that session is not open here')
  end
  local params = { sessionId = h.sessionId, turn = h.turn, path = h.path, hunks = h.hunk and { h.hunk } or nil }
  local name = vim.fn.fnamemodify(h.path, ':~:.')
  client().request(chat.root, 'dsh/turn/' .. act, params, function(err, res)
    if err then
      return notify.error(('could not %s %s: %s'):format(act, name, err.message or ''))
    end
    if act == 'keep' then
      notify.notify(('kept %s hunk %s'):format(name, table.concat(vim.tbl_map(tostring, res.kept or {}), ', ')))
    else
      local done = res.undone or {}
      if #done > 0 or res.wholeFile then
        notify.notify(('undid %s %s'):format(name, res.wholeFile and '(whole file)' or ('hunk ' .. table.concat(vim.tbl_map(tostring, done), ', '))))
      end
      for _, c in ipairs(res.conflicts or {}) do
        notify.warn(('not undone: %s%s: %s'):format(
          vim.fn.fnamemodify(c.path or h.path, ':~:.'),
          c.hunk and (' hunk ' .. tostring(c.hunk)) or '',
          tostring(c.reason)
        ))
      end
    end
    M.refresh(chat)
  end)
end

--- A live `turn/diff` event of a chat: the list shown follows it.
function M.on_event(chat, ev)
  if ev.type == 'turn/diff' then
    M.refresh(chat)
  end
end

return M
