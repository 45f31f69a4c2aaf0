--- Approvals: `window/showMessageRequest` answered with vim.ui.select, the edit shown as a
--- unified diff in a split first, and an optional reason typed after Deny.

local M = {}

-- The `pending` approval events of edits, by runId and callId. The event arrives just before
-- its message request, whose action items carry the same runId and callId.
---@type table<string, table>
local pending = {}
-- Open diff views, by the same key, so a withdrawn approval can close its own.
---@type table<string, integer>
local views = {}

---@param run_id any
---@param call_id any
---@return string
local function key(run_id, call_id)
  return tostring(run_id) .. '\0' .. tostring(call_id)
end

---@param win integer?
local function close(win)
  if win and vim.api.nvim_win_is_valid(win) then
    pcall(vim.api.nvim_win_close, win, true)
  end
end

--- Keeps the diff of a pending edit approval; forgets it (and closes its view) once answered.
---@param ev table an `approval` stream event
function M.on_event(ev)
  local k = key(ev.runId, ev.callId)
  if ev.state == 'pending' then
    if type(ev.diff) == 'string' then
      pending[k] = ev
    end
    return
  end
  pending[k] = nil
  close(views[k])
  views[k] = nil
end

--- The lines of the diff view: the unified diff, and a note when the server cut it.
---@param ev table
---@return string[]
function M.diff_lines(ev)
  local text = ev.diff ~= '' and ev.diff or ('(no textual change to ' .. tostring(ev.uri) .. ')')
  local lines = vim.split(text:gsub('\r\n?', '\n'):gsub('\n$', ''), '\n', { plain = true })
  if ev.diffTruncated then
    lines[#lines + 1] = '# (the diff is too large and was cut here)'
  end
  return lines
end

--- Opens the diff of a pending edit in a scratch buffer (`filetype=diff`) in a full-width
--- split at the top (the default vim.ui.select, inputlist(), covers the bottom of the screen),
--- without leaving the current window.
---@param ev table the `pending` approval event
---@return integer win
function M.open_diff(ev)
  local lines = M.diff_lines(ev)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  local path = type(ev.uri) == 'string' and vim.fn.fnamemodify(vim.uri_to_fname(ev.uri), ':~:.') or ev.tool
  -- unique: two approvals of one file may be shown one after the other
  pcall(vim.api.nvim_buf_set_name, buf, ('agent-lsp://diff/%s/%s'):format(ev.callId, path))
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = 'diff'
  local height = math.max(3, math.min(#lines, math.floor(vim.o.lines / 2)))
  local ok, win = pcall(vim.api.nvim_open_win, buf, false, { split = 'above', win = -1, height = height })
  if not ok then
    vim.api.nvim_buf_delete(buf, { force = true })
    error(win, 0)
  end
  vim.wo[win].winfixheight = true
  vim.wo[win].number = false
  vim.wo[win].wrap = false
  vim.wo[win].spell = false
  vim.wo[win].winbar = ('agent-lsp: %s wants to change %s'):format(ev.tool, path):gsub('%%', '%%%%')
  views[key(ev.runId, ev.callId)] = win
  vim.cmd.redraw()
  return win
end

--- Waits (in the request's coroutine) for an async UI callback.
---@param start fun(done: fun(value: any))
---@return any
local function await(start)
  local co = coroutine.running()
  start(function(value)
    -- resume later: the UI may call back before the coroutine yields
    vim.schedule(function()
      coroutine.resume(co, value)
    end)
  end)
  return coroutine.yield()
end

--- The hunks a pending edit offers, in the order of its diff (none when the diff was cut).
---@param ev table
---@return table[] each `{index, header}`
function M.hunks_of(ev)
  local out = {}
  for _, file in ipairs(type(ev.files) == 'table' and ev.files or {}) do
    for _, hunk in ipairs(type(file.hunks) == 'table' and file.hunks or {}) do
      table.insert(out, hunk)
    end
  end
  return out
end

local HUNK_NS = vim.api.nvim_create_namespace('agent_lsp_hunks')
local HUNK_PICK = 'Allow some hunks…'

--- Marks each hunk of the diff as kept or rejected (virtual text on its `@@` line).
---@param buf integer
---@param rejected table<integer, boolean> by position in the diff (1-based)
local function mark_hunks(buf, rejected)
  vim.api.nvim_buf_clear_namespace(buf, HUNK_NS, 0, -1)
  local n = 0
  for row, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if vim.startswith(line, '@@') then
      n = n + 1
      local text = rejected[n] and ('  ✗ hunk %d rejected (x keeps it)'):format(n)
        or ('  ✓ hunk %d kept (x rejects it)'):format(n)
      vim.api.nvim_buf_set_extmark(buf, HUNK_NS, row - 1, 0, {
        virt_text = { { text, rejected[n] and 'DiagnosticError' or 'DiagnosticOk' } },
      })
    end
  end
end

--- The hunk (1-based, in diff order) the cursor is in: the last `@@` header at or above it.
---@param buf integer
---@param row integer 1-based
---@return integer?
function M.hunk_at(buf, row)
  local n, found = 0, nil
  for _, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, row, false)) do
    if vim.startswith(line, '@@') then
      n = n + 1
      found = n
    end
  end
  return found
end

--- In the diff split: `x` rejects or keeps the hunk under the cursor, `<CR>` (or `ga`) allows
--- the kept hunks, `q` goes back to the pick. `done` gets the kept hunks' 0-based indices, or
--- nil for `q`.
---@param win integer
---@param hunks table[]
---@param done fun(kept: integer[]?)
function M.choose_hunks(win, hunks, done)
  local buf = vim.api.nvim_win_get_buf(win)
  local rejected = {}
  local finished = false
  local function finish(value)
    if finished then
      return
    end
    finished = true
    for _, lhs in ipairs({ 'x', '<CR>', 'ga', 'q' }) do
      pcall(vim.keymap.del, 'n', lhs, { buffer = buf })
    end
    if vim.api.nvim_buf_is_valid(buf) then
      vim.api.nvim_buf_clear_namespace(buf, HUNK_NS, 0, -1)
    end
    done(value)
  end
  local function kept()
    local out = {}
    for n, hunk in ipairs(hunks) do
      if not rejected[n] then
        table.insert(out, hunk.index)
      end
    end
    return out
  end
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, desc = 'agent-lsp: ' .. desc })
  end
  map('x', function()
    local n = M.hunk_at(buf, vim.api.nvim_win_get_cursor(0)[1])
    if n and hunks[n] then
      rejected[n] = not rejected[n] or nil
      mark_hunks(buf, rejected)
    end
  end, 'reject or keep the hunk under the cursor')
  map('<CR>', function()
    finish(kept())
  end, 'allow the kept hunks')
  map('ga', function()
    finish(kept())
  end, 'allow the kept hunks')
  map('q', function()
    finish(nil)
  end, 'back to the approval')
  mark_hunks(buf, rejected)
  vim.wo[win].winbar = 'agent-lsp: x rejects/keeps the hunk under the cursor · Enter allows the kept hunks · q goes back'
  vim.api.nvim_set_current_win(win)
end

--- The hunks to keep, chosen in the diff split (nil: back to the pick).
---@param win integer
---@param hunks table[]
---@return integer[]?
function M.hunks_in_split(win, hunks)
  local origin = vim.api.nvim_get_current_win()
  local kept = await(function(done)
    M.choose_hunks(win, hunks, done)
  end)
  if vim.api.nvim_win_is_valid(origin) then
    vim.api.nvim_set_current_win(origin)
  end
  return kept
end

--- The pick over the actions (in the request's coroutine).
---@param actions table[]
---@param prompt string
---@return table?
function M.pick(actions, prompt)
  return await(function(done)
    vim.ui.select(actions, {
      kind = 'agent_lsp_approval',
      prompt = prompt,
      format_item = function(action)
        return (action.title:gsub('\r?\n', ' '))
      end,
    }, done)
  end)
end

--- `window/showMessageRequest`: a pick over the actions. For an edit, its diff is shown while
--- the user decides; after Deny, an optional reason goes back in the action item (LSP's
--- additional properties), which the server passes to the model. Dismissed: null, a denial.
---@param params lsp.ShowMessageRequestParams
---@param ctx lsp.HandlerContext
function M.show_message_request(err, params, ctx)
  local co, is_main = coroutine.running()
  if not co or is_main then
    return vim.lsp.handlers['window/showMessageRequest'](err, params, ctx)
  end
  local actions = params.actions or {}
  if #actions == 0 then
    vim.notify('agent-lsp: ' .. params.message, vim.log.levels.INFO)
    return vim.NIL
  end
  local first = actions[1]
  local k = first.runId and key(first.runId, first.callId)
  local ev = k and pending[k]
  local win = nil ---@type integer?
  if ev then
    -- no room for a split (E36) must not cost the answer: then the message alone is shown
    local ok, opened = pcall(M.open_diff, ev)
    win = ok and opened or nil
  end
  local message = params.message
  if win then
    -- the diff is on screen: the request's own copy of it would only push it away
    -- (but the line naming the rule "Always allow" would save stays: it must be seen first)
    local lines = vim.split(message, '\n', { plain = true })
    local kept = vim.list_slice(lines, 1, 2)
    for i = 3, #lines do
      if vim.startswith(lines[i], '(Always allow saves the rule ') then
        table.insert(kept, lines[i])
      end
    end
    message = table.concat(kept, '\n')
  end
  local prompt = vim.startswith(message, 'agent-lsp') and message or ('agent-lsp: ' .. message)
  local hunks = (ev and win) and M.hunks_of(ev) or {}
  local shown = actions
  if #hunks > 0 then
    -- a pick of ours (not the server's): the hunks are chosen in the diff split
    shown = { actions[1], { title = HUNK_PICK }, unpack(actions, 2) }
  end
  local choice
  while true do
    choice = M.pick(shown, prompt)
    if not (choice and choice.title == HUNK_PICK) then
      break
    end
    local kept = M.hunks_in_split(win --[[@as integer]], hunks)
    if kept then
      close(win)
      views[k], pending[k] = nil, nil
      -- answered by agentLsp.approve, which withdraws this request
      local client = vim.lsp.get_client_by_id(ctx.client_id)
      if client then
        client:request('workspace/executeCommand', {
          command = 'agentLsp.approve',
          arguments = { { runId = first.runId, callId = first.callId, decision = 'allow', hunks = kept } },
        }, function() end)
      end
      return vim.NIL
    end
  end
  if choice and choice.title == 'Deny' and choice.runId then
    local reason = await(function(done)
      vim.ui.input({ prompt = 'Reason for the agent (optional, Enter to skip): ' }, done)
    end)
    if type(reason) == 'string' and vim.trim(reason) ~= '' then
      choice = vim.tbl_extend('force', choice, { reason = vim.trim(reason) })
    end
  end
  close(win)
  if k then
    views[k], pending[k] = nil, nil
  end
  return choice or vim.NIL
end

return M
