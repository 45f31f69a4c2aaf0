--- agent-lsp as a plain vim.lsp.Config, so `vim.lsp.enable('agent_lsp')` works with no setup().
---
--- Read when the config is first resolved: set `vim.g.agent_lsp_cmd` / `vim.g.agent_lsp_settings`
--- (or call `require('agent_lsp').setup()`) before `vim.lsp.enable('agent_lsp')`.

local options = require('agent_lsp.config')
local handlers = require('agent_lsp.handlers')
local approval = require('agent_lsp.approval')
local diagnostics = require('agent_lsp.diagnostics')
local code_intel = require('agent_lsp.code_intel')

local opts = options.get()
options.resolved = opts -- what servers started from now on get (setup() compares with it)

---@type vim.lsp.Config
return {
  cmd = opts.cmd,
  -- no filetypes: the agent works on any file of the workspace
  root_markers = { '.git', 'AGENTS.md' },
  root_dir = function(bufnr, on_dir)
    on_dir(require('agent_lsp.workspace').root(bufnr))
  end,
  init_options = options.to_json(opts.settings),
  settings = { agentLsp = options.workspace_settings(opts.settings) },
  -- merged into Neovim's own capabilities: we answer agentLsp/diagnostics from vim.diagnostic
  -- and agentLsp/codeIntel from the buffer's other language servers
  capabilities = { experimental = { agentLsp = { diagnostics = true, codeIntel = true } } },
  handlers = {
    ['agentLsp/stream'] = handlers.stream,
    ['agentLsp/diagnostics'] = diagnostics.handler,
    ['agentLsp/codeIntel'] = code_intel.handler,
    ['window/showMessageRequest'] = approval.show_message_request,
    ['workspace/applyEdit'] = handlers.apply_edit,
  },
  on_exit = handlers.on_exit,
  commands = {
    -- code actions ("Ask agent about selection", "Agent: fix", ...) run through here so the
    -- plugin tracks their runs and asks for the question of an `ask: true` action
    ['agentLsp.run'] = handlers.run_command,
    -- "Agent: rewind last run (N files)": run here so its outcome is shown
    ['agentLsp.rewind'] = function(command, ctx)
      require('agent_lsp.rewind').run_command(command, ctx)
    end,
  },
}
