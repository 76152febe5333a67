-- Buffers loaded for the agent only. When the daemon asks about a file that has no loaded buffer
-- (its diagnostics before or after an agent edit, a language feature) or the agent edits one, the
-- file is loaded into a hidden, unlisted buffer: the language servers attach to it and check it as
-- they do a file the person opened, and the person's buffer list and windows stay as they were.
-- When the agent is done with it, it is let go: wiped (unloaded again, when an unloaded buffer for
-- the file was there before) unless the person opened it meanwhile (it is in a window, or listed)
-- or it holds text no file has (then it is listed, so the person finds it).
local api = vim.api

local M = {}

-- A buffer a request loaded but nothing let go explicitly (e.g. the diagnostics asked before an edit
-- that then failed) is let go after this long unused.
M.hold_ms = 10000

---@class dsh.Borrowed
---@field uses integer requests using it now
---@field existed boolean an (unloaded) buffer for the file was there before
---@field listed boolean it was listed before
---@field idle integer counts let-go timers: only the latest one acts

local held = {} ---@type table<integer, dsh.Borrowed>

--- The buffer for `uri` if one exists (none is made); nil otherwise.
function M.existing(uri)
  local ok, fname = pcall(vim.uri_to_fname, uri)
  if ok and vim.fn.bufexists(fname) == 1 then
    return vim.uri_to_bufnr(uri)
  end
end

--- What is there for `uri` now, to tell afterwards whether the agent's request loaded it.
function M.state(uri)
  local buf = M.existing(uri)
  return {
    buf = buf,
    loaded = buf ~= nil and api.nvim_buf_is_loaded(buf),
    listed = buf ~= nil and vim.bo[buf].buflisted,
  }
end

--- Whether `buf` is held (loaded for the agent, not opened by the person).
function M.held(buf)
  return held[buf] ~= nil
end

local function let_go(buf)
  local h = held[buf]
  held[buf] = nil
  if not h or not api.nvim_buf_is_valid(buf) or not api.nvim_buf_is_loaded(buf) then
    return
  end
  if #vim.fn.win_findbuf(buf) > 0 or (vim.bo[buf].buflisted and not h.listed) then
    return -- the person opened it meanwhile: theirs now
  end
  if vim.bo[buf].modified then
    vim.bo[buf].buflisted = true -- text no file has is never thrown away
    return
  end
  pcall(api.nvim_buf_delete, buf, { force = false, unload = h.existed })
end

--- Hold `buf` (loaded by a request: `before` is M.state from before it was) as loaded for the
--- agent, one use: unlisted as it was before. No-op for a buffer that was loaded before.
local function hold(buf, before)
  if before.loaded then
    return
  end
  local h = held[buf]
  if h then
    h.uses = h.uses + 1
  else
    held[buf] = { uses = 1, existed = before.buf ~= nil, listed = before.listed, idle = 0 }
  end
  vim.bo[buf].buflisted = before.listed
end

--- The loaded buffer for `uri`, loaded hidden and unlisted (and held) when it was not; one use, ended
--- with M.done. nil when it cannot be loaded, or `must_exist` and there is no such file (no empty
--- buffer is made for a file that does not exist).
---@return integer? buf
---@return boolean fresh it was loaded just now
function M.take(uri, must_exist)
  local before = M.state(uri)
  if before.loaded then
    if held[before.buf] then
      held[before.buf].uses = held[before.buf].uses + 1
    end
    return before.buf, false
  end
  local ok, fname = pcall(vim.uri_to_fname, uri)
  if not ok or (must_exist and vim.fn.filereadable(fname) == 0) then
    return nil, false
  end
  local buf = before.buf or vim.uri_to_bufnr(uri)
  hold(buf, before)
  pcall(vim.fn.bufload, buf)
  if not api.nvim_buf_is_loaded(buf) then
    M.done(buf, true)
    return nil, false
  end
  return buf, true
end

--- After the agent's edit (`before`: M.state from just before it): Neovim's workspace-edit code loads
--- and lists an edited file; the edit changes neither. A buffer it loaded is held as if taken, and let
--- go when unused.
function M.edited(buf, before)
  if not api.nvim_buf_is_loaded(buf) then
    return
  end
  vim.bo[buf].buflisted = before.listed
  if not before.loaded and not held[buf] then
    hold(buf, before)
    M.done(buf, false)
  end
end

--- One use of `buf` ended: let go now (`now`: the agent is done with the file), else after M.hold_ms
--- unused. No-op for a buffer the agent did not load.
function M.done(buf, now)
  local h = held[buf]
  if not h then
    return
  end
  h.uses = math.max(0, h.uses - 1)
  if h.uses > 0 then
    return
  end
  if now then
    let_go(buf)
    return
  end
  h.idle = h.idle + 1
  local mine = h.idle
  vim.defer_fn(function()
    if held[buf] == h and h.uses == 0 and h.idle == mine then
      let_go(buf)
    end
  end, M.hold_ms)
end

return M
