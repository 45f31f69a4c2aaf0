--- :checkhealth agent_lsp: Neovim version, options, the server executable and its version, and
--- through the server the model endpoint (`agentLsp.models`) and the MCP servers.

local M = {}

local TIMEOUT_MS = 20000

--- A running agent-lsp client, else a temporary one for this check (started in the current
--- directory, not attached to any buffer).
---@return vim.lsp.Client? client
---@return boolean temporary
---@return string? why none
local function get_client()
  local running = vim.lsp.get_clients({ name = 'agent_lsp' })
  if running[1] then
    return running[1], false
  end
  local config = vim.lsp.config['agent_lsp']
  if not config or (type(config.cmd) == 'table' and vim.fn.executable(config.cmd[1]) == 0) then
    return nil, false, 'the server cannot be started (see above)'
  end
  config = vim.deepcopy(config)
  config.root_dir = vim.fn.getcwd()
  local id = vim.lsp.start(config, {
    attach = false,
    reuse_client = function()
      return false
    end,
  })
  local client = id and vim.lsp.get_client_by_id(id)
  if not client then
    return nil, false, 'the server could not be started'
  end
  vim.wait(TIMEOUT_MS, function()
    return client.initialized or client:is_stopped()
  end, 50)
  if not client.initialized then
    client:stop(true)
    return nil, false, 'the server did not initialize within 20 s'
  end
  return client, true
end

---@param client vim.lsp.Client
---@param command string
---@return any result
---@return string? err
local function execute(client, command)
  local resp, err = client:request_sync('workspace/executeCommand', {
    command = command,
    arguments = { vim.empty_dict() },
  }, TIMEOUT_MS)
  if not resp then
    return nil, ('%s: %s'):format(command, err or 'no answer')
  end
  if resp.err then
    return nil, ('%s failed: %s'):format(command, resp.err.message or vim.inspect(resp.err))
  end
  return resp.result
end

--- What to do about an endpoint error, by what it says.
---@param message string
---@param settings table
---@return string[]
local function advice(message, settings)
  local key_env = settings.apiKeyEnv or 'OPENAI_API_KEY'
  if message:find('API key', 1, true) or message:find('HTTP 401', 1, true) or message:find('HTTP 403', 1, true) then
    return {
      ('export %s before starting Neovim (the server inherits its environment)'):format(key_env),
      'or point baseUrl at a local OpenAI-compatible server (Ollama, vLLM, LM Studio)',
    }
  end
  if message:find('connect', 1, true) or message:find('in time', 1, true) then
    return { ('is the endpoint running? baseUrl is %s'):format(settings.baseUrl or vim.env.OPENAI_BASE_URL or 'not set') }
  end
  return { 'check baseUrl and the API key in vim.g.agent_lsp_settings' }
end

--- The model endpoint, reached by the server as a run would (`GET /models`).
---@param client vim.lsp.Client
---@param settings table
local function check_endpoint(client, settings)
  local health = vim.health
  local result, err = execute(client, 'agentLsp.models')
  if err then
    health.error(err)
    return
  end
  result = type(result) == 'table' and result or {}
  local models = result.models or {}
  local current = result.current
  if type(result.error) == 'string' then
    health.error('model endpoint: ' .. result.error, advice(result.error, settings))
    return
  end
  if #models == 0 then
    health.warn('the model endpoint lists no models: cannot tell whether `' .. tostring(current) .. '` exists')
    return
  end
  if not vim.tbl_contains(models, current) then
    local shown = table.concat(vim.list_slice(models, 1, 8), ', ') .. (#models > 8 and ', …' or '')
    health.error(('the model `%s` is not among the %d models the endpoint lists (%s)'):format(current, #models, shown), {
      'set `model` in vim.g.agent_lsp_settings to one of them, or pick one with :AgentModel',
    })
    return
  end
  health.ok(('model endpoint answers GET /models (%d model%s), including `%s`'):format(
    #models,
    #models == 1 and '' or 's',
    current
  ))
end

--- The MCP servers the agent may use (`agentLsp.mcpServers`); they start with the first run.
---@param client vim.lsp.Client
local function check_mcp(client)
  local health = vim.health
  local list, err = execute(client, 'agentLsp.mcpServers')
  if err then
    health.warn(err)
    return
  end
  if type(list) ~= 'table' or #list == 0 then
    health.info('no MCP servers configured (setting `mcpServers`)')
    return
  end
  for _, server in ipairs(list) do
    local line = ('MCP server `%s` (%s): %s%s'):format(
      server.name,
      server.source,
      server.state,
      type(server.tools) == 'table' and #server.tools > 0 and (', %d tools'):format(#server.tools) or ''
    )
    if server.state == 'failed' then
      health.error(line .. ': ' .. tostring(server.error))
    elseif server.state == 'needs-consent' or server.state == 'denied' then
      health.warn(line, { 'a server declared by the workspace starts once you allow it (setting mcp.workspaceServers)' })
    elseif server.state == 'running' then
      health.ok(line)
    else
      health.info(line .. ' (starts with the first run that needs it)')
    end
  end
end

function M.check()
  local health = vim.health
  health.start('agent-lsp: Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. version .. ' (>= 0.11)')
  else
    health.error('Neovim ' .. version .. ' is too old', { 'agent-lsp needs Neovim >= 0.11' })
    return
  end

  health.start('agent-lsp: options')
  local config = require('agent_lsp.config')
  local ok, err = config.check()
  if ok then
    health.ok('options are valid')
  else
    health.error('invalid option: ' .. err, { 'see :help agent_lsp-options; the defaults are used instead' })
  end
  local opts = config.get(true)
  local unknown = {}
  for key in pairs(opts.settings) do
    if not vim.tbl_contains(config.server_setting_keys, key) then
      unknown[#unknown + 1] = key
    end
  end
  if #unknown > 0 then
    health.warn('unknown server settings (the server ignores them): ' .. table.concat(unknown, ', '))
  end

  health.start('agent-lsp: server')
  local lsp_config = vim.lsp.config['agent_lsp']
  local cmd = lsp_config and lsp_config.cmd or opts.cmd
  if type(cmd) ~= 'table' then
    health.info('cmd is a function: cannot check the executable')
  else
    local exe = vim.fn.exepath(cmd[1])
    if exe == '' then
      health.error(('server executable `%s` not found'):format(cmd[1]), {
        'pip install agent-lsp-server (or `pip install -e .` in its repository)',
        "or point vim.g.agent_lsp_cmd at it, e.g. { '/path/to/venv/bin/agent-lsp' }",
      })
    else
      health.ok(('server executable: %s'):format(exe))
      local argv = vim.list_extend(vim.deepcopy(cmd), { '--version' })
      local run_ok, result = pcall(function()
        return vim.system(argv, { text = true }):wait(10000)
      end)
      if not run_ok then
        health.error('could not run `' .. table.concat(argv, ' ') .. '`: ' .. tostring(result))
      elseif result.code ~= 0 then
        health.error(
          ('`%s` failed (exit %s)'):format(table.concat(argv, ' '), tostring(result.code)),
          { vim.trim((result.stderr or '') .. (result.stdout or '')) }
        )
      else
        health.ok('version: ' .. vim.trim(result.stdout ~= '' and result.stdout or result.stderr))
      end
    end
  end

  if vim.lsp.is_enabled('agent_lsp') then
    health.ok("vim.lsp.enable('agent_lsp') is on")
  else
    health.warn("the agent_lsp config is not enabled", { "add vim.lsp.enable('agent_lsp') to your config" })
  end
  local clients = vim.lsp.get_clients({ name = 'agent_lsp' })
  for _, client in ipairs(clients) do
    health.info(('client %d running for %s'):format(client.id, require('agent_lsp.workspace').client_root(client)))
  end

  health.start('agent-lsp: model endpoint and MCP servers (through the server)')
  local client, temporary, why = get_client()
  if not client then
    health.error('cannot ask the server: ' .. why)
    return
  end
  if temporary then
    health.info('no agent-lsp client was running: started one for this check')
  end
  check_endpoint(client, opts.settings)
  check_mcp(client)
  if temporary then
    client:stop()
  end
end

return M
