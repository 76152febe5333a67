-- A blink.cmp source for the chat input's typed context (#buffer, #selection, @path). In blink's
-- setup: sources.providers.dsh = { name = 'dsh', module = 'dsh.blink' }, and 'dsh' in the sources
-- of the markdown filetype (the input's) or in sources.default: it only answers in the chat input.
local complete = require('dsh.complete')

local Source = {}
Source.__index = Source

function Source.new(opts)
  return setmetatable({ opts = opts or {} }, Source)
end

function Source:enabled()
  return vim.b.dsh_kind == 'input'
end

function Source:get_trigger_characters()
  return { '#', '@', '/' }
end

function Source:get_completions(ctx, callback)
  local line = ctx.line or ''
  local col = ctx.cursor and ctx.cursor[2] or #line
  local row1 = ctx.cursor and ctx.cursor[1] or 1
  local start, word = complete.word_before(line, col, row1)
  local items = {}
  if start and word:sub(1, 1) == '/' then
    local bufnr = ctx.bufnr or vim.api.nvim_get_current_buf()
    complete.commands(bufnr, vim.b[bufnr].dsh_root or vim.fn.getcwd(), word, function(found)
      for _, it in ipairs(found) do
        items[#items + 1] = {
          label = it.word,
          filterText = it.word,
          kind = 14, -- Keyword
          detail = it.info,
          labelDetails = { description = it.menu },
          textEdit = {
            newText = it.word,
            range = { start = { line = row1 - 1, character = start }, ['end'] = { line = row1 - 1, character = col } },
          },
        }
      end
      callback({ items = items, is_incomplete_forward = false, is_incomplete_backward = true })
    end)
    return function() end
  end
  if start then
    local row = (ctx.cursor and ctx.cursor[1] or 1) - 1
    for _, it in ipairs(complete.items(vim.b[ctx.bufnr or 0].dsh_root or vim.fn.getcwd(), word)) do
      items[#items + 1] = {
        label = it.word,
        filterText = it.word,
        kind = it.word:sub(1, 1) == '@' and 17 or 14, -- File, Keyword
        detail = it.info,
        textEdit = {
          newText = it.word,
          range = { start = { line = row, character = start }, ['end'] = { line = row, character = col } },
        },
      }
    end
  end
  callback({ items = items, is_incomplete_forward = word ~= nil and word:sub(1, 1) == '@', is_incomplete_backward = true })
  return function() end
end

return Source
