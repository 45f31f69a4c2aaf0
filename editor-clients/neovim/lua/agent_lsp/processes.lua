--- Background processes of the agent's runs (`run_command {background: true}`), from the
--- `process` stream events; :AgentProcesses lists the running ones and stops the one picked
--- (`agentLsp.stopProcess`).

local M = {}

---@class agent_lsp.Process
---@field run_id string
---@field client_id integer
---@field process_id string `p1`..`p4`, per run
---@field command string
---@field state string `running`, `exited` or `stopped`
---@field exit_code? integer
---@field order integer

---@type table<string, agent_lsp.Process>
local processes = {}
local counter = 0

local function notify(msg, level)
  vim.notify('agent-lsp: ' .. msg, level or vim.log.levels.INFO)
end

--- Records a `process` stream event.
---@param ev table `{runId, processId, command, state, exitCode?}`
---@param client_id integer
function M.on_event(ev, client_id)
  if type(ev.processId) ~= 'string' then
    return
  end
  local key = tostring(ev.runId) .. '/' .. ev.processId
  local entry = processes[key]
  if not entry then
    counter = counter + 1
    entry = { run_id = tostring(ev.runId), client_id = client_id, process_id = ev.processId, order = counter }
    processes[key] = entry
  end
  entry.command = type(ev.command) == 'string' and ev.command or entry.command or ''
  entry.state = type(ev.state) == 'string' and ev.state or entry.state
  entry.exit_code = type(ev.exitCode) == 'number' and ev.exitCode or nil
end

--- A run stopped: the server ended its processes (their events came before the stop).
---@param run_id string
function M.on_run_stop(run_id)
  for _, entry in pairs(processes) do
    if entry.run_id == run_id and entry.state == 'running' then
      entry.state = 'stopped'
    end
  end
end

--- Running background processes, newest first.
---@return agent_lsp.Process[]
function M.running()
  local list = vim.tbl_filter(function(entry)
    return entry.state == 'running'
  end, vim.tbl_values(processes))
  table.sort(list, function(a, b)
    return a.order > b.order
  end)
  return list
end

---@param entry agent_lsp.Process
---@return string
local function describe(entry)
  return ('%s  %s  (run %s)'):format(entry.process_id, entry.command, entry.run_id:sub(1, 8))
end

--- Stops one (`agentLsp.stopProcess`).
---@param entry agent_lsp.Process
function M.stop(entry)
  local client = vim.lsp.get_client_by_id(entry.client_id)
  if not client then
    entry.state = 'stopped'
    return
  end
  client:request('workspace/executeCommand', {
    command = 'agentLsp.stopProcess',
    arguments = { { runId = entry.run_id, processId = entry.process_id } },
  }, function(err, result)
    if err then
      notify('stopping ' .. entry.process_id .. ' failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif result == false then
      entry.state = entry.state == 'running' and 'exited' or entry.state
      notify(entry.process_id .. ' was no longer running', vim.log.levels.WARN)
    else
      notify('stopped ' .. describe(entry))
    end
  end)
end

--- :AgentProcesses: the running background processes; the one picked is stopped.
function M.pick()
  local running = M.running()
  if #running == 0 then
    notify('no background process is running', vim.log.levels.WARN)
    return
  end
  vim.ui.select(running, { prompt = 'Stop which background process?', format_item = describe }, function(entry)
    if entry then
      M.stop(entry)
    end
  end)
end

return M
