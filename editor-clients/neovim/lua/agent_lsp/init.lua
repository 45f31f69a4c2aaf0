--- agent-lsp for Neovim: the public Lua API. Nothing here is needed for the plugin to work;
--- `vim.lsp.enable('agent_lsp')` is enough.

local M = {}

--- Optional: set options from Lua instead of `vim.g.agent_lsp`. Re-resolves the
--- `agent_lsp` LSP config, so a server started afterwards gets the new `cmd` and settings
--- (restart a running one: `vim.lsp.enable('agent_lsp', false)`, then `vim.lsp.enable('agent_lsp')`).
---@param opts? agent_lsp.Options
---@return boolean ok false when an option is invalid (reported; the previous options stay)
function M.setup(opts)
  if not require('agent_lsp.config').set(opts) then
    return false
  end
  -- drop the cached resolution of lsp/agent_lsp.lua so it reads the options again
  vim.lsp.config('agent_lsp', {})
  return true
end

--- Statusline component: `agent: <latest progress message>` of the newest running run, or `''`.
---@return string
function M.statusline()
  return require('agent_lsp.runs').statusline()
end

--- Starts a run, like `:AgentRun {task}`.
---@param task string
function M.run(task)
  require('agent_lsp.commands').run(task)
end

--- Cancels the newest running run (a picker when several run), like `:AgentCancel`.
---@param run_id? string
function M.cancel(run_id)
  require('agent_lsp.commands').cancel(run_id)
end

--- Opens the stream buffer, like `:AgentStream`.
---@param opts? { enter?: boolean, split?: string }
function M.open_stream(opts)
  return require('agent_lsp.stream').open(opts)
end

--- Runs known to this Neovim, newest first.
---@return agent_lsp.Run[]
function M.runs()
  return require('agent_lsp.runs').all()
end

return M
