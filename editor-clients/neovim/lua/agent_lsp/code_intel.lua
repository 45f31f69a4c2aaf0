--- Answers the server's `agentLsp/codeIntel {method, params}` request (CONTRACT "Code
--- intelligence", Source 1) from the buffer's other attached language servers: the agent finds
--- definitions, references, and renames through the servers Neovim already runs. A file that is
--- not open is loaded into a hidden buffer so its servers can attach (waited for a bounded time).
--- Positions arrive in agent-lsp's encoding and are converted for each server (and back).

local M = {}

-- How long a file loaded for a request waits for a language server to attach (ms).
M.attach_wait_ms = 5000
-- How long one language server gets to answer (ms); agent-lsp itself waits 30 s.
M.request_timeout_ms = 25000

local RENAME = 'textDocument/rename'
local REFERENCES = 'textDocument/references'

-- The agent-lsp client whose request is being answered (excluded whatever its config's name).
local asking_id = nil

---@param client vim.lsp.Client
---@return boolean
local function is_other(client)
  return client.name ~= 'agent_lsp' and client.id ~= asking_id
end

--- The clients other than agent-lsp attached to `buf` (all of them when `buf` is nil).
---@param buf integer?
---@return vim.lsp.Client[]
function M.others(buf)
  return vim.tbl_filter(is_other, vim.lsp.get_clients(buf and { bufnr = buf } or {}))
end

---@param params table
---@return string?
local function uri_of(params)
  if type(params.textDocument) == 'table' then
    return params.textDocument.uri
  end
  if type(params.item) == 'table' then
    return params.item.uri -- callHierarchy/incomingCalls|outgoingCalls
  end
  return nil
end

--- The file's buffer, loaded (hidden, unlisted) when it was not; its filetype set, so the
--- language servers enabled for it attach.
---@param uri string
---@return integer? buf
---@return boolean fresh loaded for this request
local function buffer_of(uri)
  local ok, fname = pcall(vim.uri_to_fname, uri)
  if not ok or (vim.fn.filereadable(fname) == 0 and vim.fn.bufexists(fname) == 0) then
    return nil, false
  end
  local buf = vim.fn.bufadd(fname)
  local fresh = not vim.api.nvim_buf_is_loaded(buf)
  if fresh then
    vim.bo[buf].buflisted = false
    vim.bo[buf].bufhidden = 'hide'
    vim.fn.bufload(buf)
  end
  if vim.bo[buf].filetype == '' then
    local ft = vim.filetype.match({ buf = buf })
    if ft then
      vim.bo[buf].filetype = ft -- FileType: the vim.lsp.enable()d servers attach
    end
  end
  return buf, fresh
end

--- Yields the running coroutine until `done()` or `ms` passed.
---@param ms integer
---@param done fun(): boolean
local function wait_until(ms, done)
  local co = coroutine.running()
  local deadline = vim.uv.now() + ms
  local function poll()
    if done() or vim.uv.now() >= deadline then
      coroutine.resume(co)
    else
      vim.defer_fn(poll, 20)
    end
  end
  vim.defer_fn(poll, 0)
  coroutine.yield()
end

--- The clients that can answer `method` for `buf`, waiting (bounded) for one to attach and
--- initialize when the file was just loaded or its servers are still starting.
---@param buf integer?
---@param method string
---@param fresh boolean
---@return vim.lsp.Client[]
local function answering(buf, method, fresh)
  local function able()
    return vim.tbl_filter(function(c)
      return c.initialized and c:supports_method(method, buf)
    end, M.others(buf))
  end
  local found = able()
  local starting = vim.tbl_filter(function(c)
    return not c.initialized
  end, M.others(buf))
  if #found == 0 and buf and (fresh or #starting > 0) then
    wait_until(M.attach_wait_ms, function()
      return #able() > 0
    end)
    found = able()
  end
  return found
end

-- -- positions: agent-lsp's encoding <-> each server's ------------------------------------

---@param uri string
---@param cache table<string, string[]>
---@return string[]
local function lines_of(uri, cache)
  if cache[uri] then
    return cache[uri]
  end
  local ok, fname = pcall(vim.uri_to_fname, uri)
  local lines = {}
  if ok then
    local buf = vim.fn.bufnr(fname)
    if buf ~= -1 and vim.api.nvim_buf_is_loaded(buf) then
      lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    elseif vim.fn.filereadable(fname) == 1 then
      lines = vim.fn.readfile(fname)
    end
  end
  cache[uri] = lines
  return lines
end

--- A position's character re-counted from encoding `from` into `to` on that line of `uri`.
local function convert_position(pos, uri, from, to, cache)
  local line = lines_of(uri, cache)[pos.line + 1]
  if not line or type(pos.character) ~= 'number' then
    return pos
  end
  local okb, byte = pcall(vim.str_byteindex, line, from, pos.character, false)
  if not okb then
    return pos
  end
  local okc, char = pcall(vim.str_utfindex, line, to, byte, false)
  return { line = pos.line, character = okc and char or pos.character }
end

--- Every Position in `value` (a table of LSP JSON) converted, the file being the nearest `uri`
--- / `targetUri` / WorkspaceEdit key around it, else `uri`.
local function convert(value, uri, from, to, cache)
  if type(value) ~= 'table' then
    return value
  end
  if type(value.line) == 'number' and type(value.character) == 'number' then
    return convert_position(value, uri, from, to, cache)
  end
  local here = value.uri or value.targetUri or (type(value.textDocument) == 'table' and value.textDocument.uri)
  here = type(here) == 'string' and here or uri
  local out = {}
  for k, v in pairs(value) do
    if k == 'changes' and type(v) == 'table' then
      local changes = {}
      for file, edits in pairs(v) do
        changes[file] = convert(edits, file, from, to, cache)
      end
      out[k] = changes
    else
      out[k] = convert(v, here, from, to, cache)
    end
  end
  return setmetatable(out, getmetatable(value))
end

-- -- asking the servers ---------------------------------------------------------------------

--- Sends `method` to each client (in its encoding), waits for all answers (bounded) and
--- returns them in the order of `clients`, converted back to `encoding`.
---@return table[] answers {result, err, client}
local function ask(clients, method, params, buf, uri, encoding)
  local co = coroutine.running()
  local answers, pending, finished = {}, #clients, false
  local function settle()
    if not finished and pending == 0 then
      finished = true
      coroutine.resume(co)
    end
  end
  local cache = {}
  for i, client in ipairs(clients) do
    local theirs = client.offset_encoding or 'utf-16'
    local sent = theirs == encoding and params or convert(params, uri, encoding, theirs, cache)
    local ok = client:request(method, sent, function(err, result)
      if theirs ~= encoding and result ~= nil then
        result = convert(result, uri, theirs, encoding, {})
      end
      answers[i] = { result = result, err = err, client = client }
      pending = pending - 1
      settle()
    end, buf)
    if not ok then
      answers[i] = { err = { message = client.name .. ' is not running' }, client = client }
      pending = pending - 1
    end
  end
  if pending == 0 then
    return answers
  end
  vim.defer_fn(function()
    if not finished then
      finished = true
      coroutine.resume(co)
    end
  end, M.request_timeout_ms)
  coroutine.yield()
  return answers
end

local function empty(result)
  return result == nil or result == vim.NIL or (type(result) == 'table' and vim.tbl_isempty(result))
end

--- References from every server, without duplicates.
local function merged(answers)
  local seen, out = {}, {}
  for _, answer in pairs(answers) do
    if type(answer.result) == 'table' then
      for _, loc in ipairs(answer.result) do
        local s = loc.range and loc.range.start or {}
        local key = ('%s:%s:%s'):format(loc.uri, s.line, s.character)
        if not seen[key] then
          seen[key] = true
          out[#out + 1] = loc
        end
      end
    end
  end
  return out
end

--- `agentLsp/codeIntel {method, params}` -> the method's LSP result, or vim.NIL when no other
--- language server of the buffer can answer.
---@param params { method: string, params: table }
---@param ctx lsp.HandlerContext
function M.handler(_, params, ctx)
  if type(params) ~= 'table' or type(params.method) ~= 'string' or type(params.params) ~= 'table' then
    return nil, vim.lsp.rpc.rpc_response_error(vim.lsp.protocol.ErrorCodes.InvalidParams, 'expected {method, params}')
  end
  local co, is_main = coroutine.running()
  if not co or is_main then
    return vim.NIL -- not in the rpc's coroutine: cannot wait for other servers
  end
  asking_id = ctx.client_id
  local agent = vim.lsp.get_client_by_id(ctx.client_id)
  local encoding = agent and agent.offset_encoding or 'utf-16'
  local method, lsp_params = params.method, params.params
  local uri = uri_of(lsp_params)
  local buf, fresh = nil, false
  if uri then
    buf, fresh = buffer_of(uri)
    if not buf then
      return vim.NIL
    end
  end
  local clients = answering(buf, method, fresh)
  if #clients == 0 then
    return vim.NIL
  end
  if method ~= REFERENCES then
    -- the first that answers (in attach order); a rename asks one server only
    for _, client in ipairs(clients) do
      local answer = ask({ client }, method, lsp_params, buf, uri, encoding)[1]
      if answer and answer.err and (method == RENAME or #clients == 1) then
        return nil, vim.lsp.rpc.rpc_response_error(
          vim.lsp.protocol.ErrorCodes.RequestFailed,
          ('%s: %s'):format(client.name, answer.err.message or vim.inspect(answer.err))
        )
      end
      if answer and not answer.err and (not empty(answer.result) or method == RENAME) then
        return answer.result == nil and vim.NIL or answer.result
      end
    end
    return vim.NIL
  end
  local answers = ask(clients, method, lsp_params, buf, uri, encoding)
  local found = merged(answers)
  return #found > 0 and found or vim.NIL
end

--- For :checkhealth: the language servers that answer code-intel requests now.
---@return string[]
function M.servers()
  local names = {}
  for _, client in ipairs(M.others()) do
    if not vim.tbl_contains(names, client.name) then
      names[#names + 1] = client.name
    end
  end
  table.sort(names)
  return names
end

return M
