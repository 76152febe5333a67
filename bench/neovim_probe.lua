-- Loaded into the benchmarked Neovim by bench/neovim_bench.py. It shows a chat, feeds it `dsh/event`s
-- the way Neovim's LSP client delivers them (the JSON body decoded in a libuv callback, the handler
-- run through vim.schedule), and probes input latency with a 1 ms libuv timer: the longest gap
-- between two of its ticks is the longest a keystroke arriving at that moment waits before Neovim
-- reads it. A 50 ms gap feels like a stall; 10 ms is imperceptible.
local B = {}
_G.B = B
local uv = vim.uv

local root, sid = vim.fn.getcwd(), 'bench-session'

function B.setup(opts)
  opts = vim.tbl_extend('force', opts or {}, { cmd = { 'false' } }) -- no daemon: events are fed by hand
  require('dsh').setup(opts)
  vim.cmd('edit code.txt')
  vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'local x = 1', 'return x' })
  local dsh = require('dsh')
  local chat = dsh.get_chat(sid, root)
  dsh.current[root] = sid
  chat:open()
  B.chat = chat
  -- The person looks at the end of the transcript (it follows the stream) and types in the input.
  for _, win in ipairs(chat:windows()) do
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(chat.buf), 0 })
  end
  return true
end

-- Two measures per gap between ticks: wall time (what a keystroke waits, including time the OS
-- gave to other processes on a busy machine) and this process's CPU time (what Neovim itself spent
-- meanwhile: the wait on an otherwise idle machine).
local probe
local function probe_start()
  probe = { max = 0, max_cpu = 0, ticks = 0, last = uv.hrtime(), last_cpu = os.clock(), timer = uv.new_timer() }
  probe.timer:start(1, 1, function()
    local now, cpu = uv.hrtime(), os.clock()
    local gap, cpu_gap = (now - probe.last) / 1e6, (cpu - probe.last_cpu) * 1000
    probe.last, probe.last_cpu = now, cpu
    probe.ticks = probe.ticks + 1
    probe.max = math.max(probe.max, gap)
    probe.max_cpu = math.max(probe.max_cpu, cpu_gap)
  end)
end

local function probe_stop()
  probe.timer:stop()
  probe.timer:close()
  return probe.max, probe.max_cpu
end

local turn = 0
local function body(ev)
  ev.sessionId = sid
  return vim.json.encode(ev)
end

--- The events of one turn whose reply is `pieces` (deltas, with their UTF-16 offsets).
local function turn_events(pieces)
  turn = turn + 1
  local evs = {
    body({ type = 'agent/status', data = { status = 'running' } }),
    body({ type = 'turn/start', data = { turn = turn } }),
    body({ type = 'user/message', data = { id = 'u' .. turn, content = 'go', source = { kind = 'user' } } }),
  }
  local offset = 0
  for _, text in ipairs(pieces) do
    evs[#evs + 1] = body({
      type = 'assistant/delta',
      data = { turn = turn, step = 1, offset = offset, delta = { type = 'text', text = text } },
    })
    offset = offset + vim.str_utfindex(text, 'utf-16')
  end
  evs[#evs + 1] = body({ type = 'assistant/message', data = { turn = turn, step = 1 } })
  evs[#evs + 1] = body({ type = 'turn/end', data = { turn = turn, reason = { kind = 'completed' } } })
  evs[#evs + 1] = body({ type = 'agent/status', data = { status = 'idle' } })
  return evs
end

local function deliver(encoded)
  -- What vim.lsp.rpc does for a notification: decode in the read callback, schedule the handler.
  local ev = vim.json.decode(encoded, { luanil = { object = true } })
  vim.schedule(function()
    require('dsh').on_event(root, ev)
  end)
end

local WORDS = { 'the ', 'model ', 'writes ', 'a ', 'reply, ', 'word ', 'by ', 'word; ', 'some ', 'lines ', 'end.\n' }

--- Prose as a model writes it: lines of a few words, a blank line between paragraphs of ~5 lines.
local function prose(n)
  local out = {}
  for i = 1, n do
    out[i] = WORDS[(i - 1) % #WORDS + 1]
    if i % 55 == 0 then
      out[i] = out[i] .. '\n'
    end
  end
  return out
end

local function one_line(n, width)
  local out = {}
  local piece = string.rep('x', width - 1) .. ' '
  for i = 1, n do
    out[i] = piece
  end
  return out
end

--- Start a scenario: 'idle' (nothing fed: the baseline), 'burst' (5,000 deltas at once), 'line'
--- (5,000 deltas forming one 50 KB line, at once), 'paced' (deltas 2 ms apart, as a fast model),
--- 'line-paced' (2,500 deltas 2 ms apart forming one 50 KB line).
function B.start(kind, n)
  B.done = false
  B.max = nil
  probe_start()
  local t0 = uv.hrtime()
  local function finish()
    -- Let the last flush and redraw happen, then read the probe.
    vim.defer_fn(function()
      B.max, B.max_cpu = probe_stop()
      B.elapsed = (uv.hrtime() - t0) / 1e6
      B.lines = vim.api.nvim_buf_line_count(B.chat.buf)
      B.done = true
    end, 300)
  end
  if kind == 'idle' then
    vim.defer_fn(finish, 500)
    return true
  end
  local evs
  if kind == 'burst' then
    evs = turn_events(prose(n))
  elseif kind == 'line' then
    evs = turn_events(one_line(n, 10))
  elseif kind == 'line-paced' then
    evs = turn_events(one_line(n, 20))
  else
    evs = turn_events(prose(n))
  end
  if kind == 'paced' or kind == 'line-paced' then
    local i = 0
    local timer = uv.new_timer()
    timer:start(2, 2, function()
      i = i + 1
      if evs[i] then
        deliver(evs[i])
      else
        timer:stop()
        timer:close()
        vim.schedule(finish)
      end
    end)
  else
    -- All of them are waiting in the pipe: each loop iteration reads up to 64 KB (libuv's read
    -- size), as Neovim's LSP client reads a daemon that wrote a burst.
    local i = 0
    local idle = uv.new_idle()
    idle:start(function()
      local bytes = 0
      while evs[i + 1] and bytes < 65536 do
        i = i + 1
        bytes = bytes + #evs[i]
        deliver(evs[i])
      end
      if not evs[i + 1] then
        idle:stop()
        idle:close()
        vim.schedule(finish)
      end
    end)
  end
  return true
end

return B
