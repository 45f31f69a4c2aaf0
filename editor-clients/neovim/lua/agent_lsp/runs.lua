--- Registry of agent runs: their progress (from LspProgress), their stop, and the statusline.

local M = {}

---@class agent_lsp.Run
---@field id string run id, also the progress token
---@field client_id integer
---@field session_id? string
---@field root? string workspace root the run belongs to
---@field title string what the run is about (the task, or the progress title)
---@field message? string latest progress message
---@field percentage? integer
---@field has_progress boolean a progress `begin` arrived, so the token can be cancelled
---@field progress_ended? boolean
---@field done boolean
---@field stop_reason? string `done`, `max_turns`, `fatal` or `cancelled`
---@field report? table the run report of the `stop` event
---@field mode? 'plan' a plan run (its `finalText` is the plan)
---@field usage? string the main agent's latest `usage` line: `ctx 31k/128k · $0.012`
---@field kind? 'rewind' a rewind (:AgentRewind can put its files back too)
---@field rewound? boolean its files were rewound
---@field order integer creation order, newest highest
---@field events table[] its `agentLsp/stream` events while it runs (at most 20,000)

---@type table<string, agent_lsp.Run>
local runs = {}
local counter = 0

--- Returns the run, creating it on first sight: its progress or stream may arrive before the
--- reply to `agentLsp.run`.
---@param id string
---@param client_id integer
---@return agent_lsp.Run
function M.ensure(id, client_id)
  local run = runs[id]
  if not run then
    counter = counter + 1
    run = {
      id = id,
      client_id = client_id,
      title = 'agent run',
      has_progress = false,
      done = false,
      order = counter,
      events = {},
    }
    runs[id] = run
  end
  return run
end

---@param id string
---@return agent_lsp.Run?
function M.get(id)
  return runs[id]
end

--- Running runs, newest first.
---@return agent_lsp.Run[]
function M.running()
  local list = vim.tbl_filter(function(run)
    return not run.done
  end, vim.tbl_values(runs))
  table.sort(list, function(a, b)
    return a.order > b.order
  end)
  return list
end

--- All runs, newest first.
---@return agent_lsp.Run[]
function M.all()
  local list = vim.tbl_values(runs)
  table.sort(list, function(a, b)
    return a.order > b.order
  end)
  return list
end

--- Finished runs (and rewinds) that changed files, newest first: what :AgentRewind offers.
---@return agent_lsp.Run[]
function M.with_edits()
  return vim.tbl_filter(function(run)
    return run.done and type(run.report) == 'table' and #(run.report.editedFiles or {}) > 0
  end, M.all())
end

--- The newest plan run of a workspace that finished with a plan (`done`).
---@param root string
---@return agent_lsp.Run?
function M.last_plan(root)
  return vim.iter(M.all()):find(function(run)
    return run.mode == 'plan' and run.root == root and run.done and run.stop_reason == 'done'
  end)
end

local function redraw()
  pcall(vim.cmd.redrawstatus, { bang = true })
end

---@param run agent_lsp.Run
---@param reason? string
---@param report? table
function M.finish(run, reason, report)
  if run.done and run.report then
    return
  end
  run.done = true
  run.events = {} -- kept only while it runs (a chat opened mid-run shows them)
  run.stop_reason = reason or run.stop_reason
  run.report = report or run.report
  redraw()
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'AgentLspRunStop',
    modeline = false,
    data = { run_id = run.id, stop_reason = run.stop_reason, report = run.report },
  })
end

--- LspProgress callback: the token of an agent run's progress is its run id.
---@param ev { data: { client_id: integer, params: lsp.ProgressParams } }
function M.on_progress(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if not client or client.name ~= 'agent_lsp' then
    return
  end
  local token, value = ev.data.params.token, ev.data.params.value
  if type(token) ~= 'string' or type(value) ~= 'table' then
    return
  end
  local run = M.ensure(token, client.id)
  if value.kind == 'begin' then
    run.has_progress = true
    -- the server's titles read `Agent: <task>`; in the plugin's lists the task is enough
    run.title = value.title and value.title:gsub('^Agent: ', '') or run.title
    run.message = value.message or value.title
  elseif value.kind == 'report' then
    run.message = value.message or run.message
    run.percentage = value.percentage or run.percentage
  elseif value.kind == 'end' then
    run.message = value.message or run.message
    -- the `stop` stream event carries the report and finishes the run; the progress end
    -- alone is enough for a server that streams nothing
    run.progress_ended = true
    vim.defer_fn(function()
      if not run.done then
        M.finish(run)
      end
    end, 2000)
  end
  redraw()
end

--- Records the main agent's `usage` event: the context fill and cost of the run so far.
---@param run agent_lsp.Run
---@param ev table the `usage` stream event
function M.on_usage(run, ev)
  if ev.agentId ~= nil and ev.agentId ~= 'main' then
    return -- a sub-agent's calls: its context is not the run's
  end
  if type(ev.text) == 'string' and ev.text ~= '' then
    run.usage = ev.text
    redraw()
  end
end

--- The progress message without the usage suffix the server appends (` · ctx 31k/128k …`).
---@param message string
---@return string
local function activity(message)
  return (message:gsub(' · ctx %d+k/%d+k.*$', ''))
end

--- Statusline component for the newest running run, `''` when idle: `agent: ctx 31k/128k ·
--- $0.012` once the first model call reported its usage (before that, what the run does).
--- With `opts.activity`, what the run does now comes first: `agent: turn 2: edit_file a.py ·
--- ctx 31k/128k · $0.012`.
---@param opts? { activity?: boolean }
---@return string
function M.statusline(opts)
  local running = M.running()
  local run = running[1]
  if not run then
    return ''
  end
  local doing = activity(run.message or run.title)
  local text = doing
  if run.usage then
    text = (opts and opts.activity) and (doing .. ' · ' .. run.usage) or run.usage
  end
  -- '%' starts a statusline item
  text = text:gsub('[\r\n]+', ' '):gsub('%%', '%%%%')
  if #running > 1 then
    text = ('%s (+%d)'):format(text, #running - 1)
  end
  return 'agent: ' .. text
end

return M
