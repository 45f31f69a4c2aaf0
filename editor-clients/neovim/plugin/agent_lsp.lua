--- User commands and autocommands of agent-lsp; the LSP config itself is lsp/agent_lsp.lua.

if vim.g.loaded_agent_lsp then
  return
end
vim.g.loaded_agent_lsp = true

if vim.fn.has('nvim-0.11') == 0 then
  vim.api.nvim_echo({ { 'agent-lsp needs Neovim >= 0.11', 'ErrorMsg' } }, true, {})
  return
end

local function commands()
  return require('agent_lsp.commands')
end

vim.api.nvim_create_user_command('AgentRun', function(opts)
  commands().run(opts.args)
end, { nargs = '*', desc = 'agent-lsp: run a task (continues the session)' })

vim.api.nvim_create_user_command('AgentNew', function(opts)
  commands().new(opts.args)
end, { nargs = '*', desc = 'agent-lsp: start a new session (and run a task in it)' })

vim.api.nvim_create_user_command('AgentAsk', function(opts)
  commands().ask(opts.args, { range = opts.range, line1 = opts.line1, line2 = opts.line2 })
end, { nargs = '*', range = true, desc = 'agent-lsp: ask about the selection' })

vim.api.nvim_create_user_command('AgentCancel', function(opts)
  commands().cancel(opts.args, opts.bang)
end, {
  nargs = '?',
  bang = true,
  complete = function()
    return commands().complete_runs()
  end,
  desc = 'agent-lsp: cancel the newest running run (! for all)',
})

vim.api.nvim_create_user_command('AgentCommand', function(opts)
  commands().command(opts.args)
end, { nargs = '*', desc = "agent-lsp: run one of your prompt files (/name args); none: pick one" })

vim.api.nvim_create_user_command('AgentPlan', function(opts)
  commands().plan(opts.args)
end, { nargs = '*', desc = 'agent-lsp: plan a task (read-only tools; no change is made)' })

vim.api.nvim_create_user_command('AgentCarryOut', function()
  commands().carry_out()
end, { nargs = 0, desc = 'agent-lsp: carry out the last plan (a follow-up with every tool)' })

vim.api.nvim_create_user_command('AgentRewind', function(opts)
  require('agent_lsp.rewind').pick(opts.args)
end, {
  nargs = '?',
  complete = function()
    return require('agent_lsp.rewind').complete()
  end,
  desc = 'agent-lsp: put back the files a run changed',
})

vim.api.nvim_create_user_command('AgentSessions', function()
  require('agent_lsp.sessions').pick_session()
end, { nargs = 0, desc = 'agent-lsp: resume a past session of this workspace' })

vim.api.nvim_create_user_command('AgentModel', function(opts)
  require('agent_lsp.sessions').pick_model(opts.args)
end, { nargs = '?', desc = 'agent-lsp: pick the model of the next runs' })

vim.api.nvim_create_user_command('AgentProcesses', function()
  require('agent_lsp.processes').pick()
end, { nargs = 0, desc = "agent-lsp: the runs' background processes; the one picked is stopped" })


vim.api.nvim_create_user_command('AgentChat', function(opts)
  require('agent_lsp.chat').open(opts.args)
end, { nargs = '?', desc = 'agent-lsp: open the chat of the session (or of the session named)' })

vim.api.nvim_create_user_command('AgentQueue', function(opts)
  require('agent_lsp.chat').queue(opts.args)
end, { nargs = '+', desc = "agent-lsp: queue a prompt after the chat's running run" })

vim.api.nvim_create_user_command('AgentFork', function()
  require('agent_lsp.chat').fork()
end, { nargs = 0, desc = 'agent-lsp: fork the chat at the prompt under the cursor (to edit it)' })

vim.api.nvim_create_user_command('AgentStop', function()
  require('agent_lsp.chat').stop()
end, { nargs = 0, desc = "agent-lsp: cancel the chat's queued runs, then its running run" })

vim.api.nvim_create_user_command('AgentApprove', function()
  require('agent_lsp.approval').approve()
end, { nargs = 0, desc = 'agent-lsp: answer the waiting approval with a pick (its diff beside it)' })

local splits = { 'right', 'left', 'above', 'below', 'tab' }

vim.api.nvim_create_user_command('AgentStream', function(opts)
  if opts.args ~= '' and not vim.tbl_contains(splits, opts.args) then
    vim.notify('agent-lsp: :AgentStream takes one of ' .. table.concat(splits, ', '), vim.log.levels.ERROR)
    return
  end
  require('agent_lsp.stream').open({ enter = true, split = opts.args ~= '' and opts.args or nil })
end, {
  nargs = '?',
  complete = function()
    return splits
  end,
  desc = 'agent-lsp: show the stream buffer',
})

local group = vim.api.nvim_create_augroup('agent_lsp', { clear = true })
vim.api.nvim_create_autocmd('LspProgress', {
  group = group,
  callback = function(ev)
    require('agent_lsp.runs').on_progress(ev)
  end,
})
-- agentLsp/diagnostics with afterVersion waits for the diagnostics of the edited version
vim.api.nvim_create_autocmd('DiagnosticChanged', {
  group = group,
  callback = function(ev)
    require('agent_lsp.diagnostics').on_changed(ev.buf)
  end,
})
