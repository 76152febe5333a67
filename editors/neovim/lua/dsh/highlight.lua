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
end

--- Start tree-sitter markdown highlighting in `buf`; true when it runs (false: the parser is
--- missing or `treesitter = false`, and the buffer keeps Vim's markdown syntax).
function M.treesitter(buf, enabled)
  if not enabled then
    return false
  end
  local ok = pcall(vim.treesitter.start, buf, 'markdown')
  return ok and vim.treesitter.highlighter.active[buf] ~= nil
end

return M
