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
  local choice = await(function(done)
    vim.ui.select(actions, {
      kind = 'agent_lsp_approval',
      prompt = prompt,
      format_item = function(action)
        return (action.title:gsub('\r?\n', ' '))
      end,
    }, done)
  end)
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
