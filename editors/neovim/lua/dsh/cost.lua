-- :DshCost: what the chat's session has cost, as the daemon sums it over every turn of its log
-- (`dsh/session/usage`, protocol.md §3, flag `sessionUsage`), whichever process ran them: its own
-- turns, tokens and cost, and on a second line its subagents' part (their sessions are their own,
-- so the daemon sums them apart). The words follow the terminal chat's /cost.
local client = require('dsh.client')
local notify = require('dsh.notify')

local M = {}

--- 5490 -> "5,490": the daemon's figures as they are, readable.
local function count(n)
  local s = tostring(math.floor(tonumber(n) or 0))
  local out = s:reverse():gsub('(%d%d%d)', '%1,'):reverse()
  return (out:gsub('^,', ''))
end

local function plural(n, word)
  return ('%d %s%s'):format(n, word, n == 1 and '' or 's')
end

local function dollars(cost)
  return cost >= 0.01 and ('$%.4f'):format(cost) or ('$%.6f'):format(cost)
end

--- The cost of a `{turns, costUsd, unpricedTurns}` in words: `unknown` when no turn had a price.
local function money(u, unknown)
  if type(u.costUsd) ~= 'number' then
    return unknown
  end
  local unpriced = tonumber(u.unpricedTurns) or 0
  if unpriced > 0 then
    return ('%s (%s without a price)'):format(dollars(u.costUsd), plural(unpriced, 'turn'))
  end
  return dollars(u.costUsd)
end

--- A `dsh/session/usage` answer in words: one line, two when the session started subagents.
function M.lines(sid, u)
  local name = 'session ' .. tostring(sid):sub(1, 8)
  local usage = type(u.usage) == 'table' and u.usage or {}
  local turns = tonumber(u.turns) or 0
  local first
  if turns == 0 then
    first = name .. ': no turn has reported its usage yet'
  else
    local cached = tonumber(usage.cacheReadTokens) or 0
    local reasoning = tonumber(usage.reasoningTokens) or 0
    first = ('%s: %s · %s tokens in%s · %s out%s · %s'):format(
      name,
      plural(turns, 'turn'),
      count(usage.inputTokens),
      cached > 0 and (' (%s cached)'):format(count(cached)) or '',
      count(usage.outputTokens),
      reasoning > 0 and (' (%s reasoning)'):format(count(reasoning)) or '',
      money(u, 'cost not known for this model')
    )
  end
  local lines = { first }
  local sub = u.subagents
  if type(sub) == 'table' then
    local sub_usage = type(sub.usage) == 'table' and sub.usage or {}
    lines[2] = ('its subagents (%s): %s · %s tokens in · %s out · %s'):format(
      plural(tonumber(sub.sessions) or 0, 'session'),
      plural(tonumber(sub.turns) or 0, 'turn'),
      count(sub_usage.inputTokens),
      count(sub_usage.outputTokens),
      money(sub, 'cost not known')
    )
  end
  return lines
end

--- :DshCost for the chat of the current buffer.
function M.show(chat)
  if not (chat and chat.id) then
    return notify.notify('no session here yet, so nothing spent (send a prompt first)')
  end
  local sid = chat.id
  client.ensure(chat.root, function()
    if not (client.info(chat.root) or {}).sessionUsage then
      return notify.warn('this dsh-daemon cannot tell what a session cost (no `sessionUsage` capability)')
    end
    client.request(chat.root, 'dsh/session/usage', { sessionId = sid }, function(err, res)
      if err or type(res) ~= 'table' then
        return notify.error('cost: ' .. tostring(err and err.message or 'no answer'))
      end
      notify.notify(table.concat(M.lines(sid, res), '\n  '))
    end)
  end, function(message)
    notify.error('cost: ' .. tostring(message))
  end)
end

return M
