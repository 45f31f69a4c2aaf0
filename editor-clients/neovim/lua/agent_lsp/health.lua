--- :checkhealth agent_lsp: Neovim version, the server executable and its version, options.

local M = {}

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
        'pip install agent-lsp (or `pip install -e .` in its repository)',
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
end

return M
