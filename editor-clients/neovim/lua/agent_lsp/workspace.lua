--- Workspace roots, the agent-lsp client serving a buffer, and the session kept per workspace.

local M = {}

M.name = 'agent_lsp'
M.root_markers = { '.git', 'AGENTS.md' }

---@type table<string, string> workspace root -> last sessionId
local sessions = {}
---@type table<string, string> workspace root -> model picked with :AgentModel
local models = {}

--- The workspace root for a buffer: the nearest `.git`/`AGENTS.md` above it, else the current
--- directory when the file lies inside it, else the file's directory.
---@param bufnr integer
---@return string
function M.root(bufnr)
  local found = vim.fs.root(bufnr, M.root_markers)
  if found then
    return found
  end
  local cwd = vim.fs.normalize(vim.fn.getcwd())
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or vim.bo[bufnr].buftype ~= '' then
    return cwd
  end
  name = vim.fs.normalize(vim.fn.fnamemodify(name, ':p'))
  if vim.fs.relpath(cwd, name) then
    return cwd
  end
  return vim.fs.dirname(name)
end

---@param client vim.lsp.Client
---@return string
function M.client_root(client)
  return client.root_dir or (client.workspace_folders and client.workspace_folders[1] and vim.uri_to_fname(
    client.workspace_folders[1].uri
  )) or vim.fn.getcwd()
end

--- The running agent-lsp client for a buffer: the one attached to it, else the one whose
--- workspace holds the buffer's root.
---@param bufnr integer
---@return vim.lsp.Client?
function M.find_client(bufnr)
  local attached = vim.lsp.get_clients({ name = M.name, bufnr = bufnr })
  if attached[1] then
    return attached[1]
  end
  local root = M.root(bufnr)
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    if vim.fs.relpath(M.client_root(client), root) then
      return client
    end
  end
  return nil
end

--- Starts agent-lsp for a buffer from the resolved `agent_lsp` config (works even when
--- `vim.lsp.enable('agent_lsp')` was not called).
---@param bufnr integer
---@return integer? client_id
function M.start(bufnr)
  local config = vim.lsp.config[M.name]
  if not config then
    vim.notify('agent-lsp: no `agent_lsp` LSP config found on the runtimepath', vim.log.levels.ERROR)
    return nil
  end
  if type(config.cmd) == 'table' and vim.fn.executable(config.cmd[1]) == 0 then
    vim.notify(
      ('agent-lsp: server command `%s` not found; install it from a clone of agent-lsp (pipx install . in the clone) or set vim.g.agent_lsp_cmd (see :checkhealth agent_lsp)'):format(
        tostring(config.cmd[1])
      ),
      vim.log.levels.ERROR
    )
    return nil
  end
  config = vim.deepcopy(config)
  config.root_dir = M.root(bufnr)
  local is_file = vim.bo[bufnr].buftype == '' and vim.api.nvim_buf_get_name(bufnr) ~= ''
  return vim.lsp.start(config, { bufnr = bufnr, attach = is_file })
end

--- Calls `cb` with an initialized agent-lsp client for the buffer, starting one if needed.
---@param bufnr integer
---@param cb fun(client: vim.lsp.Client)
function M.with_client(bufnr, cb)
  local client = M.find_client(bufnr)
  if not client then
    local id = M.start(bufnr)
    client = id and vim.lsp.get_client_by_id(id) or nil
    if not client then
      if id then
        vim.notify('agent-lsp: could not start the server (see :checkhealth agent_lsp)', vim.log.levels.ERROR)
      end
      return
    end
  end
  if client.initialized then
    cb(client)
    return
  end
  local deadline = vim.uv.now() + 30000
  local timer = assert(vim.uv.new_timer())
  timer:start(
    50,
    50,
    vim.schedule_wrap(function()
      if client.initialized then
        timer:stop()
        timer:close()
        cb(client)
      elseif client:is_stopped() or vim.uv.now() > deadline then
        timer:stop()
        timer:close()
        vim.notify('agent-lsp: the server did not initialize (see :checkhealth agent_lsp)', vim.log.levels.ERROR)
      end
    end)
  )
end

---@param root string
---@return string?
function M.session(root)
  return sessions[root]
end

---@param root string
---@param session_id string?
function M.set_session(root, session_id)
  sessions[root] = session_id
end

--- The model the next runs of a workspace pass (nil: the `model` setting).
---@param root string
---@return string?
function M.model(root)
  return models[root]
end

---@param root string
---@param model string?
function M.set_model(root, model)
  models[root] = model
end

--- Executes a server command with one object argument; `cb(result)` on success, the error
--- shown (and `on_error(err)` called) otherwise.
---@param client vim.lsp.Client
---@param command string
---@param arg? table
---@param cb fun(result: any)
---@param on_error? fun(err: lsp.ResponseError)
function M.execute(client, command, arg, cb, on_error)
  client:request('workspace/executeCommand', {
    command = command,
    arguments = { arg or vim.empty_dict() },
  }, function(err, result)
    if err then
      vim.notify(('agent-lsp: %s failed: %s'):format(command, err.message or vim.inspect(err)), vim.log.levels.ERROR)
      if on_error then
        on_error(err)
      end
      return
    end
    cb(result)
  end)
end

--- Calls `cb(client, root)` with the agent-lsp client of the current buffer (started if needed).
---@param cb fun(client: vim.lsp.Client, root: string)
function M.with_current(cb)
  M.with_client(vim.api.nvim_get_current_buf(), function(client)
    cb(client, M.client_root(client))
  end)
end

return M
