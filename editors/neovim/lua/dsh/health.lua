-- :checkhealth dsh
local M = {}

local function key_source(opts)
  local io_ = opts.init_options or {}
  if io_.apiKey or (type(io_.provider) == 'table' and io_.provider.apiKey) then
    return 'setup{ init_options }'
  end
  local env = opts.cmd_env or {}
  if env.DEEPSEEK_API_KEY or vim.env.DEEPSEEK_API_KEY then
    return 'DEEPSEEK_API_KEY'
  end
  local home = env.DSH_HOME or vim.env.DSH_HOME
  if not home then
    local data = vim.env.XDG_DATA_HOME or ((vim.env.HOME or '~') .. '/.local/share')
    home = data .. '/dsh-daemon'
  end
  local path = home .. '/config.json'
  local f = io.open(path, 'r')
  if f then
    local ok, cfg = pcall(vim.json.decode, f:read('*a'))
    f:close()
    if ok and type(cfg) == 'table' and type(cfg.provider) == 'table' and cfg.provider.apiKey then
      return path
    end
  end
  return nil
end

--- What highlights the transcript and its code blocks, honestly: which languages tree-sitter
--- parses, which fall back to Vim's regex syntax (fences.lua), and how to add parsers.
function M.code_blocks(health, opts)
  local fences = require('dsh.fences')
  local ok, md = pcall(vim.treesitter.language.add, 'markdown')
  local ts = opts.treesitter and ok and md
  if ts then
    health.ok('the transcript: tree-sitter markdown; a code block in the language of a tree-sitter parser is highlighted with it')
  elseif not opts.treesitter then
    health.info('the transcript: Vim\'s markdown syntax (setup{ treesitter = false })')
  else
    health.info('the transcript: Vim\'s markdown syntax (no tree-sitter markdown parser)')
  end
  local parsers = {}
  for _, lang in ipairs({ 'python', 'javascript', 'typescript', 'bash', 'rust', 'go', 'json', 'lua', 'c', 'vim' }) do
    if ts and fences.has_parser(lang) then
      parsers[#parsers + 1] = lang
    end
  end
  if ts then
    health.info('tree-sitter parsers among common code block languages: '
      .. (#parsers > 0 and table.concat(parsers, ', ') or 'none'))
  end
  health.info("code blocks in other languages: Vim's regex syntax for the language (syntax/<lang>.vim), inside the block")
  local seen = fences.report()
  if #seen > 0 then
    local words = { treesitter = 'tree-sitter', syntax = "Vim's regex syntax", none = 'not highlighted (no syntax for it)' }
    local parts = {}
    for _, s in ipairs(seen) do
      parts[#parts + 1] = s[1] .. ': ' .. words[s[2]]
    end
    health.info('code blocks shown so far: ' .. table.concat(parts, '; '))
  end
  if ts then
    health.info("add a parser for richer highlighting: :TSInstall <lang> (nvim-treesitter), or put <lang>.so under a 'runtimepath' parser/ folder")
  end
end

function M.check()
  local health = vim.health
  local opts = require('dsh.config').options
  health.start('dsh')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. version)
  else
    health.error('Neovim ' .. version .. ': dsh needs 0.11 or later')
  end

  M.code_blocks(health, opts)

  local exe = opts.cmd and opts.cmd[1]
  if exe and vim.fn.executable(exe) == 1 then
    health.ok('daemon found: ' .. vim.fn.exepath(exe) .. (#opts.cmd > 1 and (' ' .. table.concat(opts.cmd, ' ', 2)) or ''))
    local cmd = vim.list_extend(vim.deepcopy(opts.cmd), { '--version' })
    local ok, res = pcall(function()
      return vim.system(cmd, { text = true, env = opts.cmd_env }):wait(15000)
    end)
    if ok and res.code == 0 then
      health.ok('daemon version: ' .. vim.trim(res.stdout ~= '' and res.stdout or res.stderr))
    else
      health.warn('`' .. table.concat(cmd, ' ') .. '` failed: ' .. vim.trim(ok and (res.stderr or '') or tostring(res)))
    end
  else
    health.error('daemon not found: ' .. tostring(exe), {
      'pip install dsh-daemon (or the repository: pip install -e .)',
      "or set cmd = { '/path/to/python', '-m', 'dsh_daemon' } in setup{}",
    })
  end

  local source = key_source(opts)
  if source then
    health.ok('API key set (' .. source .. ')')
  else
    health.warn('no API key found: the first turn will end with a CONFIG error', {
      'export DEEPSEEK_API_KEY=sk-...',
      'or setup{ init_options = { apiKey = ... } }, or provider.apiKey in $DSH_HOME/config.json',
    })
  end

  local running = false
  for root, entry in pairs(require('dsh.client').roots) do
    running = true
    local info = entry.info or {}
    health.info(('running for %s: %s, protocol %s, version %s'):format(
      root,
      entry.ready and 'initialized' or 'starting',
      tostring(info.protocolVersion or '?'),
      tostring(info.version or '?')
    ))
  end
  if not running then
    health.info('no daemon running in this Neovim yet (:Dsh starts one)')
  end
  if exe and vim.fn.executable(exe) == 1 then
    require('dsh.sandbox').check(health, opts)
  end
end

return M
