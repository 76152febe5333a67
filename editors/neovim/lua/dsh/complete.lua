-- Completing typed context in the chat input: `#buffer`, `#selection` and `@path` (files of the
-- project). One list, three front ends: the input's 'omnifunc' (<C-x><C-o>, and as the person types
-- `#` or `@` with `complete_on_type`), an nvim-cmp source (registered as "dsh" when nvim-cmp is
-- there) and a blink.cmp source (module `dsh.blink`).
local api = vim.api

local M = {}

M.WORDS = {
  { word = '#buffer', info = 'the file buffer you were last in, as context' },
  { word = '#selection', info = 'your last visual selection in that buffer, as context' },
}

--- The word being typed before the cursor: its start (0-based byte column) and text, when it is a
--- `#word` or `@path` at the start of the line or after a space.
function M.word_before(line, col)
  local before = line:sub(1, col)
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
    local col = api.nvim_win_get_cursor(0)[2]
    local start = M.word_before(api.nvim_get_current_line(), col)
    return start or -3 -- -3: cancel silently
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
        if (ch == '#' or ch == '@') and vim.fn.pumvisible() == 0 then
          local col = api.nvim_win_get_cursor(0)[2]
          local before = api.nvim_get_current_line():sub(1, col)
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
    return { '#', '@' }
  end
  function source:get_keyword_pattern()
    return [=[[#@][[:alnum:]._/~-]*]=]
  end
  function source:complete(params, callback)
    local line = params.context.cursor_before_line
    local start, word = M.word_before(line, #line)
    if not start then
      return callback({ items = {}, isIncomplete = false })
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
