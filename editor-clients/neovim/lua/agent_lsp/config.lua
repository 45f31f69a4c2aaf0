--- Options of the Neovim client: defaults, sources (setup(), vim.g) and validation.

---@class agent_lsp.StreamOptions
---@field auto_open? boolean Open the stream window when a run starts (default true).
---@field split? 'right'|'left'|'above'|'below'|'tab' Where `:AgentStream` and auto-open put the window (default 'right').

---@class agent_lsp.Options
---@field cmd? string[] Command that starts the server (default `{'agent-lsp'}`; `vim.g.agent_lsp_cmd` wins).
---@field settings? table Server settings, the nested camelCase object of the contract (`vim.g.agent_lsp_settings` wins).
---@field save_after_edit? boolean Write the buffers an agent edit touched right after applying it (default true).
---@field stream? agent_lsp.StreamOptions

local M = {}

---@type agent_lsp.Options
M.defaults = {
  cmd = { 'agent-lsp' },
  settings = {},
  save_after_edit = true,
  stream = {
    auto_open = true,
    split = 'right',
  },
}

-- Settings the server only takes from the user's own configuration
-- (initializationOptions), never from workspace/configuration (CONTRACT.md, trust boundary).
M.trusted_only_keys = {
  'baseUrl',
  'apiKeyEnv',
  'transcriptDir',
  'memoryFiles',
  'mcpServers',
  'approval',
  'mcp',
  'sandbox',
  'budget',
  'pricing',
  'telemetry',
  'hooks',
  'languageServers',
  'modelAliases',
  'permissions',
}

-- Known top-level server settings (CONTRACT.md "Settings"); others are ignored by the server.
M.server_setting_keys = {
  'model',
  'baseUrl',
  'apiKeyEnv',
  'maxTurns',
  'delegateMaxTurns',
  'requestTimeout',
  'contextWindow',
  'toolOutputLimit',
  'approval',
  'memoryFiles',
  'transcriptDir',
  'pricing',
  'mcpServers',
  'mcp',
  'sandbox',
  'budget',
  'telemetry',
  'hooks',
  'languageServers',
  'modelAliases',
  'permissions',
}

local splits = { right = true, left = true, above = true, below = true, tab = true }

---@type agent_lsp.Options?
local from_setup = nil

--- The options the `agent_lsp` LSP config was last resolved with (servers run with these).
---@type agent_lsp.Options?
M.resolved = nil

---@param v any
---@return boolean
local function is_string_list(v)
  return vim.islist(v) and #v > 0 and vim.iter(v):all(function(s)
    return type(s) == 'string'
  end)
end

--- Validates options; returns `true` or `false` and a message naming the option and the value.
---@param opts table
---@return boolean ok
---@return string? err
function M.validate(opts)
  local ok, err = pcall(function()
    vim.validate('agent_lsp', opts, 'table')
    vim.validate('cmd', opts.cmd, is_string_list, true, 'non-empty list of strings')
    vim.validate('settings', opts.settings, 'table', true)
    vim.validate('save_after_edit', opts.save_after_edit, 'boolean', true)
    vim.validate('stream', opts.stream, 'table', true)
    if type(opts.stream) == 'table' then
      vim.validate('stream.auto_open', opts.stream.auto_open, 'boolean', true)
      vim.validate('stream.split', opts.stream.split, function(v)
        return splits[v] ~= nil
      end, true, "one of 'right', 'left', 'above', 'below', 'tab'")
    end
    local known = { cmd = true, settings = true, save_after_edit = true, stream = true }
    for key in pairs(opts) do
      if not known[key] then
        error(('unknown option %s'):format(vim.inspect(key)), 0)
      end
    end
  end)
  if ok then
    return true
  end
  -- vim.validate messages carry a file:line prefix when raised from inside it
  return false, (tostring(err):gsub('^.-:%d+: ', ''))
end

--- Raw options merged from defaults, `setup()`, `vim.g.agent_lsp` and the flat globals.
---@return table
local function merged()
  local user = vim.g.agent_lsp
  local opts = vim.tbl_deep_extend(
    'force',
    {},
    from_setup or {},
    type(user) == 'table' and user or {}
  )
  if vim.g.agent_lsp_cmd ~= nil then
    opts.cmd = vim.g.agent_lsp_cmd
  end
  if type(opts.cmd) == 'string' then
    opts.cmd = { opts.cmd }
  end
  if vim.g.agent_lsp_settings ~= nil then
    opts.settings = vim.g.agent_lsp_settings
  end
  if user ~= nil and type(user) ~= 'table' then
    opts = user -- let validate() report it
  end
  return opts
end

--- Checks the user's options without falling back to defaults (used by :checkhealth).
---@return boolean ok
---@return string? err
function M.check()
  return M.validate(merged())
end

local reported = {} ---@type table<string, true>

--- The effective options. An invalid user value is reported once (a warning: the plugin goes
--- on) and replaced by the defaults.
---@param quiet? boolean do not report (:checkhealth reports it itself)
---@return agent_lsp.Options
function M.get(quiet)
  local opts = merged()
  local ok, err = M.validate(opts)
  if not ok then
    if not quiet and not reported[err] then
      reported[err] = true
      vim.notify(('agent-lsp: invalid option: %s; using the defaults'):format(err), vim.log.levels.WARN)
    end
    return vim.deepcopy(M.defaults)
  end
  return vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
end

--- Stores options given to `require('agent_lsp').setup()`; `nil` keeps the earlier ones (so
--- `setup()` just applies a change of `vim.g.agent_lsp_settings`).
---@param opts agent_lsp.Options?
function M.set(opts)
  opts = opts or from_setup or {}
  local ok, err = M.validate(opts)
  if not ok then
    vim.notify(('agent-lsp: invalid option: %s'):format(err), vim.log.levels.ERROR)
    return false
  end
  from_setup = opts
  return true
end

-- Settings whose value is a JSON array (`approval.allowCommands`, `memoryFiles`,
-- `sandbox.hide`, an MCP server's `args`); every other empty table is sent as an object.
local list_keys = { allowCommands = true, memoryFiles = true, hide = true, args = true }

--- Copies `value` so that it encodes as the JSON the server expects: Lua cannot tell `{}`
--- from `[]`, and vim.json encodes an empty table as an array.
---@param value any
---@param key? string
---@return any
function M.to_json(value, key)
  if type(value) ~= 'table' or value == vim.NIL then
    return value
  end
  if next(value) == nil then
    return list_keys[key] and {} or vim.empty_dict()
  end
  local out = {}
  for k, v in pairs(value) do
    out[k] = M.to_json(v, k)
  end
  return out
end

--- Whether a settings change touches what the server takes only at start-up (the trusted keys,
--- which travel in initializationOptions): then the server must restart to see it.
---@param before table
---@param after table
---@return boolean
function M.needs_restart(before, after)
  for _, key in ipairs(M.trusted_only_keys) do
    if not vim.deep_equal(before[key], after[key]) then
      return true
    end
  end
  return not vim.deep_equal(before.model, after.model)
    and (vim.startswith(tostring(before.model), 'replay:') or vim.startswith(tostring(after.model), 'replay:'))
end

--- Server settings for workspace/configuration: the trust-boundary keys only travel in
--- initializationOptions, where the server accepts them.
---@param settings table
---@return table
function M.workspace_settings(settings)
  local copy = vim.deepcopy(settings)
  for _, key in ipairs(M.trusted_only_keys) do
    copy[key] = nil
  end
  if type(copy.model) == 'string' and vim.startswith(copy.model, 'replay:') then
    copy.model = nil -- a replay: model is trusted too (initializationOptions only)
  end
  return M.to_json(copy)
end

return M
