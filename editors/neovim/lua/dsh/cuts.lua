-- Turns a rewind took out of the model's history (`conversation/cut {beforeTurn}`, protocol.md §15)
-- shown as cut in the transcript, wherever they are seen: live when the cut arrives, from a
-- transcript page's `cut: true` (a resumed session, a fork that copied them, an older page). Each
-- turn's first row is remembered when it starts; a cut turn's rows are dimmed (DshCut) and its
-- first row says so. The marks are in render.ns, so an older page's are carried over when it is
-- put above the transcript.
local api = vim.api

local M = {}
M.ns_turns = api.nvim_create_namespace('dsh.turnstarts')
M.LABEL = '✂ cut: not in the model\'s history (rewound)'

--- Turn `n` starts at the transcript's end: remember where.
function M.start(chat, n)
  if type(n) ~= 'number' or not api.nvim_buf_is_valid(chat.buf) then
    return
  end
  local row = api.nvim_buf_line_count(chat.buf) - 1
  local col = #(api.nvim_buf_get_lines(chat.buf, row, row + 1, false)[1] or '')
  chat.turn_starts = chat.turn_starts or {}
  -- Left gravity: what is appended to that line later stays after the mark.
  chat.turn_starts[n] = api.nvim_buf_set_extmark(chat.buf, M.ns_turns, row, col, { right_gravity = false })
end

--- The first row (0-based) of turn `n`, or nil when it is not shown.
local function first_row(chat, n)
  local id = (chat.turn_starts or {})[n]
  if not id then
    return nil
  end
  local pos = api.nvim_buf_get_extmark_by_id(chat.buf, M.ns_turns, id, {})
  if not pos[1] then
    return nil
  end
  return pos[2] > 0 and pos[1] + 1 or pos[1]
end

--- Show turn `n` as cut (once).
function M.mark(chat, n)
  chat.cut_turns = chat.cut_turns or {}
  local first = first_row(chat, n)
  if chat.cut_turns[n] or not first then
    return
  end
  local last = api.nvim_buf_line_count(chat.buf) - 1
  for other, _ in pairs(chat.turn_starts) do
    local r = other > n and first_row(chat, other)
    if r and r - 1 < last then
      last = math.max(first, r - 1)
    end
  end
  -- Skip the blank lines a turn starts with: the label goes on its first line of text.
  local lines = api.nvim_buf_get_lines(chat.buf, first, last + 1, false)
  local label_row = first
  for i, l in ipairs(lines) do
    if l ~= '' then
      label_row = first + i - 1
      break
    end
  end
  chat.cut_turns[n] = true
  -- Ends at the end of the turn's last line (not past it): text appended after it is not cut.
  api.nvim_buf_set_extmark(chat.buf, require('dsh.render').ns, first, 0, {
    end_row = last,
    end_col = #(api.nvim_buf_get_lines(chat.buf, last, last + 1, false)[1] or ''),
    hl_eol = true,
    hl_group = 'DshCut',
    priority = 300, -- over markdown's and the cards' own highlights: the whole turn reads dimmed
  })
  api.nvim_buf_set_extmark(chat.buf, require('dsh.render').ns, label_row, 0, {
    virt_text = { { '  ' .. M.LABEL .. ' · turn ' .. n, 'DshCutLabel' } },
    virt_text_pos = 'eol',
  })
end

--- A live `conversation/cut`: every turn shown from `before` on started before it, so is cut.
function M.cut_from(chat, before)
  if type(before) ~= 'number' or not api.nvim_buf_is_valid(chat.buf) then
    return
  end
  chat:flush()
  local turns = vim.tbl_keys(chat.turn_starts or {})
  table.sort(turns)
  for _, n in ipairs(turns) do
    if n >= before then
      M.mark(chat, n)
    end
  end
end

--- The turns shown as cut (tests, and the fork's check that screen and model agree).
function M.cut(chat)
  local out = vim.tbl_keys(chat.cut_turns or {})
  table.sort(out)
  return out
end

return M
