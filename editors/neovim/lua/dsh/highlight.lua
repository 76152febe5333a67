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

--- Start tree-sitter markdown highlighting in `buf`; true when it runs (false: the parser is
--- missing or `treesitter = false`, and the buffer keeps Vim's markdown syntax).
function M.treesitter(buf, enabled)
  if not enabled then
    return false
  end
  local ok = pcall(function()
    local parser = vim.treesitter.get_parser(buf, 'markdown', { injections = { markdown = CODE_BLOCKS } })
    vim.treesitter.highlighter.new(parser, { queries = { markdown = M.markdown_query() } })
  end)
  if ok and vim.treesitter.highlighter.active[buf] ~= nil then
    vim.bo[buf].syntax = 'markdown'
    return true
  end
  return false
end

--- While a reply streams, tree-sitter stops re-parsing the transcript at every redraw (a growing
--- paragraph is parsed again each time): its highlighter is set aside — its parser still follows
--- every change — and put back `resume_ms` after the last streamed text, when the block is done.
--- Vim's markdown syntax highlights meanwhile.
function M.pause(buf)
  local active = vim.treesitter.highlighter.active
  local hl = active[buf]
  if hl then
    M.paused = M.paused or {}
    M.paused[buf] = hl
    active[buf] = nil
  end
end

function M.resume(buf)
  local hl = M.paused and M.paused[buf]
  if hl then
    M.paused[buf] = nil
    if vim.api.nvim_buf_is_valid(buf) then
      vim.treesitter.highlighter.active[buf] = hl
      vim.api.nvim__redraw({ buf = buf, valid = false })
    end
  end
end

return M
