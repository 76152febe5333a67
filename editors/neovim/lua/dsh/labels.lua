-- Short texts shown to the person: paths relative to the project, first lines, context labels, how
-- a queued item was sent, a tool call's one-line summary, token counts. Pure functions.
local session = require('dsh.session')

local M = {}

--- `uri` as a path relative to `root` (else ~-relative).
function M.rel(root, uri)
  local ok, path = pcall(vim.uri_to_fname, uri or '')
  if not ok or not path or path == '' then
    return uri or '?'
  end
  if root and vim.startswith(path, root .. '/') then
    return path:sub(#root + 2)
  end
  return vim.fn.fnamemodify(path, ':~')
end

--- The first non-blank line of `text`, cut to `width` display cells with an ellipsis.
function M.first_line(text, width)
  local line = vim.trim(((text or ''):match('^%s*([^\n]*)') or ''))
  if width and vim.fn.strchars(line) > width then
    line = vim.fn.strcharpart(line, 0, width - 1) .. '…'
  end
  return line
end

--- A session title in at most `width` characters, keeping what names a fork (the daemon titles one
--- "<title> (fork)"): the words before it give way, never the suffix.
function M.title(text, width)
  local line = M.first_line(text)
  local head, suffix = line:match('^(.-)(%s*%(fork%)[%s%(fork%)]*)$')
  if not head or head == '' then
    return M.first_line(line, width)
  end
  suffix = ' ' .. vim.trim(suffix)
  local room = width - vim.fn.strchars(suffix)
  if vim.fn.strchars(line) <= width then
    return line
  end
  return M.first_line(head, math.max(2, room)) .. suffix
end

--- Where an editor context message points: `path[:lines]` (a range ending at character 0 does not
--- count the line it ends on).
function M.context_where(root, source)
  local where = M.rel(root, source.uri)
  local r = source.range
  if r and r.start and r['end'] then
    local l1, l2 = r.start.line + 1, r['end'].line + 1
    if r['end'].character == 0 and l2 > l1 then
      l2 = l2 - 1
    end
    where = where .. ':' .. (l1 == l2 and tostring(l1) or (l1 .. '-' .. l2))
  end
  return where
end

--- A one-line label for an editor context message.
function M.context_label(root, source)
  local kind = source.contextKind or 'context'
  local where = M.context_where(root, source)
  if kind == 'snapshot' then
    return 'editor snapshot (' .. where .. ')'
  end
  return kind .. ' ' .. where
end

local SHORT_KIND = { selection = 'sel', file = 'file', diagnostics = 'diag', snapshot = 'snapshot' }

--- The context a queued item carries, compactly: `+ sel app.py:10-14, file notes.md` ('' for none).
function M.context_summary(root, context)
  if type(context) ~= 'table' or #context == 0 then
    return ''
  end
  local parts = {}
  for _, m in ipairs(context) do
    local source = m.source or {}
    local kind = source.contextKind or source.kind or 'context'
    parts[#parts + 1] = (SHORT_KIND[kind] or kind) .. ' ' .. M.context_where(root, source)
  end
  return '+ ' .. table.concat(parts, ', ')
end

--- How a pending item was sent (`verb` of the inbox item; older daemons: inferred from the list).
function M.verb_of(message, target)
  if type(message.verb) == 'string' then
    return message.verb, true
  end
  local source = message.source or {}
  if target == 'next-turn' then
    return 'followup', false
  elseif source.kind == 'editor' then
    return 'context', false
  end
  return message.wakeup == true and 'steer' or 'inject', false
end

--- A one-line preview of a pending message.
function M.preview(root, message, width)
  local source = message.source or { kind = 'user' }
  local text = session.text_of(message)
  if source.kind == 'editor' then
    return '📎 ' .. M.context_label(root, source)
  end
  if type(source.review) == 'table' then -- a review's message: what was asked, not its diff (§19)
    text = session.as_typed(source)
  end
  return M.first_line(text, width or 72)
end

--- A tool call's arguments (JSON text or a table) as a table, or nil.
function M.arguments(arguments)
  if type(arguments) == 'string' then
    local ok, decoded = pcall(vim.json.decode, arguments)
    return ok and type(decoded) == 'table' and decoded or nil
  end
  return type(arguments) == 'table' and arguments or nil
end

--- What a tool call is about, in one line: its path, command, pattern…
function M.call_summary(root, arguments)
  local args = M.arguments(arguments)
  if args and type(args.steps) == 'table' and not (args.path or args.command) then -- update_plan
    return ('%d step%s'):format(#args.steps, #args.steps == 1 and '' or 's')
  end
  if args then
    local main = args.path or args.command or args.pattern or args.glob or args.query or args.description
    if type(main) == 'string' then
      if args.path and root and vim.startswith(main, root .. '/') then
        main = main:sub(#root + 2)
      end
      if args.path and type(args.symbol) == 'string' and tonumber(args.line) then
        -- definition / references / hover: which symbol, where (`helper  app.py:3`)
        main = ('%s  %s:%d'):format(args.symbol, main, tonumber(args.line))
      end
      return M.first_line(main, 80)
    end
    return M.first_line(vim.json.encode(args), 60)
  end
  return M.first_line(tostring(arguments or ''), 60)
end

function M.tokens(n)
  n = tonumber(n) or 0
  if n >= 10000 then
    return ('%.1fk'):format(n / 1000)
  end
  return tostring(n)
end

--- Added and removed lines of a unified diff.
function M.diff_counts(diff)
  local add, del = 0, 0
  for line in (diff or ''):gmatch('[^\n]+') do
    if line:match('^%+') and not line:match('^%+%+%+') then
      add = add + 1
    elseif line:match('^%-') and not line:match('^%-%-%-') then
      del = del + 1
    end
  end
  return add, del
end

return M
