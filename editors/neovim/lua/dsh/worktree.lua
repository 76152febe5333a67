-- Sessions in their own git worktree (protocol.md §20): :DshNewWorktree [BRANCH] starts a chat whose
-- session gets a worktree of its own with its first prompt; :DshWorktree [diff|apply|keep|discard]
-- shows what the chat's session changed there and brings it home (apply: all or nothing, conflicts
-- in the quickfix list), keeps it as a branch, or discards it (both asked first).
local client = require('dsh.client')
local notify = require('dsh.notify')
local sessions = require('dsh.sessions')

local M = {}

--- `⎇ BRANCH: 3 files changed, 1 commit ahead` (a session list's words for a worktree).
function M.words(tree)
  if type(tree) ~= 'table' then
    return ''
  end
  if tree.exists == false then
    return ('⎇ %s (worktree removed)'):format(tree.branch)
  end
  local parts = {}
  local changed, ahead = tonumber(tree.changedFiles), tonumber(tree.ahead)
  if changed then
    parts[#parts + 1] = changed == 0 and 'no changes' or ('%d file%s changed'):format(changed, changed == 1 and '' or 's')
  end
  if ahead and ahead > 0 then
    parts[#parts + 1] = ('%d commit%s ahead'):format(ahead, ahead == 1 and '' or 's')
  end
  return ('⎇ %s%s'):format(tree.branch, #parts > 0 and (': ' .. table.concat(parts, ', ')) or '')
end

--- :DshNewWorktree [BRANCH]: a new chat; its first prompt makes the session in its own worktree.
function M.new(branch)
  local root = client.root_for(0)
  local info = client.info(root) -- nil before the daemon started: its answer to the first prompt says
  if info and not info.worktrees then
    return notify.warn('this dsh-daemon makes no worktrees (no `worktrees` capability)')
  end
  local chat = sessions.draft(root)
  chat.worktree = (branch and branch ~= '') and { branch = branch } or vim.empty_dict()
  notify.notify(
    ('the first prompt starts a session in its own git worktree (branch %s)'):format(
      (branch and branch ~= '') and branch or 'dsh/…'
    )
  )
end

--- The chat's session and its worktree, then `cb(chat, tree)`; says why when there is none.
local function with_tree(cb)
  local chat = sessions.chat_for(0)
  if not (chat and chat.id) then
    return notify.notify('no session here')
  end
  client.request(chat.root, 'dsh/session/list', vim.empty_dict(), function(err, res)
    if err then
      return notify.error('could not list sessions: ' .. (err.message or ''))
    end
    for _, s in ipairs(res.sessions or {}) do
      if s.sessionId == chat.id then
        if type(s.worktree) ~= 'table' then
          return notify.notify('this session works in your folder, not a worktree (:DshNewWorktree starts one)')
        end
        return cb(chat, s.worktree)
      end
    end
    notify.notify('no session here')
  end)
end

local function failed(what, err)
  notify.error(('%s: %s'):format(what, err.message or ''))
end

--- The whole change from the base in a diff buffer of its own (a new tab).
local function show_diff(chat)
  client.request(chat.root, 'dsh/worktree/diff', { sessionId = chat.id }, function(err, res)
    if err then
      return failed('the worktree diff failed', err)
    end
    if #res.files == 0 then
      return notify.notify('no changes from ' .. res.base .. ' yet')
    end
    local lines = { ('# %s · %s from %s (%s)'):format(res.branch, res.path, res.base, res.baseCommit:sub(1, 12)) }
    for _, f in ipairs(res.files) do
      lines[#lines + 1] = ('# %-8s %s  +%d −%d'):format(f.status, f.path, f.added, f.removed)
    end
    vim.list_extend(lines, vim.split(res.patch, '\n', { plain = true }))
    if res.truncated then
      lines[#lines + 1] = '# (cut: git -C ' .. res.path .. ' diff ' .. res.baseCommit:sub(1, 12) .. ' has the rest)'
    end
    vim.cmd('tabnew')
    local buf = vim.api.nvim_get_current_buf()
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'wipe'
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
    vim.bo[buf].filetype = 'diff'
    pcall(vim.api.nvim_buf_set_name, buf, 'dsh://worktree/' .. res.branch)
  end)
end

local function apply(chat, tree)
  client.request(chat.root, 'dsh/worktree/apply', { sessionId = chat.id }, function(err, res)
    if err then
      return failed('apply failed', err)
    end
    if res.applied then
      vim.cmd('checktime')
      return notify.notify(('applied %d file(s) to %s as uncommitted changes'):format(#(res.files or {}), tree.repo))
    end
    local items = {}
    for _, c in ipairs(res.conflicts or {}) do
      items[#items + 1] = { filename = tree.repo .. '/' .. c.path, lnum = 1, text = c.reason }
    end
    vim.fn.setqflist({}, ' ', { title = 'dsh worktree: not applied (conflicts)', items = items })
    notify.warn(('not applied, nothing was written: %d file(s) conflict with your work tree (:copen)'):format(#items))
  end)
end

local function finish(chat, tree, action)
  local question = action == 'keep'
      and ('Commit what is not committed on branch %s and remove the worktree folder? The branch stays.'):format(tree.branch)
    or ('Remove the worktree %s and branch %s, with what is not merged? This cannot be undone.'):format(
      tree.path,
      tree.branch
    )
  local label = action == 'keep' and '&Keep branch' or '&Discard'
  if vim.fn.confirm(question, label .. '\n&Cancel', 2) ~= 1 then
    return
  end
  client.request(chat.root, 'dsh/worktree/' .. action, { sessionId = chat.id }, function(err, res)
    if err then
      return failed(action .. ' failed', err)
    end
    if action == 'keep' then
      notify.notify(('kept on branch %s (%s); the worktree folder is removed'):format(res.branch, res.commit:sub(1, 8)))
    else
      notify.notify(('discarded: the worktree and branch %s are gone'):format(res.branch))
    end
  end)
end

--- :DshWorktree [diff|apply|keep|discard]
function M.command(arg)
  arg = vim.trim(arg or '')
  with_tree(function(chat, tree)
    if arg == '' then
      notify.notify(('%s · %s · from %s'):format(M.words(tree), tree.path, tree.base))
    elseif arg == 'diff' then
      show_diff(chat)
    elseif arg == 'apply' then
      apply(chat, tree)
    elseif arg == 'keep' or arg == 'discard' then
      finish(chat, tree, arg)
    else
      notify.warn(':DshWorktree [diff|apply|keep|discard]')
    end
  end)
end

return M
