-- Code blocks in the transcript: jump between them (]k / [k), yank the one under the cursor, and
-- apply it to a file through the hunk review (review.lua), which writes what the person keeps into
-- the file's buffer (unsaved, one undo step). Lines the transcript continued (a soft break after a
-- very long streamed line) are joined again.
local api = vim.api
local state = require('dsh.state')
local notify = require('dsh.notify')
local review = require('dsh.review')

local M = {}
local NS_SOFT = api.nvim_create_namespace('dsh.softbreak')

---@class dsh.CodeBlock
---@field open integer the fence line (1-based)
---@field first integer first line of code
---@field last integer last line of code (first - 1 when empty)
---@field close integer? the closing fence (nil while it streams)
---@field info string the info string (language, maybe a path)

--- The fenced code blocks of `buf`, in order.
---@return dsh.CodeBlock[]
function M.blocks(buf)
  local out, open = {}, nil
  for i, line in ipairs(api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if not open then
      local fence, info = line:match('^%s*(```+)%s*(.-)%s*$')
      if not fence then
        fence, info = line:match('^%s*(~~~+)%s*(.-)%s*$')
      end
      if fence then
        open = { open = i, first = i + 1, fence = fence, info = info or '' }
      end
    else
      local fence = line:match('^%s*([`~]+)%s*$')
      if fence and fence:sub(1, 1) == open.fence:sub(1, 1) and #fence >= #open.fence then
        open.last, open.close = i - 1, i
        out[#out + 1] = open
        open = nil
      end
    end
  end
  if open then -- still streaming
    open.last = api.nvim_buf_line_count(buf)
    out[#out + 1] = open
  end
  return out
end

--- The block under `lnum` (its fences included).
function M.at(buf, lnum)
  for _, b in ipairs(M.blocks(buf)) do
    if lnum >= b.open and lnum <= (b.close or b.last) then
      return b
    end
  end
end

--- A block's code as lines, soft breaks joined.
function M.lines(buf, b)
  if b.last < b.first then
    return {}
  end
  local lines = api.nvim_buf_get_lines(buf, b.first - 1, b.last, false)
  local soft = {}
  for _, m in ipairs(api.nvim_buf_get_extmarks(buf, NS_SOFT, { b.first - 1, 0 }, { b.last - 1, -1 }, {})) do
    soft[m[2] + 1] = true
  end
  local out = {}
  local joining = false
  for i, line in ipairs(lines) do
    if joining then
      out[#out] = out[#out] .. line
    else
      out[#out + 1] = line
    end
    joining = soft[b.first + i - 1] == true
  end
  return out
end

--- ]k / [k: the first line of the next (previous) block's code.
function M.jump(dir)
  local buf = api.nvim_get_current_buf()
  local row = api.nvim_win_get_cursor(0)[1]
  local blocks = M.blocks(buf)
  local target
  if dir > 0 then
    for _, b in ipairs(blocks) do
      if b.open > row then
        target = b
        break
      end
    end
  else
    for i = #blocks, 1, -1 do
      local b = blocks[i]
      if b.open < row and not (row >= b.open and row <= (b.close or b.last)) then
        target = b
        break
      end
    end
  end
  if not target then
    return notify.notify(dir > 0 and 'no code block below' or 'no code block above')
  end
  vim.cmd("normal! m'") -- the jump list: `` comes back
  api.nvim_win_set_cursor(0, { math.min(target.first, api.nvim_buf_line_count(buf)), 0 })
end

--- Yank the block under the cursor (linewise, into the register given, default ").
function M.yank(register)
  local buf = api.nvim_get_current_buf()
  local b = M.at(buf, api.nvim_win_get_cursor(0)[1])
  if not b then
    return notify.notify('no code block under the cursor (]k goes to the next one)')
  end
  local lines = M.lines(buf, b)
  vim.fn.setreg(register or vim.v.register, lines, 'l')
  notify.notify(('yanked %d line%s%s'):format(#lines, #lines == 1 and '' or 's', b.info ~= '' and (' of ' .. b.info) or ''))
  return lines
end

--- The file a block names in its info string (```lua path/to/x.lua), if it exists under `root`.
local function named_file(root, info)
  for word in (info or ''):gmatch('%S+') do
    if word:find('[/.]') then
      local path = vim.startswith(word, '/') and word or (root .. '/' .. word)
      if vim.fn.filereadable(path) == 1 then
        return vim.fn.fnamemodify(path, ':p')
      end
    end
  end
end

--- Apply `lines` to the file at `path` through a hunk review; what is kept lands in its buffer.
function M.review_into(path, lines)
  local buf = vim.fn.bufadd(path)
  vim.fn.bufload(buf)
  local old = api.nvim_buf_get_lines(buf, 0, -1, false)
  return review.open({
    path = path,
    old_text = table.concat(old, '\n') .. '\n',
    new_text = table.concat(lines, '\n') .. '\n',
    on_decision = function(decision)
      if decision.outcome == 'reject' then
        return notify.notify('nothing applied')
      end
      local final = decision.outcome == 'accept' and lines or decision.lines
      review.write_lines(buf, final)
      notify.notify('applied to ' .. vim.fn.fnamemodify(path, ':~:.') .. ' (unsaved: :w to save)')
    end,
  })
end

--- Apply the block under the cursor to a file (the one its info string names, else the file buffer
--- the person was last in, else one they type): the hunk review opens with the block as the file's
--- new text, and the hunks they keep are written into the buffer.
function M.apply(root)
  local buf = api.nvim_get_current_buf()
  local b = M.at(buf, api.nvim_win_get_cursor(0)[1])
  if not b then
    return notify.notify('no code block under the cursor (]k goes to the next one)')
  end
  local lines = M.lines(buf, b)
  local path = named_file(root, b.info)
  if not path then
    local last = state.last_file_buf
    if last and api.nvim_buf_is_valid(last) and api.nvim_buf_get_name(last) ~= '' then
      path = api.nvim_buf_get_name(last)
    end
  end
  if path then
    return M.review_into(path, lines)
  end
  vim.ui.input({ prompt = 'dsh: apply the block to file: ', completion = 'file' }, function(answer)
    if answer and vim.trim(answer) ~= '' then
      M.review_into(vim.fn.fnamemodify(vim.trim(answer), ':p'), lines)
    end
  end)
end

return M
