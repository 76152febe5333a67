-- Highlight groups (linked by default, so a colour scheme can set them) and the transcript's
-- syntax: tree-sitter markdown with its code blocks in their own languages when Neovim has the
-- parser (0.11 ships markdown, markdown_inline, lua, vim, vimdoc, query, c), else Vim's syntax.
local api = vim.api

local M = {}

function M.define()
  local function link(name, to)
    api.nvim_set_hl(0, name, { link = to, default = true })
  end
  link('DshReasoning', 'Comment')
  link('DshToolCard', 'Special')
  link('DshToolRunning', 'DiagnosticWarn')
  link('DshToolOk', 'DiagnosticOk')
  link('DshToolError', 'DiagnosticError')
  link('DshFooter', 'NonText')
  link('DshFooterError', 'DiagnosticError')
  link('DshContext', 'Directory')
  link('DshNotice', 'Comment')
  link('DshQueue', 'Comment')
  link('DshQueueLabel', 'DiagnosticHint')
  link('DshError', 'DiagnosticError')
  link('DshEditFlash', 'DiffText')
  link('DshSoftBreak', 'NonText')
  link('DshChoice', 'Title')
  link('DshChoiceKey', 'Special')
  link('DshPermission', 'DiagnosticWarn')
  link('DshKey', 'Special')
  link('DshAccepted', 'DiagnosticOk')
  link('DshRejected', 'DiagnosticError')
  link('DshPlanHeader', 'Title')
  link('DshPlanStep', 'Normal')
  link('DshPlanActive', 'DiagnosticInfo')
  link('DshPlanDone', 'Comment')
  link('DshSandbox', 'StatusLine')
  link('DshSandboxWarn', 'DiagnosticWarn')
  link('DshCut', 'Comment')
  link('DshInlineDelete', 'DiffDelete')
  link('DshInlineAdd', 'DiffAdd')
  link('DshInlineGone', 'Comment')
  link('DshCutLabel', 'DiagnosticWarn')
end

-- Only code blocks are injected (in their own language): markdown's inline injection re-parses a
-- whole paragraph on every change, which a streaming transcript cannot afford; Vim's markdown
-- syntax, kept on beside tree-sitter, still shows emphasis and inline code.
local CODE_BLOCKS = [[
(fenced_code_block
  (info_string (language) @injection.language)
  (code_fence_content) @injection.content)
]]

--- Neovim's markdown highlights without the one that colours a whole fenced block as raw text: the
--- code inside is coloured by its language (an injected parser, else Vim's regex syntax for it,
--- fences.lua), which that capture would paint over.
function M.markdown_query()
  if not M.query_text then
    local parts = {}
    for _, file in ipairs(vim.treesitter.query.get_files('markdown', 'highlights')) do
      parts[#parts + 1] = table.concat(vim.fn.readfile(file), '\n')
    end
    local text = table.concat(parts, '\n')
    M.query_text = text:gsub('%(%(fenced_code_block%)%s*@markup%.raw%.block%s*%(#set! priority %d+%)%)', '')
  end
  return M.query_text
end

-- ---- tree-sitter markdown, painted once per finished region -------------------------------------
--
-- Neovim's tree-sitter highlighter would keep one markdown parser over the whole transcript and parse
-- it again after every change: tree-sitter-markdown reuses little of the old tree, so appending a line
-- to a 30,000-line transcript costs a 25-150 ms parse, and Neovim runs the "async" parse's slices back
-- to back (each `vim.schedule`d slice runs in the same drain of the event queue), so the keys typed
-- meanwhile wait. Instead each finished part of the transcript is parsed once, on its own, as a
-- string, and its captures become extmarks in `M.ns_md`: they move with the text and are never
-- parsed again. The streamed segment still being written is left to Vim's markdown syntax (on beside
-- them, it also shows emphasis and inline code) until it ends.

M.ns_md = api.nvim_create_namespace('dsh.markdown')

--- Rows painted per step; a larger dirty range (a transcript page) is painted over several steps
--- with the event loop (and the keys typed) between them.
M.STEP_ROWS = 200

--- Whether tree-sitter markdown can highlight `buf` (false: the parser is missing or
--- `treesitter = false`; Vim's markdown syntax is all). The buffer keeps Vim's markdown syntax.
function M.treesitter(buf, enabled)
  vim.bo[buf].syntax = 'markdown'
  if not enabled then
    return false
  end
  local ok = pcall(function()
    vim.treesitter.get_string_parser('', 'markdown'):parse()
    vim.treesitter.query.parse('markdown', M.markdown_query())
  end)
  return ok
end

local queries = {} -- lang -> vim.treesitter.Query | false
local function query_for(lang)
  if queries[lang] == nil then
    local ok, q
    if lang == 'markdown' then
      ok, q = pcall(vim.treesitter.query.parse, 'markdown', M.markdown_query())
    else
      ok, q = pcall(vim.treesitter.query.get, lang, 'highlights')
    end
    queries[lang] = ok and q or false
  end
  return queries[lang]
end

local hl_ids = {}
local function hl_id(name)
  local id = hl_ids[name]
  if not id then
    id = api.nvim_get_hl_id_by_name(name)
    hl_ids[name] = id
  end
  return id
end

local PRIORITY = (vim.hl or vim.highlight).priorities.treesitter

--- Parse rows [srow, erow) of `buf` as markdown (code blocks in their own language when there is a
--- parser) and put its highlights there as extmarks, replacing what was painted in those rows.
--- The rows must start at the top level of the document (not inside a code block).
function M.paint(buf, srow, erow)
  if erow <= srow or not api.nvim_buf_is_valid(buf) then
    return
  end
  local text = table.concat(api.nvim_buf_get_lines(buf, srow, erow, false), '\n') .. '\n'
  local ok, parser = pcall(vim.treesitter.get_string_parser, text, 'markdown', { injections = { markdown = CODE_BLOCKS } })
  if not ok then
    return
  end
  parser:parse(true)
  api.nvim_buf_clear_namespace(buf, M.ns_md, srow, erow)
  parser:for_each_tree(function(tree, ltree)
    local lang = ltree:lang()
    local q = query_for(lang)
    if not q then
      return
    end
    for id, node, metadata in q:iter_captures(tree:root(), text) do
      local name = q.captures[id]
      if name:sub(1, 1) ~= '_' and name ~= 'spell' and name ~= 'nospell' and name ~= 'conceal' then
        local r = vim.treesitter.get_range(node, text, metadata[id])
        local meta_pri = metadata.priority or (metadata[id] and metadata[id].priority)
        pcall(api.nvim_buf_set_extmark, buf, M.ns_md, srow + r[1], r[2], {
          end_row = srow + r[4],
          end_col = r[5],
          hl_group = hl_id('@' .. name .. '.' .. lang),
          priority = tonumber(meta_pri) or PRIORITY,
          strict = false,
        })
      end
    end
  end)
end

--- A row at or below `row`, within `limit` rows, where a paint step may stop: a `## You` / `## dsh`
--- heading (the top level of the document); nil when there is none.
local function step_end(buf, row, limit)
  local lines = api.nvim_buf_get_lines(buf, row, limit, false)
  for i = #lines, 1, -1 do
    local l = lines[i]
    if (l == '## You' or l == '## dsh') and i > 1 then
      return row + i - 1
    end
  end
end

--- The rows of `chat`'s transcript that are finished and not painted yet: [chat.painted, upto).
--- A segment still streaming (from `chat.seg_row`) and the last line (it may still grow) wait.
local function dirty(chat)
  local n = api.nvim_buf_line_count(chat.buf)
  local upto = n - 1
  if chat.seg and chat.seg_row then
    upto = math.min(upto, chat.seg_row)
  end
  return math.min(chat.painted or 0, upto), upto
end

--- Paint what is finished, a step at a time, from a timer (so that input is read between steps).
function M.later(chat)
  if not chat.treesitter or chat.paint_armed then
    return
  end
  chat.paint_armed = true
  chat.paint_timer = chat.paint_timer or vim.uv.new_timer()
  chat.paint_timer:start(0, 0, function()
    vim.schedule(function()
      chat.paint_armed = false
      if not api.nvim_buf_is_valid(chat.buf) then
        return
      end
      local from, upto = dirty(chat)
      if upto <= from then
        return
      end
      local stop = upto
      if upto - from > M.STEP_ROWS then
        stop = step_end(chat.buf, from + 1, from + M.STEP_ROWS) or upto
      end
      M.paint(chat.buf, from, stop)
      chat.painted = stop
      if stop < upto then
        M.later(chat)
      end
    end)
  end)
end

--- Rows from `row` on changed in place (a plan or subagent block rewritten): painted again.
function M.dirty(chat, row)
  if chat.painted and row < chat.painted then
    chat.painted = math.max(0, row)
  end
end

--- Paint everything finished now (tests, and a transcript that must be right at once).
function M.paint_now(chat)
  if not chat.treesitter then
    return
  end
  local from, upto = dirty(chat)
  M.paint(chat.buf, from, upto)
  chat.painted = math.max(from, upto)
end

return M
