--- Answers the server's `agentLsp/diagnostics` request with what Neovim shows
--- (`vim.diagnostic.get`, every namespace: LSP servers, linters, anything), so the agent sees
--- the problems its edits cause.

local M = {}

-- Answer within this many ms even if no newer diagnostics came (CONTRACT Decision 15).
M.wait_ms = 2000

-- The buffer version (`vim.lsp.util.buf_versions`, the LSP version Neovim sent) current at the
-- last DiagnosticChanged of each buffer: diagnostics that came at version v or later are
-- "published for a version >= v".
---@type table<integer, integer>
local seen = {}
---@type (fun())[] requests waiting for a DiagnosticChanged
local waiters = {}

---@param buf integer
---@return integer
local function version(buf)
  return vim.lsp.util.buf_versions[buf] or vim.b[buf].changedtick or 0
end

--- DiagnosticChanged autocommand (plugin/agent_lsp.lua).
---@param buf integer
function M.on_changed(buf)
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  seen[buf] = version(buf)
  local pending = waiters
  waiters = {}
  for _, check in ipairs(pending) do
    check()
  end
end

--- The buffer of a file URI (loaded or not), without creating one.
---@param uri string
---@return integer?
local function buffer_of(uri)
  local ok, fname = pcall(vim.uri_to_fname, uri)
  if not ok then
    return nil
  end
  fname = vim.fs.normalize(fname)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf) ~= '' and vim.fs.normalize(vim.api.nvim_buf_get_name(buf)) == fname then
      return buf
    end
  end
  return nil
end

--- Whether anything may still publish diagnostics for the buffer: a language server other
--- than agent-lsp is attached, or some source set diagnostics for it before. Without either,
--- waiting for `afterVersion` would only cost the full 2 s.
---@param buf integer
---@return boolean
local function has_source(buf)
  if seen[buf] then
    return true
  end
  return vim.iter(vim.lsp.get_clients({ bufnr = buf })):any(function(c)
    return c.name ~= 'agent_lsp'
  end)
end

--- One vim.Diagnostic as an LSP Diagnostic: 0-based positions counted in the client's
--- position encoding (vim.diagnostic columns are bytes).
---@param buf integer
---@param d vim.Diagnostic
---@param encoding string
---@return lsp.Diagnostic
local function to_lsp(buf, d, encoding)
  local function character(row, col)
    local line = vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
    if not line or encoding == 'utf-8' then
      return col
    end
    return vim.str_utfindex(line, encoding, math.min(col, #line), false)
  end
  local end_lnum, end_col = d.end_lnum or d.lnum, d.end_col or d.col
  local item = {
    range = {
      start = { line = d.lnum, character = character(d.lnum, d.col) },
      ['end'] = { line = end_lnum, character = character(end_lnum, end_col) },
    },
    severity = d.severity,
    message = d.message,
    source = d.source,
  }
  if d.code ~= nil then
    item.code = d.code
  end
  return item
end

---@param buf integer
---@param uri string
---@param encoding string
---@return table `{uri, diagnostics}`
local function report(buf, uri, encoding)
  local list = {}
  if buf then
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      list[#list + 1] = to_lsp(buf, d, encoding)
    end
  end
  return { uri = uri, diagnostics = list }
end

--- Every file buffer with diagnostics.
---@param encoding string
---@return table[]
local function report_all(encoding)
  local bufs = {}
  for _, d in ipairs(vim.diagnostic.get(nil)) do
    bufs[d.bufnr] = true
  end
  local out = {}
  for buf in pairs(bufs) do
    if vim.api.nvim_buf_is_valid(buf) and vim.bo[buf].buftype == '' and vim.api.nvim_buf_get_name(buf) ~= '' then
      out[#out + 1] = report(buf, vim.uri_from_bufnr(buf), encoding)
    end
  end
  return out
end

--- Waits (yielding the request's coroutine) until every buffer had a DiagnosticChanged at a
--- version >= `after`, or `M.wait_ms` passed.
---@param bufs integer[]
---@param after integer
local function wait_for(bufs, after)
  local function ready()
    return vim.iter(bufs):all(function(buf)
      return not vim.api.nvim_buf_is_valid(buf) or not has_source(buf) or (seen[buf] or -1) >= after
    end)
  end
  if ready() then
    return
  end
  local co = coroutine.running()
  local resumed = false
  local function resume()
    if not resumed then
      resumed = true
      vim.schedule(function()
        coroutine.resume(co)
      end)
    end
  end
  local function check()
    if resumed then
      return
    end
    if ready() then
      resume()
    else
      table.insert(waiters, check)
    end
  end
  table.insert(waiters, check)
  vim.defer_fn(resume, M.wait_ms)
  coroutine.yield()
end

--- `agentLsp/diagnostics {uris?, afterVersion?}` -> `[{uri, diagnostics}]`.
---@param params? { uris?: string[], afterVersion?: integer }
---@param ctx lsp.HandlerContext
function M.handler(_, params, ctx)
  params = type(params) == 'table' and params or {}
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local encoding = client and client.offset_encoding or 'utf-16'
  if type(params.uris) ~= 'table' then
    return report_all(encoding)
  end
  local bufs, targets = {}, {}
  for _, uri in ipairs(params.uris) do
    local buf = buffer_of(uri)
    targets[#targets + 1] = { uri = uri, buf = buf }
    if buf then
      bufs[#bufs + 1] = buf
    end
  end
  local co, is_main = coroutine.running()
  if type(params.afterVersion) == 'number' and co and not is_main then
    wait_for(bufs, params.afterVersion)
  end
  return vim.tbl_map(function(t)
    return report(t.buf, t.uri, encoding)
  end, targets)
end

return M
