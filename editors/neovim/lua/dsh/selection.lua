-- The exact visual selection (charwise, linewise, blockwise) as an LSP range in UTF-16 units, plus
-- its text. Works from a visual-mode mapping (live selection) and from a command range ('< '>).
local api = vim.api

local M = {}

local function utf16(line, byte)
  byte = math.max(0, math.min(byte, #line))
  return vim.str_utfindex(line, 'utf-16', byte, false)
end
M.utf16 = utf16

local function getline(buf, lnum)
  return api.nvim_buf_get_lines(buf, lnum - 1, lnum, false)[1] or ''
end

---@class dsh.Selection
---@field buf integer
---@field uri string
---@field mode 'v'|'V'|'\22'
---@field range lsp.Range
---@field text string exactly the selected text
---@field first integer first line (1-based)
---@field last integer last line (1-based)
---@field label string
---@field language string

--- Compute a selection from two positions (getpos() lists) in `mode`.
---@param eol boolean the end was extended to the end of the line (`$`)
function M.from_positions(buf, mode, p1, p2, eol)
  if p1[2] > p2[2] or (p1[2] == p2[2] and p1[3] > p2[3]) then
    p1, p2 = p2, p1
  end
  local region = vim.fn.getregionpos(p1, p2, { type = mode, exclusive = false, eol = true })
  if #region == 0 then
    return nil
  end
  local first, last = region[1][1][2], region[#region][1][2]
  local range, text
  if mode == 'V' then
    local lines = api.nvim_buf_get_lines(buf, first - 1, last, false)
    range = { start = { line = first - 1, character = 0 }, ['end'] = { line = last, character = 0 } }
    text = table.concat(lines, '\n') .. '\n'
  elseif mode == 'v' then
    local l1 = getline(buf, first)
    local s = region[1][1][3]
    local seg = region[#region]
    local l2 = getline(buf, last)
    local e = seg[2][3] -- 1-based byte of the last selected byte (inclusive)
    local start = { line = first - 1, character = utf16(l1, s - 1) }
    local finish
    if eol or e > #l2 then
      finish = { line = last, character = 0 } -- the line break is selected too
    else
      finish = { line = last - 1, character = utf16(l2, e) }
    end
    range = { start = start, ['end'] = finish }
    local parts = {}
    for _, r in ipairs(region) do
      local line = getline(buf, r[1][2])
      local a, b = r[1][3], r[2][3]
      local piece = line:sub(a, math.min(b, #line))
      if b > #line or (eol and r == seg) then
        piece = piece .. '\n'
      end
      parts[#parts + 1] = piece
    end
    text = table.concat(parts)
  else -- blockwise
    local parts = {}
    local smin, emax = math.huge, 0
    local sfirst, elast
    for i, r in ipairs(region) do
      local line = getline(buf, r[1][2])
      local a, b = r[1][3], r[2][3]
      if eol then
        b = #line
      end
      parts[#parts + 1] = a <= #line and line:sub(a, math.min(b, #line)) or ''
      if i == 1 then
        sfirst = utf16(line, a - 1)
      end
      if i == #region then
        elast = utf16(line, math.min(b, #line))
      end
      smin, emax = math.min(smin, a), math.max(emax, b)
    end
    range = { start = { line = first - 1, character = sfirst }, ['end'] = { line = last - 1, character = elast } }
    text = table.concat(parts, '\n')
  end
  local name = api.nvim_buf_get_name(buf)
  local uri = name ~= '' and vim.uri_from_bufnr(buf) or ('untitled:' .. buf)
  local where = name ~= '' and vim.fn.fnamemodify(name, ':~:.') or ('[buffer ' .. buf .. ']')
  local kinds = { v = 'selection', V = 'lines', ['\22'] = 'block' }
  return {
    buf = buf,
    uri = uri,
    mode = mode,
    range = range,
    text = text,
    first = first,
    last = last,
    language = vim.bo[buf].filetype,
    label = ('%s %s:%s'):format(kinds[mode] or 'selection', where, first == last and first or (first .. '-' .. last)),
  }
end

--- The current selection: the live one in visual mode (which is then ended), else the last one.
function M.current()
  local buf = api.nvim_get_current_buf()
  local mode = vim.fn.mode()
  if mode == 'v' or mode == 'V' or mode == '\22' then
    local p1, p2 = vim.fn.getpos('v'), vim.fn.getpos('.')
    local eol = vim.fn.getcurpos()[5] == vim.v.maxcol
    vim.cmd('normal! ' .. vim.keycode('<Esc>'))
    return M.from_positions(buf, mode, p1, p2, eol)
  end
  return M.last(buf)
end

--- The last visual selection of `buf` (from the '< and '> marks).
function M.last(buf)
  buf = buf or api.nvim_get_current_buf()
  local mode = vim.fn.visualmode()
  if mode == '' then
    return nil
  end
  local p1, p2 = vim.fn.getpos("'<"), vim.fn.getpos("'>")
  if p1[2] == 0 or p2[2] == 0 then
    return nil
  end
  local eol = p2[3] >= vim.v.maxcol
  return M.from_positions(buf, mode, p1, p2, eol)
end

--- The last visual selection made in `buf` (its '< and '> marks), from any window.
function M.last_in(buf)
  if not api.nvim_buf_is_loaded(buf) then
    return nil
  end
  local mode = api.nvim_buf_call(buf, vim.fn.visualmode) -- (kept per buffer)
  if mode == '' then
    return nil
  end
  local s, e = api.nvim_buf_get_mark(buf, '<'), api.nvim_buf_get_mark(buf, '>')
  if s[1] == 0 or e[1] == 0 then
    return nil
  end
  local eol = e[2] >= vim.v.maxcol - 1
  local last_len = #getline(buf, e[1])
  local p1 = { buf, s[1], s[2] + 1, 0 }
  local p2 = { buf, e[1], math.min(e[2] + 1, math.max(1, last_len)), 0 }
  return M.from_positions(buf, mode, p1, p2, eol)
end

--- The selection as an editor message the client builds itself (used for blocks, which an LSP range
--- cannot describe, and for buffers without a file).
function M.message(sel)
  local fence = '```'
  while sel.text:find(fence, 1, true) do
    fence = fence .. '`'
  end
  local name = api.nvim_buf_get_name(sel.buf)
  local where = name ~= '' and name or ('[buffer ' .. sel.buf .. ']')
  local state = (vim.bo[sel.buf].modified or name == '') and ' (unsaved editor buffer)' or ''
  local what = sel.mode == '\22' and 'Block selection' or 'Selection'
  local cols = ''
  if sel.mode == '\22' then
    cols = (', columns %d-%d'):format(sel.range.start.character + 1, sel.range['end'].character)
  end
  local body = ('%s in %s%s, lines %d-%d%s:\n%s%s\n%s%s'):format(
    what,
    where,
    state,
    sel.first,
    sel.last,
    cols,
    fence,
    sel.language or '',
    sel.text,
    sel.text:sub(-1) == '\n' and fence or ('\n' .. fence)
  )
  local source = { kind = 'editor', uri = sel.uri, contextKind = 'selection', range = sel.range }
  if sel.language and sel.language ~= '' then
    source.languageId = sel.language
  end
  return { content = body, source = source }
end

return M
