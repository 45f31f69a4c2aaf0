--- :AgentRewind: put back the files a run of this Neovim changed (`agentLsp.rewind`), say what
--- was restored, what conflicted and what could not be, and offer to force the conflicts.

local runs = require('agent_lsp.runs')
local workspace = require('agent_lsp.workspace')

local M = {}

local function notify(msg, level)
  vim.notify('agent-lsp: ' .. msg, level or vim.log.levels.INFO)
end

---@param uri string
---@return string
local function shown(uri)
  local ok, fname = pcall(vim.uri_to_fname, uri)
  return ok and vim.fn.fnamemodify(fname, ':~:.') or uri
end

---@param uris string[]
---@return string
local function file_list(uris)
  local names = vim.tbl_map(shown, uris)
  if #names > 4 then
    names = vim.list_extend(vim.list_slice(names, 1, 3), { ('and %d more'):format(#names - 3) })
  end
  return table.concat(names, ', ')
end

--- One line of the pick: id, what the run was about, its files.
---@param run agent_lsp.Run
---@return string
function M.describe(run)
  local files = run.report.editedFiles or {}
  return ('%s  %s  ·  %d file%s: %s%s'):format(
    run.id:sub(1, 10),
    run.title,
    #files,
    #files == 1 and '' or 's',
    file_list(files),
    run.rewound and '  (rewound)' or run.report.rewindable == false and '  (nothing restorable)' or ''
  )
end

--- The outcome as lines: restored, conflicts, not restorable.
---@param result table `{rewindId, restored, conflicts, notRestorable}`
---@return string message
---@return integer level
function M.summary(result)
  local parts = {}
  local restored = result.restored or {}
  parts[#parts + 1] = #restored > 0 and ('restored %s'):format(file_list(restored)) or 'restored nothing'
  for _, c in ipairs(result.conflicts or {}) do
    parts[#parts + 1] = ('conflict: %s (%s)'):format(shown(c.uri), c.reason)
  end
  for _, n in ipairs(result.notRestorable or {}) do
    parts[#parts + 1] = ('not restorable: %s (%s)'):format(shown(n.uri), n.reason)
  end
  local level = vim.log.levels.INFO
  if #(result.conflicts or {}) > 0 or #(result.notRestorable or {}) > 0 then
    level = vim.log.levels.WARN
  end
  return table.concat(parts, '\n'), level
end

--- Tracks the rewind itself as a run with edits: rewinding it puts the files back.
---@param client_id integer
---@param result table
---@param title string
local function remember(client_id, result, title)
  if type(result.rewindId) ~= 'string' or #(result.restored or {}) == 0 then
    return
  end
  local record = runs.ensure(result.rewindId, client_id)
  record.kind = 'rewind'
  record.title = 'rewind of ' .. title
  record.done = true
  record.report = { editedFiles = result.restored, rewindable = true }
end

--- Sends `agentLsp.rewind` and reports; on conflicts, asks whether to force them.
---@param client vim.lsp.Client
---@param run_id string
---@param title string
---@param force? boolean
function M.rewind(client, run_id, title, force)
  workspace.execute(client, 'agentLsp.rewind', { runId = run_id, force = force or nil }, function(result)
    result = type(result) == 'table' and result or {}
    remember(client.id, result, title)
    local run = runs.get(run_id)
    if run and #(result.restored or {}) > 0 then
      run.rewound = true
    end
    local message, level = M.summary(result)
    notify(('rewind of %s: %s'):format(title, message), level)
    vim.api.nvim_exec_autocmds('User', {
      pattern = 'AgentLspRewind',
      modeline = false,
      data = { run_id = run_id, result = result },
    })
    local conflicts = result.conflicts or {}
    if #conflicts == 0 or force then
      return
    end
    vim.ui.select({ 'Force', 'Keep them' }, {
      prompt = ('%d file%s changed since the run (%s). Force the rewind, overwriting %s?'):format(
        #conflicts,
        #conflicts == 1 and '' or 's',
        file_list(vim.tbl_map(function(c)
          return c.uri
        end, conflicts)),
        #conflicts == 1 and 'it' or 'them'
      ),
      kind = 'agent_lsp_rewind_force',
    }, function(choice)
      if choice == 'Force' then
        M.rewind(client, run_id, title, true)
      end
    end)
  end)
end

--- :AgentRewind [runId]: a pick of the runs of this Neovim that changed files (newest first).
---@param run_id? string
function M.pick(run_id)
  local list = runs.with_edits()
  if run_id and run_id ~= '' then
    local run = runs.get(run_id) or vim.iter(list):find(function(r)
      return vim.startswith(r.id, run_id)
    end)
    local client = run and vim.lsp.get_client_by_id(run.client_id)
    if client then
      M.rewind(client, run.id, run.title)
    else
      -- a run of an earlier Neovim: the server of this workspace knows its checkpoint
      workspace.with_current(function(c)
        M.rewind(c, run_id, run_id)
      end)
    end
    return
  end
  if #list == 0 then
    notify('no run of this Neovim changed files (rewind an older one by id: :AgentRewind {runId})', vim.log.levels.WARN)
    return
  end
  vim.ui.select(list, { prompt = 'Rewind which agent run?', kind = 'agent_lsp_rewind', format_item = M.describe }, function(run)
    if not run then
      return
    end
    local client = vim.lsp.get_client_by_id(run.client_id)
    if not client then
      notify('the server of that run is gone; its checkpoint stays: :AgentRewind ' .. run.id, vim.log.levels.ERROR)
      return
    end
    M.rewind(client, run.id, run.title)
  end)
end

--- Client-side `agentLsp.rewind` (the code action "Agent: rewind last run (N files)"): the
--- same call, with its outcome shown.
---@param command lsp.Command
---@param ctx { bufnr: integer, client_id: integer }
function M.run_command(command, ctx)
  local args = (command.arguments or {})[1] or {}
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client and type(args.runId) == 'string' then
    local run = runs.get(args.runId)
    M.rewind(client, args.runId, run and run.title or args.runId, args.force)
  end
end

--- Completion for :AgentRewind: ids of runs with edits.
---@return string[]
function M.complete()
  return vim.tbl_map(function(run)
    return run.id
  end, runs.with_edits())
end

return M
