-- dsh.nvim: defines the :Dsh… commands and <Plug>(dsh-…) mappings at startup; the plugin loads when
-- one is first used, so setup() is optional (require('dsh').setup{…} to change the options).
if vim.g.loaded_dsh == 1 or vim.fn.has('nvim-0.11') == 0 then
  return
end
vim.g.loaded_dsh = 1
require('dsh.spec').define()
-- The default keys after the person's config has run (so their own mappings win, and setup{keys}
-- is known): only then, and only on keys nothing else uses.
vim.schedule(function()
  if not vim.g.dsh_did_setup then
    require('dsh.spec').map_defaults(require('dsh.config').options.keys)
  end
end)
