--- agent-lsp for Neovim: the public Lua API. Nothing here is needed for the plugin to work;
--- `vim.lsp.enable('agent_lsp')` is enough.

local M = {}

--- Optional: set options from Lua instead of `vim.g.agent_lsp`. Re-resolves the
--- `agent_lsp` LSP config, so a server started afterwards gets the new `cmd` and settings; a
--- running server gets a changed setting too: it restarts when a trusted setting (or the
--- command) changed, else it is sent workspace/didChangeConfiguration.
---@param opts? agent_lsp.Options
---@return boolean ok false when an option is invalid (reported; the previous options stay)
function M.setup(opts)
  local config = require('agent_lsp.config')
  -- what the running servers got (vim.g changes made since count as changes too)
  local before = config.resolved or config.get(true)
  if not config.set(opts) then
    return false
  end
  -- drop the cached resolution of lsp/agent_lsp.lua so it reads the options again
  vim.lsp.config('agent_lsp', {})
  local after = config.get(true)
  config.resolved = after
  require('agent_lsp.reconfigure').apply(before, after)
  return true
end

--- Statusline component for the newest running run, `''` when idle: `agent: ctx 31k/128k ·
--- $0.012` (its context fill and cost so far); with `{ activity = true }`, what it does now
--- first: `agent: turn 2: edit_file a.py · ctx 31k/128k · $0.012`.
---@param opts? { activity?: boolean }
---@return string
function M.statusline(opts)
  return require('agent_lsp.runs').statusline(opts)
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

--- Plans a task (read-only tools), like `:AgentPlan {task}`.
---@param task string
function M.plan(task)
  require('agent_lsp.commands').plan(task)
end

--- Carries out the workspace's last plan, like `:AgentCarryOut`.
function M.carry_out()
  require('agent_lsp.commands').carry_out()
end

--- Rewinds a run (a pick without `run_id`), like `:AgentRewind`.
---@param run_id? string
function M.rewind(run_id)
  require('agent_lsp.rewind').pick(run_id)
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
