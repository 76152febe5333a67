-- Code blocks in a language tree-sitter has no parser for (Neovim 0.11 ships c, lua, markdown,
-- markdown_inline, query, vim, vimdoc; others come from nvim-treesitter or a parser on 'rtp') are
-- highlighted with Vim's regex syntax for that language instead: the fence's language is included
-- into the transcript's markdown syntax as a cluster (`syntax include`), in a region from that
-- fence to its end. Lines are scanned once, as they are written. `M.report` says, for
-- :checkhealth, which languages got which.
local api = vim.api

local M = {}
-- language -> 'treesitter' | 'syntax' | 'none', for every fence language seen (all buffers)
M.seen = {}

-- Fence tags that are not a filetype's own name.
local ALIASES = {
  py = 'python',
  js = 'javascript',
  ts = 'typescript',
  sh = 'bash',
  shell = 'bash',
  zsh = 'zsh',
  console = 'bash',
  rb = 'ruby',
  rs = 'rust',
  yml = 'yaml',
  md = 'markdown',
  ['c++'] = 'cpp',
  golang = 'go',
  jsonc = 'json',
  hs = 'haskell',
  kt = 'kotlin',
  ex = 'elixir',
  tf = 'terraform',
}

--- The filetype a fence tag names, or nil.
function M.filetype(tag)
  tag = tag:lower()
  if ALIASES[tag] then
    return ALIASES[tag]
  end
  if #api.nvim_get_runtime_file('syntax/' .. tag .. '.vim', false) > 0 then
    return tag
  end
  return vim.filetype.match({ filename = 'x.' .. tag })
end

--- Whether tree-sitter can parse `ft` here.
function M.has_parser(ft)
  local lang = vim.treesitter.language.get_lang(ft) or ft
  local ok, added = pcall(vim.treesitter.language.add, lang)
  return ok and added == true
end

--- Include `ft`'s regex syntax for fences tagged `tag` in `buf` (once per buffer and tag).
local function include(buf, tag, ft)
  local done = vim.b[buf].dsh_fence_syntax or {}
  if done[tag] ~= nil then
    return done[tag]
  end
  local has_file = #api.nvim_get_runtime_file('syntax/' .. ft .. '.vim', false) > 0
  local ok = false
  if has_file then
    ok = pcall(api.nvim_buf_call, buf, function()
      local cluster = '@dshFence_' .. ft:gsub('%W', '_')
      local current = vim.b.current_syntax
      vim.b.current_syntax = nil
      vim.cmd(('silent! syntax include %s syntax/%s.vim'):format(cluster, ft))
      vim.b.current_syntax = current
      vim.cmd(
        ([[syntax region dshFence_%s matchgroup=markdownCodeDelimiter start=/^\s*```\s*%s\>.*$/ end=/^\s*```\s*$/ keepend contains=%s]]):format(
          tag:gsub('%W', '_'),
          vim.fn.escape(tag, [[/\.*$^~[]]),
          cluster
        )
      )
    end)
  end
  done[tag] = ok
  vim.b[buf].dsh_fence_syntax = done
  return ok
end

--- Look at the transcript lines written since the last call: a fence in a language without a
--- parser gets the regex syntax (`ts`: tree-sitter highlights the buffer; else every language
--- goes through Vim's syntax).
function M.scan(chat, ts)
  local n = api.nvim_buf_line_count(chat.buf)
  local from = math.min(chat.fence_row or 0, n)
  -- The last line may still grow: it is looked at again next time.
  M.scan_range(chat, from, n - 1, ts)
  chat.fence_row = math.max(from, n - 1)
end

--- The same for rows [first, last) (0-based): an older page put above the transcript.
function M.scan_range(chat, first, last, ts)
  local buf = chat.buf
  if last <= first then
    return
  end
  for _, line in ipairs(api.nvim_buf_get_lines(buf, first, last, false)) do
    local tag = line:match('^%s*```+%s*([%w%+%-_#%.]+)')
    if tag then
      local ft = M.filetype(tag)
      if ft then
        local parser = ts and M.has_parser(ft)
        local how = parser and 'treesitter' or (include(buf, tag, ft) and 'syntax' or 'none')
        M.seen[tag] = how
      else
        M.seen[tag] = 'none'
      end
    end
  end
end

--- For :checkhealth: {tag, how} of each fence language seen, sorted.
function M.report()
  local out = {}
  for tag, how in pairs(M.seen) do
    out[#out + 1] = { tag, how }
  end
  table.sort(out, function(a, b)
    return a[1] < b[1]
  end)
  return out
end

return M
