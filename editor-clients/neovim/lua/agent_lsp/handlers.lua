--- LSP handlers of the agent_lsp config: the stream, agent edits and the run command (approvals:
--- approval.lua, editor diagnostics: diagnostics.lua).

local M = {}

local function notify(msg, level)
  vim.notify('agent-lsp: ' .. msg, level or vim.log.levels.INFO)
end

local stop_levels = {
  done = vim.log.levels.INFO,
  max_turns = vim.log.levels.WARN,
  cancelled = vim.log.levels.WARN,
  fatal = vim.log.levels.ERROR,
}

--- `agentLsp/stream` notification: render the event, keep the run registry current.
---@param params table `{runId, seq, kind, text, ...}`
---@param ctx lsp.HandlerContext
function M.stream(_, params, ctx)
  if type(params) ~= 'table' or params.runId == nil then
    return
  end
  local runs = require('agent_lsp.runs')
  local run = runs.ensure(tostring(params.runId), ctx.client_id)
  if #run.events < 20000 then
    table.insert(run.events, params) -- the chat opened mid-run shows them (chat.lua)
  end
  require('agent_lsp.stream').add(params)
  local chat = package.loaded['agent_lsp.chat']
  if chat then
    chat.on_stream(params)
  end
  if params.kind == 'status' and type(params.text) == 'string' and not run.has_progress then
    -- a client without work-done progress gets the progress lines as `status` events
    run.message = params.text
    pcall(vim.cmd.redrawstatus, { bang = true })
  end
  if params.kind == 'approval' then
    require('agent_lsp.approval').on_event(params)
    if params.state == 'withdrawn' then
      -- an approval left unanswered too long: a picker still open for it no longer counts
      notify('approval withdrawn (counted as a denial): ' .. tostring(params.text or params.tool), vim.log.levels.WARN)
    end
  elseif params.kind == 'usage' then
    runs.on_usage(run, params)
  elseif params.kind == 'process' then
    require('agent_lsp.processes').on_event(params, ctx.client_id)
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'AgentLspStream', modeline = false, data = params })
  if params.kind == 'stop' then
    local report = type(params.report) == 'table' and params.report or {}
    local reason = report.stopReason
    runs.finish(run, reason, report)
    require('agent_lsp.processes').on_run_stop(run.id)
    local summary = report.error or report.summary or params.text or ''
    notify(('run %s: %s'):format(reason or 'stopped', summary), stop_levels[reason])
    if run.mode == 'plan' and reason == 'done' then
      notify('the plan is ready (in the stream buffer): :AgentCarryOut carries it out')
    end
  end
end

--- Loaded buffer for a file URI, without creating one.
---@param uri string
---@return integer?
local function loaded_buf(uri)
  local ok, fname = pcall(vim.uri_to_fname, uri)
  if not ok then
    return nil
  end
  fname = vim.fs.normalize(fname)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.fs.normalize(vim.api.nvim_buf_get_name(buf)) == fname then
      return buf
    end
  end
  return nil
end

--- URIs of the documents a WorkspaceEdit changes.
---@param edit lsp.WorkspaceEdit
---@return string[]
local function touched_uris(edit)
  local uris, seen = {}, {}
  local function add(uri)
    if uri and not seen[uri] then
      seen[uri] = true
      uris[#uris + 1] = uri
    end
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument then
      add(change.textDocument.uri)
    elseif change.kind == 'create' then
      add(change.uri)
    elseif change.kind == 'rename' then
      add(change.newUri)
    end
  end
  for uri in pairs(edit.changes or {}) do
    add(uri)
  end
  return uris
end

--- Neovim's own handler skips an edit for a newer buffer version yet answers `applied: true`;
--- the contract wants a stale edit refused, so the model learns it and reads again.
---@param edit lsp.WorkspaceEdit
---@return string? reason
local function stale_reason(edit)
  for _, change in ipairs(edit.documentChanges or {}) do
    local doc = change.textDocument
    if doc and type(doc.version) == 'number' and doc.version > 0 then
      local buf = loaded_buf(doc.uri)
      local current = buf and vim.lsp.util.buf_versions[buf]
      if current and current > doc.version then
        return ('%s changed in the editor (version %d, the edit was made for version %d)'):format(
          vim.uri_to_fname(doc.uri),
          current,
          doc.version
        )
      end
    end
  end
  return nil
end

--- `workspace/applyEdit`: Neovim's default, then write the buffers the edit touched
--- (option `save_after_edit`), so the files on disk match what the agent did; a buffer the
--- user had unsaved changes in stays unsaved (Decision 81: the server tells the model).
---@param params lsp.ApplyWorkspaceEditParams
---@param ctx lsp.HandlerContext
function M.apply_edit(err, params, ctx)
  local stale = params and params.edit and stale_reason(params.edit)
  if stale then
    return { applied = false, failureReason = stale }
  end
  local modified_before = {}
  for _, uri in ipairs(params and params.edit and touched_uris(params.edit) or {}) do
    local buf = loaded_buf(uri)
    if buf and vim.bo[buf].modified then
      modified_before[buf] = true
    end
  end
  -- The server waits for the buffers' (debounced) didChange itself: no private flush here.
  local result = vim.lsp.handlers['workspace/applyEdit'](err, params, ctx)
  if
    type(result) == 'table'
    and result.applied
    and require('agent_lsp.config').get().save_after_edit
  then
    for _, uri in ipairs(touched_uris(params.edit)) do
      local buf = loaded_buf(uri)
      if buf and vim.bo[buf].modified and vim.bo[buf].buftype == '' and not modified_before[buf] then
        local ok, write_err = pcall(vim.api.nvim_buf_call, buf, function()
          -- `!`: the agent's edit wins over a changed-on-disk prompt that would block
          vim.cmd('silent keepalt update!')
        end)
        if not ok then
          notify(('could not write %s: %s'):format(vim.api.nvim_buf_get_name(buf), write_err), vim.log.levels.ERROR)
        end
      end
    end
  end
  return result
end

--- Client-side `agentLsp.run` (code actions): asks the question of an `ask: true` action
--- first (sent as `question` with the action's range), then starts the run like `:AgentRun` does.
---@param command lsp.Command
---@param ctx { bufnr: integer, client_id: integer }
function M.run_command(command, ctx)
  local args = vim.deepcopy((command.arguments or {})[1] or {})
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return
  end
  local commands = require('agent_lsp.commands')
  if args.ask then
    args.ask = nil
    vim.ui.input({ prompt = 'Ask the agent: ' }, function(question)
      if not question or vim.trim(question) == '' then
        return
      end
      if args.textDocument and args.range then
        -- the server words the prompt about the selection (CONTRACT Decision 47)
        args.prompt, args.selectionInPrompt, args.question = nil, nil, question
      else
        args.prompt = question .. '\n\n' .. (args.prompt or '')
      end
      commands.start(client, args, { bufnr = ctx.bufnr, title = question })
    end)
    return
  end
  commands.start(client, args, { bufnr = ctx.bufnr, title = command.title })
end

--- on_exit of the client: its runs end with it.
---@param client_id integer
function M.on_exit(code, signal, client_id)
  vim.schedule(function()
    local runs = require('agent_lsp.runs')
    for _, run in ipairs(runs.running()) do
      if run.client_id == client_id then
        run.message = ('server exited (code %s, signal %s)'):format(code, signal)
        runs.finish(run, 'fatal')
      end
    end
  end)
end

return M
