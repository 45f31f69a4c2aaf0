--- :checkhealth agent_lsp: what only Neovim knows (its version, the options, the server executable
--- and its version), then the server's own checks (`agentLsp.health`): the server computes them.

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

--- The server's own checks (`agentLsp.health`, the ones `agent-lsp doctor` prints): the settings
--- file, the API key, the model endpoint (GET /models) and the model the next runs use, ripgrep,
--- the sandbox, the MCP servers (none is started by the check).
---@param client vim.lsp.Client
local function check_server(client)
  local health = vim.health
  local model = require('agent_lsp.workspace').model(require('agent_lsp.workspace').client_root(client))
  local resp, err = client:request_sync('workspace/executeCommand', {
    command = 'agentLsp.health',
    arguments = { model and { model = model } or vim.empty_dict() },
  }, TIMEOUT_MS)
  if not resp or resp.err then
    health.error('agentLsp.health failed: ' .. (resp and resp.err and resp.err.message or err or 'no answer'), {
      'an older agent-lsp? upgrade it: git pull, then pipx install --force . in its clone',
    })
    return
  end
  for _, check in ipairs(type(resp.result) == 'table' and resp.result.checks or {}) do
    local line = ('%s: %s'):format(check.name, check.detail)
    if check.ok then
      health.ok(line)
    elseif check.name == 'model' then
      health.error(line, { 'set `model` in vim.g.agent_lsp_settings, or pick one with :AgentModel' })
    else
      health.error(line)
    end
  end
end

--- One line per entry of a group of `agentLsp.setup`'s answer.
local SETUP_GROUPS = {
  { 'rules', 'Permission rules', function(r)
    return ('%s %s %s  (%s: %s)%s'):format(r.state, r.effect, r.rule, r.scope, r.source, r.why and (' (' .. r.why .. ')') or '')
  end },
  { 'hooks', 'Hooks', function(h)
    local matcher = (h.matcher and h.matcher ~= '') and (' [' .. h.matcher .. ']') or ''
    return ('%s %s%s: %s  (%s: %s)'):format(h.state, h.event, matcher, h.command, h.scope, h.source)
  end },
  { 'skills', 'Skills' }, { 'commands', 'Commands' }, { 'agents', 'Agents' },
  { 'memoryFiles', 'Memory files', function(m)
    return ('%s %s'):format(m.present and 'present' or 'absent', m.path)
  end },
  { 'languageServers', 'Language servers', function(s)
    local cmd = type(s.command) == 'table' and #s.command > 0 and (': ' .. table.concat(s.command, ' ')) or ''
    return ('%s %s (%s)%s'):format(s.state, s.name, s.source, cmd)
  end },
  { 'mcpServers', 'MCP servers', function(s)
    return ('%s %s (%s)%s'):format(s.state, s.name, s.source, s.error and (': ' .. s.error) or '')
  end },
  { 'ignored', "Not read from Claude Code's files", function(i)
    return i.path .. ': ' .. i.key
  end },
}

local function prompt_file_line(p)
  local what = p.error and ('not used: ' .. p.error) or (p.description ~= '' and p.description or '-')
  return ('%s: %s  (%s: %s)'):format(p.name, what, p.scope, p.path)
end

--- What was found of the user's setup, and from where (`agentLsp.setup`, as `agent-lsp doctor`
--- prints it); a malformed file is an error naming it. Nothing is started by it.
---@param client vim.lsp.Client
local function check_setup(client)
  local health = vim.health
  local resp, err = client:request_sync('workspace/executeCommand', {
    command = 'agentLsp.setup',
    arguments = { vim.empty_dict() },
  }, TIMEOUT_MS)
  if not resp or resp.err or type(resp.result) ~= 'table' then
    health.warn('agentLsp.setup failed: ' .. (resp and resp.err and resp.err.message or err or 'no answer'), {
      'an older agent-lsp? upgrade it: git pull, then pipx install --force . in its clone',
    })
    return
  end
  local setup = resp.result
  for _, group in ipairs(SETUP_GROUPS) do
    local rows = type(setup[group[1]]) == 'table' and setup[group[1]] or {}
    local lines = {}
    for _, row in ipairs(rows) do
      lines[#lines + 1] = '  ' .. (group[3] or prompt_file_line)(row)
    end
    health.info(group[2] .. ':' .. (#lines > 0 and ('\n' .. table.concat(lines, '\n')) or ' none'))
  end
  local problems = type(setup.problems) == 'table' and setup.problems or {}
  for _, p in ipairs(problems) do
    health.error((p.path ~= '' and (p.path .. ': ') or '') .. p.error, { 'fix the file: the rest of the setup still works' })
  end
  if #problems == 0 then
    health.ok('no malformed file in your setup')
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
        'install it from a clone of agent-lsp: pipx install . (or pip install -e . in a virtualenv); '
          .. 'not on PyPI yet (once published: pipx install agent-lsp-server)',
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

  health.start('agent-lsp: code intelligence (agentLsp/codeIntel)')
  local caps = lsp_config and lsp_config.capabilities or {}
  local advertised = vim.tbl_get(caps, 'experimental', 'agentLsp', 'codeIntel') == true
  if advertised then
    health.ok('codeIntel is advertised: the agent asks the language servers attached to your buffers')
  else
    health.warn('codeIntel is not advertised (the agent_lsp config\'s capabilities were replaced)')
  end
  local servers = require('agent_lsp.code_intel').servers()
  if #servers > 0 then
    health.ok('language servers that answer: ' .. table.concat(servers, ', '))
  else
    health.info('no other language server is running now: the agent uses those agent-lsp starts itself, '
      .. 'or search (a file not open is opened hidden and its servers attach)')
  end

  health.start('agent-lsp: the server\'s checks (as `agent-lsp doctor`)')
  local client, temporary, why = get_client()
  if not client then
    health.error('cannot ask the server: ' .. why)
    return
  end
  if temporary then
    health.info('no agent-lsp client was running: started one for this check')
  end
  check_server(client)
  health.start('agent-lsp: your setup (agentLsp.setup, as `agent-lsp doctor`)')
  check_setup(client)
  if temporary then
    client:stop()
  end
end

return M
