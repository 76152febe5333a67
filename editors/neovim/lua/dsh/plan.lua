-- The agent's plan (protocol.md §7 `plan/updated`, §12 `update_plan`): its lines (the transcript's
-- block, rewritten in place by each update of the same turn: render.lua), the window bar's gauge,
-- and :DshPlan, a float with the whole plan that follows each change while it is open. The plan
-- itself is folded from the events in session.lua; a rewind back past what this chat saw asks the
-- daemon for it (the attach reply's `plan`).
local api = vim.api
local client = require('dsh.client')
local notify = require('dsh.notify')
local session = require('dsh.session')

local M = {}
M.ns = api.nvim_create_namespace('dsh.plan')

M.MARKS = { pending = '☐', in_progress = '◐', done = '☑' }
local HL = { pending = 'DshPlanStep', in_progress = 'DshPlanActive', done = 'DshPlanDone' }

--- `1/3 done`
function M.progress(steps)
  local done = 0
  for _, s in ipairs(steps) do
    if s.status == 'done' then
      done = done + 1
    end
  end
  return ('%d/%d done'):format(done, #steps)
end

--- The window bar's part: `plan 1/3` (nil without a plan).
function M.gauge(plan)
  local steps = session.plan_steps(plan)
  if not steps then
    return nil
  end
  return 'plan ' .. M.progress(steps):gsub(' done$', '')
end

local function one_line(text)
  return (tostring(text or ''):gsub('[\r\n]+', ' '))
end

--- The plan as lines with their highlight: { {text, hl}, … }. `title`: the first line's words.
function M.lines(plan, title)
  local steps = session.plan_steps(plan)
  if not steps then
    return { { '☰ ' .. (title or 'plan') .. ' cleared', 'DshPlanHeader' } }
  end
  local out = { { ('☰ %s · %s'):format(title or 'plan', M.progress(steps)), 'DshPlanHeader' } }
  for _, s in ipairs(steps) do
    out[#out + 1] = { ('  %s %s'):format(M.MARKS[s.status] or '?', one_line(s.title)), HL[s.status] or 'DshPlanStep' }
  end
  if type(plan.note) == 'string' and plan.note ~= '' then
    out[#out + 1] = { '  note: ' .. one_line(plan.note), 'DshNotice' }
  end
  return out
end

-- ---- :DshPlan ------------------------------------------------------------------------------------

local view -- {win, buf, chat}

local function view_lines(chat)
  local plan = chat.state.plan
  if not session.plan_steps(plan) then
    return { { 'no plan: the agent makes one with update_plan when a task has several steps', 'DshNotice' } }
  end
  return M.lines(plan, ('plan of turn %s'):format(tostring(plan.turn or '?')))
end

local function fill(buf, chat)
  local lines = view_lines(chat)
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(
    buf,
    0,
    -1,
    false,
    vim.tbl_map(function(l)
      return l[1]
    end, lines)
  )
  vim.bo[buf].modifiable = false
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  for i, l in ipairs(lines) do
    api.nvim_buf_set_extmark(buf, M.ns, i - 1, 0, { end_col = #l[1], hl_group = l[2] })
  end
  return lines
end

local function size(lines)
  local width = 30
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l[1]) + 2)
  end
  return math.min(width, math.max(20, vim.o.columns - 6)), math.max(1, math.min(#lines, vim.o.lines - 6))
end

--- :DshPlan: the chat's plan in a float (focused; q or <Esc> closes it); it follows each change.
function M.open(chat)
  if view and api.nvim_win_is_valid(view.win) then
    pcall(api.nvim_win_close, view.win, true)
  end
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  vim.b[buf].dsh_float = 'plan'
  local lines = fill(buf, chat)
  local width, height = size(lines)
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    width = width,
    height = height,
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    style = 'minimal',
    border = 'rounded',
    title = ' dsh: plan ',
    title_pos = 'center',
    footer = ' q close ',
    footer_pos = 'center',
  })
  view = { win = win, buf = buf, chat = chat }
  for _, lhs in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', lhs, function()
      pcall(api.nvim_win_close, win, true)
    end, { buffer = buf, nowait = true, desc = 'dsh: close the plan' })
  end
end

--- The chat's plan changed: the open :DshPlan view follows.
function M.changed(chat)
  if not (view and view.chat == chat and api.nvim_win_is_valid(view.win) and api.nvim_buf_is_valid(view.buf)) then
    return
  end
  local lines = fill(view.buf, chat)
  local width, height = size(lines)
  pcall(api.nvim_win_set_config, view.win, { width = width, height = height })
end

--- A rewind went back past the turns this chat saw: the daemon's fold of the whole log (the
--- attach reply's `plan`, absent when there is none) is the plan.
function M.refetch(chat)
  if not chat.id or chat.plan_fetching then
    return
  end
  chat.plan_fetching = true
  client.request(chat.root, 'dsh/session/attach', { sessionId = chat.id, replay = 'none' }, function(err, res)
    chat.plan_fetching = nil
    if err then
      return notify.warn('could not read the plan after the rewind: ' .. (err.message or ''))
    end
    if chat.state.plan_unknown then
      chat.state.plan = res.plan
      chat.state.plan_unknown = nil
      chat:render({ op = 'plan_state' })
    end
  end)
end

return M
