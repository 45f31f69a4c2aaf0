--- The user commands: start runs (:AgentRun, :AgentAsk, :AgentPlan, :AgentCarryOut), cancel
--- them, new sessions.

local workspace = require('agent_lsp.workspace')
local runs = require('agent_lsp.runs')

local M = {}

local function notify(msg, level)
  vim.notify('agent-lsp: ' .. msg, level or vim.log.levels.INFO)
end

---@param text string
---@return string
local function one_line(text)
  local line = vim.trim((text:gsub('%s+', ' ')))
  if #line > 60 then
    line = line:sub(1, 57) .. '...'
  end
  return line
end

--- One of `prompt`, `question` (with textDocument and range: the server quotes the selection) or
--- `carryOutPlan` (the server's own follow-up): the server words the prompt (CONTRACT Decision 47).
---@class agent_lsp.RunArgs
---@field prompt? string
---@field question? string
---@field carryOutPlan? boolean
---@field textDocument? { uri: string }
---@field range? lsp.Range
---@field sessionId? string
---@field model? string
---@field mode? 'plan'

---@class agent_lsp.StartOpts
---@field bufnr? integer buffer whose pending changes are flushed to the server first
---@field title? string
---@field new_session? boolean start a fresh conversation
---@field on_reply? fun(result: table?) called with the reply (nil when refused); a queued
---run (`queued: true`) is not tracked as running and the stream window stays as it is
---@field quiet? boolean do not auto-open the stream window (the chat shows the run)

--- Sends `agentLsp.run` and tracks the run. The workspace's last session continues, unless it
--- is still busy with a run (then a parallel session starts) or `new_session` is set; the
--- model picked with :AgentModel goes along.
---@param client vim.lsp.Client
---@param args agent_lsp.RunArgs
---@param opts? agent_lsp.StartOpts
function M.start(client, args, opts)
  opts = opts or {}
  local root = workspace.client_root(client)
  if args.sessionId == nil and not opts.new_session then
    local session = workspace.session(root)
    local busy = session
      and vim.iter(runs.running()):any(function(run)
        return run.session_id == session
      end)
    if session and not busy then
      args.sessionId = session
    end
  end
  if args.model == nil then
    args.model = workspace.model(root)
  end
  local title = one_line(opts.title or args.prompt or args.question or '')
  local bufnr = opts.bufnr
  if bufnr and not vim.lsp.buf_is_attached(bufnr, client.id) then
    bufnr = nil
  end
  client:request('workspace/executeCommand', {
    command = 'agentLsp.run',
    arguments = { args },
  }, function(err, result)
    local on_reply = opts.on_reply or function(_) end
    if err then
      notify('run refused: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return on_reply(nil)
    end
    if type(result) ~= 'table' or not result.runId then
      notify('unexpected reply to agentLsp.run: ' .. vim.inspect(result), vim.log.levels.ERROR)
      return on_reply(nil)
    end
    if result.queued then
      return on_reply(result) -- it starts when its session's run ends
    end
    local run = runs.ensure(result.runId, client.id)
    run.session_id = result.sessionId
    run.root = root
    run.mode = args.mode
    if not run.has_progress then
      run.title = title
    end
    if result.sessionId then
      workspace.set_session(root, result.sessionId)
    end
    local stream = require('agent_lsp.stream')
    stream.begin_run(result.runId, title)
    if require('agent_lsp.config').get().stream.auto_open and not opts.quiet then
      stream.open({ enter = false })
    end
    on_reply(result)
  end, bufnr)
end

--- Runs `fn(client, bufnr)` once the buffer's agent-lsp client is ready.
---@param fn fun(client: vim.lsp.Client, bufnr: integer)
local function with_client(fn)
  local bufnr = vim.api.nvim_get_current_buf()
  workspace.with_client(bufnr, function(client)
    fn(client, bufnr)
  end)
end

---@param bufnr integer
---@return { uri: string }?
local function text_document(bufnr)
  if vim.bo[bufnr].buftype ~= '' or vim.api.nvim_buf_get_name(bufnr) == '' then
    return nil
  end
  return { uri = vim.uri_from_bufnr(bufnr) }
end

--- Asks for the text with vim.ui.input when the command had no argument.
---@param given string
---@param prompt string
---@param cb fun(text: string)
local function with_text(given, prompt, cb)
  if vim.trim(given) ~= '' then
    cb(given)
    return
  end
  vim.ui.input({ prompt = prompt }, function(text)
    if text and vim.trim(text) ~= '' then
      cb(text)
    end
  end)
end

--- :AgentRun {task} (and :AgentNew {task}, which starts a fresh session)
---@param task string
---@param new_session? boolean
function M.run(task, new_session)
  with_text(task, 'Agent task: ', function(text)
    with_client(function(client, bufnr)
      M.start(client, { prompt = text, textDocument = text_document(bufnr) }, {
        bufnr = bufnr,
        new_session = new_session,
      })
    end)
  end)
end

--- :AgentCommand [name args]: runs one of the user's prompt files (`.claude/commands/*.md`,
--- skills) as `/name args`; without an argument, picks one from `agentLsp.commands` and asks
--- for its arguments (the command's argument hint as the prompt).
---@param given string
function M.command(given)
  local typed = vim.trim(given or '')
  if typed ~= '' then
    M.run(typed:sub(1, 1) == '/' and typed or ('/' .. typed))
    return
  end
  with_client(function(client, bufnr)
    workspace.execute(client, 'agentLsp.commands', nil, function(items)
      items = type(items) == 'table' and items or {}
      if #items == 0 then
        notify('no commands: add prompt files to .claude/commands/ or ~/.claude/commands/', vim.log.levels.WARN)
        return
      end
      vim.ui.select(items, {
        prompt = 'Run which command?',
        kind = 'agent_lsp_command',
        format_item = function(item)
          local hint = type(item.argumentHint) == 'string' and (' ' .. item.argumentHint) or ''
          return ('/%s%s  %s (%s)'):format(item.name, hint, one_line(item.description or ''), item.source)
        end,
      }, function(item)
        if not item then
          return
        end
        local hint = type(item.argumentHint) == 'string' and item.argumentHint or 'arguments'
        vim.ui.input({ prompt = ('/%s %s: '):format(item.name, hint) }, function(args)
          if args == nil then
            return
          end
          local prompt = '/' .. item.name .. (vim.trim(args) ~= '' and (' ' .. vim.trim(args)) or '')
          M.start(client, { prompt = prompt, textDocument = text_document(bufnr) }, { bufnr = bufnr })
        end)
      end)
    end)
  end)
end

--- :AgentAsk {question}, on a range or visual selection: the question and the range go along
--- and the server quotes the selected text it holds (no selection: the question is the prompt).
---@param question string
---@param cmd_opts? { range: integer, line1: integer, line2: integer }
function M.ask(question, cmd_opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local selection = require('agent_lsp.selection')
  -- read the selection now: it is gone once the question prompt takes over
  local sel = selection.get(bufnr, cmd_opts or { range = 0 })
  with_text(question, 'Ask the agent: ', function(text)
    workspace.with_client(bufnr, function(client)
      local args = { prompt = text, textDocument = text_document(bufnr) }
      if sel and args.textDocument then
        args.range = selection.to_lsp(bufnr, sel, client.offset_encoding)
        args.prompt, args.question = nil, text
      end
      M.start(client, args, { bufnr = bufnr, title = text })
    end)
  end)
end

--- :AgentPlan {task}: a plan run (read-only tools, a numbered plan as the answer) in this
--- workspace's session; :AgentCarryOut then carries it out.
---@param task string
function M.plan(task)
  with_text(task, 'Plan a task: ', function(text)
    with_client(function(client, bufnr)
      M.start(client, { prompt = text, textDocument = text_document(bufnr), mode = 'plan' }, {
        bufnr = bufnr,
        title = 'plan: ' .. text,
      })
    end)
  end)
end

--- :AgentCarryOut: a follow-up run, with every tool, in the session of the workspace's last
--- finished plan.
function M.carry_out()
  with_client(function(client, bufnr)
    local plan = runs.last_plan(workspace.client_root(client))
    if not plan then
      notify('no finished plan in this workspace: make one with :AgentPlan {task}', vim.log.levels.WARN)
      return
    end
    M.start(client, { carryOutPlan = true, sessionId = plan.session_id }, {
      bufnr = bufnr,
      title = 'carry out: ' .. plan.title:gsub('^plan: ', ''),
    })
  end)
end

---@param run agent_lsp.Run
local function cancel_run(run)
  local client = vim.lsp.get_client_by_id(run.client_id)
  if not client then
    runs.finish(run, 'cancelled')
    return
  end
  -- Decision 74: the session's queued runs go first (newest first), then the running one
  local chat = package.loaded['agent_lsp.chat']
  if chat and run.session_id then
    chat.cancel_queued(client, run.session_id)
  end
  local function by_command()
    client:request('workspace/executeCommand', {
      command = 'agentLsp.cancel',
      arguments = { { runId = run.id } },
    }, function(err, result)
      if err then
        notify('cancel failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      elseif result == false and not run.done then
        runs.finish(run) -- the server knows no such running run
      end
    end)
  end
  if run.has_progress and not run.progress_ended then
    -- Neovim shows progress without a cancel button: send the cancel the button would send
    client:notify('window/workDoneProgress/cancel', { token = run.id })
    vim.defer_fn(function()
      if not run.done then
        by_command()
      end
    end, 1500)
  else
    by_command()
  end
end

---@param run agent_lsp.Run
---@return string
local function describe(run)
  return ('%s  %s%s'):format(run.id:sub(1, 8), run.title, run.message and ('  (' .. run.message .. ')') or '')
end

--- :AgentCancel[!] [runId]: the newest running run, a picker when several run, all with `!`.
---@param run_id? string
---@param all? boolean
function M.cancel(run_id, all)
  local running = runs.running()
  if run_id and run_id ~= '' then
    local run = runs.get(run_id)
      or vim.iter(running):find(function(r)
        return vim.startswith(r.id, run_id)
      end)
    if not run or run.done then
      notify('no running run ' .. run_id, vim.log.levels.WARN)
      return
    end
    cancel_run(run)
    return
  end
  if #running == 0 then
    notify('no agent run is running', vim.log.levels.WARN)
    return
  end
  if all then
    vim.iter(running):each(cancel_run)
    return
  end
  if #running == 1 then
    cancel_run(running[1])
    return
  end
  vim.ui.select(running, { prompt = 'Cancel which agent run?', format_item = describe }, function(run)
    if run then
      cancel_run(run)
    end
  end)
end

--- Completion for :AgentCancel: ids of running runs.
---@return string[]
function M.complete_runs()
  return vim.tbl_map(function(run)
    return run.id
  end, runs.running())
end

--- :AgentNew [task]: forget this workspace's session; run `task` in a fresh one if given.
---@param task string
function M.new(task)
  if vim.trim(task) ~= '' then
    M.run(task, true)
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local client = workspace.find_client(bufnr)
  local root = client and workspace.client_root(client) or workspace.root(bufnr)
  workspace.set_session(root, nil)
  notify('the next run starts a new session')
end

return M
