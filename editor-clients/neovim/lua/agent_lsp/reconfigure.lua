--- Applies changed options to running agent-lsp servers: a change of the trusted settings (or
--- of the command) restarts them, since the server takes those only from
--- initializationOptions; other settings reach them as workspace/didChangeConfiguration.

local M = {}

--- Stops the client and starts a new one for the buffers it served, with the config as it
--- resolves now.
---@param client vim.lsp.Client
function M.restart(client)
  local workspace = require('agent_lsp.workspace')
  local bufs = vim.tbl_keys(client.attached_buffers or {})
  local busy = vim.iter(require('agent_lsp.runs').running()):any(function(run)
    return run.client_id == client.id
  end)
  if busy then
    vim.notify('agent-lsp: settings changed: restarting the server cancels its running runs', vim.log.levels.WARN)
  end
  client:stop()
  local deadline = vim.uv.now() + 5000
  local function start_again()
    if not client:is_stopped() and vim.uv.now() < deadline then
      vim.defer_fn(start_again, 50)
      return
    end
    if not client:is_stopped() then
      client:stop(true)
    end
    for _, buf in ipairs(bufs) do
      if vim.api.nvim_buf_is_valid(buf) then
        workspace.start(buf)
      end
    end
  end
  start_again()
end

--- Brings the running servers in line with the options now in effect.
---@param before agent_lsp.Options effective options before the change
---@param after agent_lsp.Options effective options after it
function M.apply(before, after)
  local config = require('agent_lsp.config')
  local restart = not vim.deep_equal(before.cmd, after.cmd) or config.needs_restart(before.settings, after.settings)
  for _, client in ipairs(vim.lsp.get_clients({ name = 'agent_lsp' })) do
    if restart then
      M.restart(client)
    elseif not vim.deep_equal(before.settings, after.settings) then
      -- Neovim answers the server's workspace/configuration from client.settings
      client.settings = { agentLsp = config.workspace_settings(after.settings) }
      client:notify('workspace/didChangeConfiguration', { settings = client.settings })
    end
  end
end

return M
