-- What exists before the plugin is loaded: the user commands and the <Plug>(dsh-…) mappings
-- (plugin/dsh.lua defines them at startup, or setup() does), and the default global keys. Each
-- loads the plugin when first used; this module itself requires nothing, so startup stays cheap.
local M = {}

--- name, attributes (every command has a *:Name* tag in doc/dsh.txt and is in the README's
--- lazy.nvim spec; tests/neovim/test_conventions.py checks both).
M.commands = {
  { 'Dsh', { nargs = '*', desc = 'dsh: open the chat (the latest session of this project), or send a prompt' } },
  { 'DshNew', { desc = 'dsh: a new chat (its session starts with its first prompt)' } },
  { 'DshToggle', { desc = 'dsh: show or hide the chat' } },
  { 'DshSteer', { nargs = '*', range = true, desc = 'dsh: steer the running turn' } },
  { 'DshInject', { nargs = '*', range = true, desc = 'dsh: context for the next request' } },
  { 'DshQueue', { desc = 'dsh: edit the queue' } },
  { 'DshStop', { bang = true, desc = 'dsh: stop the turn (! also clears the queue); offers to stop background processes' } },
  { 'DshWake', { desc = 'dsh: run what is queued' } },
  { 'DshSessions', { desc = 'dsh: pick a session' } },
  { 'DshResume', { nargs = '?', desc = 'dsh: reattach a session (the latest by default)' } },
  { 'DshOlder', { desc = 'dsh: load the turns before the oldest one shown' } },
  { 'DshRename', { nargs = '*', desc = 'dsh: rename the session' } },
  { 'DshDelete', { nargs = '?', bang = true, desc = "dsh: delete a session (the chat's by default; ! without asking)" } },
  { 'DshAddFile', { nargs = '?', bang = true, complete = 'file', desc = 'dsh: attach a file to the next prompt (! add it now)' } },
  { 'DshEdits', { desc = 'dsh: files the agent edited (quickfix)' } },
  { 'DshPermission', { desc = 'dsh: go to the permission request waiting' } },
  {
    'DshReview',
    {
      nargs = '*',
      desc = 'dsh: the edit waiting for permission hunk by hunk; else review code ([base REF|commit REF] [instructions])',
    },
  },
  { 'DshReviewList', { desc = 'dsh: the live review findings (quickfix; x dismisses)' } },
  { 'DshReviewDismiss', { desc = 'dsh: dismiss the review finding under the cursor' } },
  { 'DshDiff', { desc = "dsh: the last turn's changed hunks (quickfix; u undoes, a keeps)" } },
  { 'DshDiffUndo', { desc = "dsh: undo the turn's hunk under the cursor" } },
  { 'DshDiffKeep', { desc = "dsh: keep (mark reviewed) the turn's hunk under the cursor" } },
  { 'DshRewind', { nargs = '?', desc = 'dsh: files and/or conversation back to before a turn (the latest by default)' } },
  { 'DshFork', { nargs = '?', desc = 'dsh: a new session from the turns up to one (all by default)' } },
  { 'DshPlan', { desc = "dsh: the agent's plan" } },
  { 'DshCost', { desc = "dsh: what the session cost: its turns, tokens and cost, and its subagents' part" } },
  { 'DshProcesses', { desc = "dsh: the agent's background processes (read one's output, stop one)" } },
  {
    'DshAgents',
    {
      nargs = '*',
      desc = "dsh: the project's named agents (.dsh/agents); NAME [TASK] hands a task to one",
      complete = function(lead)
        return require('dsh.agents').complete(lead)
      end,
    },
  },
  { 'DshTrust', { bang = true, desc = "dsh: trust this project's hooks so they run (! without asking)" } },
  { 'DshNewWorktree', { nargs = '?', desc = 'dsh: a new chat whose session works in its own git worktree' } },
  {
    'DshWorktree',
    {
      nargs = '?',
      desc = "dsh: the session's worktree: what it changed (diff), apply it to your files, keep it as a branch, discard it",
      complete = function(lead)
        return vim.tbl_filter(function(a)
          return vim.startswith(a, lead)
        end, { 'diff', 'apply', 'keep', 'discard' })
      end,
    },
  },
  {
    'DshSandbox',
    {
      nargs = '?',
      desc = 'dsh: show or change where commands run (read-only, workspace-write, full-access)',
      complete = function(lead)
        return vim.tbl_filter(function(m)
          return vim.startswith(m, lead)
        end, { 'read-only', 'workspace-write', 'full-access' })
      end,
    },
  },
  {
    'DshMode',
    {
      nargs = '?',
      desc = "dsh: the session's mode (ask, accept-edits, plan)",
      complete = function(lead)
        return require('dsh.mode').complete(lead)
      end,
    },
  },
  {
    'DshModel',
    {
      nargs = '?',
      desc = 'dsh: switch the model',
      complete = function()
        return require('dsh.config').options.models or {}
      end,
    },
  },
}

--- mode(s), lhs, rhs, description
M.plugs = {
  { 'x', '<Plug>(dsh-steer)', "<Cmd>lua require('dsh').selection('steer')<CR>", 'steer with the selection' },
  { 'x', '<Plug>(dsh-inject)', "<Cmd>lua require('dsh').selection('inject')<CR>", 'inject the selection' },
  { 'x', '<Plug>(dsh-attach)', "<Cmd>lua require('dsh').selection('attach')<CR>", 'attach the selection to the next prompt' },
  { 'n', '<Plug>(dsh-open)', '<Cmd>Dsh<CR>', 'open the chat' },
  { 'n', '<Plug>(dsh-toggle)', '<Cmd>DshToggle<CR>', 'show or hide the chat' },
  { { 'n', 'i' }, '<Plug>(dsh-permission)', '<Cmd>DshPermission<CR>', 'go to the permission request waiting' },
  { 'n', '<Plug>(dsh-sessions)', '<Cmd>DshSessions<CR>', 'pick a session' },
  { 'n', '<Plug>(dsh-queue)', '<Cmd>DshQueue<CR>', 'edit the queue' },
  { 'n', '<Plug>(dsh-stop)', '<Cmd>DshStop<CR>', 'stop the turn, keep the queue' },
}

--- The default global keys: option name -> mode, <Plug> mapping.
M.defaults = {
  steer = { 'x', '<Plug>(dsh-steer)' },
  inject = { 'x', '<Plug>(dsh-inject)' },
  attach = { 'x', '<Plug>(dsh-attach)' },
  toggle = { 'n', '<Plug>(dsh-toggle)' },
  permission = { 'n', '<Plug>(dsh-permission)' },
}

function M.define()
  for _, c in ipairs(M.commands) do
    local name = c[1]
    vim.api.nvim_create_user_command(name, function(o)
      require('dsh.commands').run(name, o)
    end, c[2])
  end
  for _, p in ipairs(M.plugs) do
    vim.keymap.set(p[1], p[2], p[3], { desc = 'dsh: ' .. p[4], silent = true })
  end
end

local mapped = {} -- mode .. lhs of the default keys set here

--- Map the default global keys of `keys` (config `keys`): a key is left alone when something else
--- is mapped to it already (never shadowed) or the person mapped the <Plug> mapping themselves.
function M.map_defaults(keys)
  for id, lhs in pairs(mapped) do
    pcall(vim.keymap.del, id:sub(1, 1), lhs)
    mapped[id] = nil
  end
  for name, d in pairs(M.defaults) do
    local lhs = keys and keys[name]
    if type(lhs) == 'string' and lhs ~= '' then
      local mode, plug = d[1], d[2]
      local taken = vim.fn.maparg(lhs, mode) ~= ''
      if not taken and vim.fn.hasmapto(plug, mode) == 0 then
        vim.keymap.set(mode, lhs, plug, { remap = true, desc = 'dsh: ' .. name })
        mapped[mode .. lhs] = lhs
      end
    end
  end
end

return M
