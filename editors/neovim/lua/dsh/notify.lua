-- Messages to the person, prefixed `dsh: `. What arrives while they may be typing (an announcement
-- nobody asked for) is cut to one screen line: a longer message would open a hit-enter prompt,
-- which takes the next key they type.
local M = {}

function M.notify(msg, level)
  vim.notify('dsh: ' .. tostring(msg), level or vim.log.levels.INFO)
end

function M.warn(msg)
  M.notify(msg, vim.log.levels.WARN)
end

function M.error(msg)
  M.notify(msg, vim.log.levels.ERROR)
end

--- One screen line at most (announcements).
function M.line(msg, level)
  msg = 'dsh: ' .. tostring(msg):gsub('\n', ' ')
  local room = math.max(20, (vim.v.echospace > 0 and vim.v.echospace or vim.o.columns) - 1)
  if vim.fn.strdisplaywidth(msg) > room then
    msg = vim.fn.strcharpart(msg, 0, room - 1) .. '…'
  end
  vim.notify(msg, level or vim.log.levels.INFO)
end

return M
