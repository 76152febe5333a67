-- Completing in the chat input: typed context (`#buffer`, `#selection`, `@path`: files of the
-- project) and, at the start of the input, the custom commands of the session (`/name`, protocol.md
-- §18, `dsh/commands/list`; the line is sent as typed and the daemon expands it). One list, three
-- front ends: the input's 'omnifunc' (<C-x><C-o>, and as the person types `#`, `@` or a leading `/`
-- with `complete_on_type`), an nvim-cmp source (registered as "dsh" when nvim-cmp is there) and a
-- blink.cmp source (module `dsh.blink`).
local api = vim.api

local M = {}

M.WORDS = {
  { word = '#buffer', info = 'the file buffer you were last in, as context' },
  { word = '#selection', info = 'your last visual selection in that buffer, as context' },
}
vim.list_extend(M.WORDS, require('dsh.contextwords').WORDS)

--- The word being typed before the cursor: its start (0-based byte column) and text, when it is a
--- `#word` or `@path` at the start of the line or after a space, or a `/name` that opens the input
--- (`row`, 1-based, is 1; leading whitespace aside; `//` is the escape and is not completed).
function M.word_before(line, col, row)
  local before = line:sub(1, col)
  if row == nil or row == 1 then
    local lead, slash = before:match('^(%s*)(/[%w%._%-]*)$')
    if slash then
      return #lead, slash
    end
  end
  local start, word = before:match('()([#@][%w%._/%-~]*)$')
  if not start or (start > 1 and not before:sub(start - 1, start - 1):match('%s')) then
    return nil
  end
  return start - 1, word
end

local function project_files(root, prefix)
  local out = {}
  local dir = prefix:match('^(.*/)') or ''
  local full = root .. '/' .. prefix
  for _, path in ipairs(vim.fn.getcompletion(full, 'file', true)) do
    local rel = path:sub(#root + 2)
    if rel ~= '' and not rel:match('^%.git/?$') then
      out[#out + 1] = rel
    end
    if #out >= 200 then
      break
    end
  end
  if #out == 0 and dir == '' then
    -- Nothing at the top level by that name: files deeper down whose name starts with it.
    for name in vim.fs.dir(root, { depth = 4 }) do
      if vim.fs.basename(name):sub(1, #prefix) == prefix and not name:match('^%.git/') then
        out[#out + 1] = name
      end
      if #out >= 200 then
        break
      end
    end
  end
  return out
end

-- ---- custom commands (`/name`) -------------------------------------------------------------------

--- The `dsh/commands/list` params for the input `buf`: its chat's session, else the project folder.
local function list_params(buf, root)
  for _, chat in pairs(require('dsh.state').chats) do
    if chat.input == buf and chat.id then
      return { sessionId = chat.id }
    end
  end
  return { cwd = root }
end

--- Completion items of a `dsh/commands/list` result for `word` (`/…`).
function M.command_items(result, word)
  local out = {}
  for _, c in ipairs(type(result) == 'table' and result.commands or {}) do
    local name = '/' .. tostring(c.name)
    if vim.startswith(name, word) then
      local hint = type(c.argumentHint) == 'string' and c.argumentHint ~= '' and (' ' .. c.argumentHint) or ''
      local info = { (c.description and c.description ~= '') and c.description or '(no description)' }
      info[#info + 1] = ('%s command%s'):format(c.source == 'project' and "the project's" or 'your', hint ~= '' and (': ' .. name .. hint) or '')
      if type(c.allowedTools) == 'table' and #c.allowedTools > 0 then
        info[#info + 1] = 'allows only: ' .. table.concat(c.allowedTools, ', ')
      end
      out[#out + 1] = {
        word = name,
        abbr = name .. hint,
        menu = (c.description and c.description ~= '') and c.description or ('[' .. tostring(c.source) .. ']'),
        info = table.concat(info, '\n'),
        kind = c.source == 'project' and 'project' or 'user',
      }
    end
  end
  return out
end

--- The custom commands of the input `buf` (whose project is `root`) matching `word`: with `cb`,
--- asked asynchronously (the daemon started if need be); without, synchronously and only from a
--- running daemon that offers them (<C-x><C-o> waits at most 2 s).
function M.commands(buf, root, word, cb)
  local client = require('dsh.client')
  local params = list_params(buf, root)
  local own = {} -- the plugin's own `/` words (contextwords.lua) come first
  for _, w in ipairs(require('dsh.contextwords').SLASH) do
    if vim.startswith(w.word, word) then
      own[#own + 1] = { word = w.word, abbr = w.word, menu = '[dsh]', info = w.info, kind = 'editor' }
    end
  end
  if cb then
    return client.request(root, 'dsh/commands/list', params, function(err, res)
      cb(vim.list_extend(own, err and {} or M.command_items(res, word)))
    end)
  end
  local entry = client.roots[root]
  if not (entry and entry.client and entry.ready and (entry.info or {}).customCommands) then
    return own
  end
  local res = entry.client:request_sync('dsh/commands/list', params, 2000)
  if not (res and res.result) then
    return own
  end
  return vim.list_extend(own, M.command_items(res.result, word))
end

--- Completion items for `word` (`#…` or `@…`): {word, menu, info}.
function M.items(root, word)
  local out = {}
  if word:sub(1, 1) == '#' then
    for _, w in ipairs(M.WORDS) do
      if vim.startswith(w.word, word) then
        out[#out + 1] = { word = w.word, menu = '[dsh]', info = w.info }
      end
    end
  else
    for _, rel in ipairs(project_files(root, word:sub(2))) do
      out[#out + 1] = { word = '@' .. rel, menu = rel:sub(-1) == '/' and '[dir]' or '[file]' }
    end
  end
  return out
end

local function root_of(buf)
  return vim.b[buf].dsh_root or vim.fn.getcwd()
end

--- 'omnifunc' of the chat input.
function M.omnifunc(findstart, base)
  local buf = api.nvim_get_current_buf()
  if findstart == 1 then
    local cursor = api.nvim_win_get_cursor(0)
    local start = M.word_before(api.nvim_get_current_line(), cursor[2], cursor[1])
    return start or -3 -- -3: cancel silently
  end
  if base:sub(1, 1) == '/' then
    return M.commands(buf, root_of(buf), base)
  end
  return M.items(root_of(buf), base)
end

--- Set up an input buffer: the omnifunc, and completion as `#` / `@` are typed.
function M.attach(buf, on_type)
  vim.bo[buf].omnifunc = "v:lua.require'dsh.complete'.omnifunc"
  if on_type then
    api.nvim_create_autocmd('InsertCharPre', {
      buffer = buf,
      callback = function()
        local ch = vim.v.char
        local cursor = api.nvim_win_get_cursor(0)
        local before = api.nvim_get_current_line():sub(1, cursor[2])
        if ch == '/' and cursor[1] == 1 and before:match('^%s*$') and vim.fn.pumvisible() == 0 then
          -- A custom command opens the input: ask the daemon (started if need be), then complete.
          local root = root_of(buf)
          M.commands(buf, root, '/', function(items)
            if #items > 0 and api.nvim_get_current_buf() == buf and api.nvim_get_mode().mode == 'i' then
              api.nvim_feedkeys(vim.keycode('<C-x><C-o>'), 'n', false)
            end
          end)
        elseif (ch == '#' or ch == '@') and vim.fn.pumvisible() == 0 then
          if before == '' or before:match('%s$') then
            vim.schedule(function()
              if api.nvim_get_current_buf() == buf and api.nvim_get_mode().mode == 'i' then
                api.nvim_feedkeys(vim.keycode('<C-x><C-o>'), 'n', false)
              end
            end)
          end
        end
      end,
    })
  end
  local ok, cmp = pcall(require, 'cmp')
  if ok and type(cmp) == 'table' and cmp.setup and cmp.setup.buffer then
    M.register_cmp(cmp)
    local sources = { { name = 'dsh' } }
    local config = cmp.get_config and cmp.get_config() or {}
    for _, s in ipairs(config.sources or {}) do
      sources[#sources + 1] = s
    end
    api.nvim_buf_call(buf, function()
      cmp.setup.buffer({ sources = sources })
    end)
  end
end

-- ---- nvim-cmp ------------------------------------------------------------------------------------

local registered = false

--- The nvim-cmp source (`{ name = 'dsh' }`, on in the chat input).
function M.cmp_source()
  local source = {}
  function source:is_available()
    return vim.b.dsh_kind == 'input'
  end
  function source:get_trigger_characters()
    return { '#', '@', '/' }
  end
  function source:get_keyword_pattern()
    return [=[[#@/][[:alnum:]._/~-]*]=]
  end
  function source:complete(params, callback)
    local line = params.context.cursor_before_line
    local start, word = M.word_before(line, #line, params.context.cursor.row)
    if not start then
      return callback({ items = {}, isIncomplete = false })
    end
    if word:sub(1, 1) == '/' then
      return M.commands(params.context.bufnr, root_of(params.context.bufnr), word, function(found)
        callback({
          items = vim.tbl_map(function(it)
            return { label = it.word, detail = it.info, labelDetails = { description = it.menu }, kind = 14 }
          end, found),
          isIncomplete = false,
        })
      end)
    end
    local items = {}
    for _, it in ipairs(M.items(root_of(params.context.bufnr), word)) do
      items[#items + 1] = {
        label = it.word,
        detail = it.info,
        kind = it.word:sub(1, 1) == '@' and 17 or 14, -- File, Keyword
      }
    end
    callback({ items = items, isIncomplete = word:sub(1, 1) == '@' })
  end
  return source
end

function M.register_cmp(cmp)
  if not registered then
    registered = true
    cmp.register_source('dsh', M.cmp_source())
  end
end

return M
