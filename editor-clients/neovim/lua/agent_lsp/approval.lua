--- Approvals: a `window/showMessageRequest` of an approval waits, shown inline (in the chat or
--- the stream buffer, answered there by the keys a/s/w/d/D) with a one-line notification: it
--- never opens a window that takes the keys the user is typing. `:AgentApprove` answers it
--- with vim.ui.select instead, the edit shown as a unified diff in a split first, and an
--- optional reason typed after Deny. Other message requests are a vim.ui.select at once.

local M = {}

-- The `pending` approval events, by runId and callId. The event arrives just before its
-- message request, whose action items carry the same runId and callId.
---@type table<string, table>
local pending = {}
-- Message requests of approvals waiting for an answer, by the same key.
---@type table<string, { actions: table[], message: string, done: fun(choice: any), order: integer }>
local requests = {}
local counter = 0
-- Where each buffer shows approvals: `{key, first, last}` line ranges (1-based).
---@type table<integer, { key: string, first: integer, last: integer }[]>
local places = {}

--- The keys line under an inline approval (CONTRACT Decision 56).
M.keys_line = '[a]llow [s]ession al[w]ays [d]eny [D]iff'
-- Open diff views, by the same key, so a withdrawn approval can close its own.
---@type table<string, integer>
local views = {}

---@param run_id any
---@param call_id any
---@return string
function M.key(run_id, call_id)
  return tostring(run_id) .. '\0' .. tostring(call_id)
end

---@param win integer?
local function close(win)
  if win and vim.api.nvim_win_is_valid(win) then
    pcall(vim.api.nvim_win_close, win, true)
  end
end

--- Keeps a pending approval (with an edit's diff); once answered or withdrawn, forgets it,
--- closes its diff view and lets go of its waiting request.
---@param ev table an `approval` stream event
function M.on_event(ev)
  local k = M.key(ev.runId, ev.callId)
  if ev.state == 'pending' then
    pending[k] = ev
    return
  end
  pending[k] = nil
  close(views[k])
  views[k] = nil
  local request = requests[k]
  if request then
    -- answered elsewhere or withdrawn: the server no longer waits for this request
    requests[k] = nil
    request.done(vim.NIL)
  end
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
  views[M.key(ev.runId, ev.callId)] = win
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

--- The message without the request's own copy of a diff shown beside it (but the line naming
--- the rule "Always allow" would save stays: it must be seen first).
---@param message string
---@return string
local function beside_diff(message)
  local lines = vim.split(message, '\n', { plain = true })
  local kept = vim.list_slice(lines, 1, 2)
  for i = 3, #lines do
    if vim.startswith(lines[i], '(Always allow saves the rule ') then
      table.insert(kept, lines[i])
    end
  end
  return table.concat(kept, '\n')
end

--- The old-style question: a pick over the actions, the edit's diff in a split meanwhile, and
--- after Deny an optional reason (LSP's additional properties carry it to the server).
--- Runs in a coroutine; dismissed: nil.
---@param message string
---@param actions table[]
---@param k? string the approval's key
---@return table?
local function pick(message, actions, k)
  local ev = k and pending[k]
  local win = nil ---@type integer?
  if ev and type(ev.diff) == 'string' then
    -- no room for a split (E36) must not cost the answer: then the message alone is shown
    local ok, opened = pcall(M.open_diff, ev)
    win = ok and opened or nil
  end
  if win then
    message = beside_diff(message)
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
    choice = await(function(done)
      vim.ui.select(shown, {
        kind = 'agent_lsp_approval',
        prompt = prompt,
        format_item = function(action)
          return (action.title:gsub('\r?\n', ' '))
        end,
      }, done)
    end)
    if not (choice and choice.title == HUNK_PICK) then
      break
    end
    local kept = M.hunks_in_split(win --[[@as integer]], hunks)
    if kept then
      close(win)
      views[k] = nil
      -- answered by agentLsp.approve {hunks}, which withdraws the message request: its reply
      -- (nil) goes only once the server has taken the answer
      local run = require('agent_lsp.runs').get(tostring(ev.runId))
      local client = run and vim.lsp.get_client_by_id(run.client_id)
      if client then
        local arg = { runId = ev.runId, callId = ev.callId, decision = 'allow', hunks = kept }
        await(function(done)
          require('agent_lsp.workspace').execute(client, 'agentLsp.approve', arg, done)
        end)
      end
      return nil
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
    views[k] = nil
  end
  return choice
end

--- A one-line notice: a longer message would wait for Enter and take the next typed key.
---@param ev? table
local function announce(ev)
  local what = ev and ('%s %s'):format(ev.tool or '', ev.uri and vim.fn.fnamemodify(vim.uri_to_fname(ev.uri), ':t') or '')
    or 'a tool call'
  local text = ('agent-lsp: approve %s? a/s/w/d on it (chat, stream) or :AgentApprove'):format(vim.trim(what))
  text = text:gsub('%s+', ' ')
  local room = math.max(20, vim.v.echospace - 1)
  if vim.fn.strdisplaywidth(text) > room then
    text = vim.fn.strcharpart(text, 0, room - 3) .. '...'
  end
  vim.notify(text, vim.log.levels.WARN)
end

--- `window/showMessageRequest`. An approval (its actions carry runId and callId) waits for an
--- answer from the inline keys or `:AgentApprove`; it is announced in one line and the
--- `User AgentLspApproval` autocommand fires. Anything else is a pick at once. Dismissed or
--- withdrawn: null, a denial.
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
  if not first.runId then
    return pick(params.message, actions) or vim.NIL
  end
  local k = M.key(first.runId, first.callId)
  local choice = await(function(done)
    counter = counter + 1
    requests[k] = { actions = actions, message = params.message, done = done, order = counter }
    announce(pending[k])
    vim.api.nvim_exec_autocmds('User', {
      pattern = 'AgentLspApproval',
      modeline = false,
      data = { runId = first.runId, callId = first.callId, message = params.message },
    })
  end)
  requests[k] = nil
  return choice or vim.NIL
end

--- The waiting approval requests, newest first.
---@return string[] keys
local function waiting()
  local list = vim.tbl_keys(requests)
  table.sort(list, function(a, b)
    return requests[a].order > requests[b].order
  end)
  return list
end

--- `:AgentApprove`: the newest waiting approval (or the one `k` names) asked with vim.ui.select,
--- its diff beside it.
---@param k? string
function M.approve(k)
  k = k or waiting()[1]
  local request = k and requests[k]
  if not request then
    vim.notify('agent-lsp: no approval is waiting', vim.log.levels.INFO)
    return
  end
  coroutine.wrap(function()
    local choice = pick(request.message, request.actions, k)
    if requests[k] == request then
      requests[k] = nil
      request.done(choice or vim.NIL)
    end
  end)()
end

local titles = { a = 'Allow', s = 'Allow for session', w = 'Always allow', d = 'Deny' }
local decisions = { a = 'allow', s = 'allowSession', w = 'allowAlways', d = 'deny' }

--- Sends the answer: as the reply to the waiting message request, else (the request has not
--- come, or the client gets none) by `agentLsp.approve`.
---@param k string
---@param letter 'a'|'s'|'w'|'d'
---@param reason? string
local function answer(k, letter, reason)
  local request = requests[k]
  if request then
    local item = vim.iter(request.actions):find(function(action)
      return action.title == titles[letter]
    end)
    if not item then
      vim.notify('agent-lsp: "' .. titles[letter] .. '" is not offered for this call', vim.log.levels.WARN)
      return
    end
    if reason then
      item = vim.tbl_extend('force', item, { reason = reason })
    end
    requests[k] = nil
    request.done(item)
    return
  end
  local ev = pending[k]
  local run = ev and require('agent_lsp.runs').get(tostring(ev.runId))
  local client = run and vim.lsp.get_client_by_id(run.client_id)
  if not client then
    return
  end
  local arg = { runId = ev.runId, callId = ev.callId, decision = decisions[letter], reason = reason }
  require('agent_lsp.workspace').execute(client, 'agentLsp.approve', arg, function(ok)
    if ok == false then
      vim.notify('agent-lsp: "' .. titles[letter] .. '" was not taken for this call', vim.log.levels.WARN)
    end
  end)
end

--- Records that lines `first`..`last` of `buf` show the approval `k` (for the keys).
---@param buf integer
---@param k string
---@param first integer
---@param last integer
function M.place(buf, k, first, last)
  places[buf] = places[buf] or {}
  table.insert(places[buf], { key = k, first = first, last = last })
end

--- Forgets the approvals shown in `buf` (its text was replaced).
---@param buf integer
function M.clear_places(buf)
  places[buf] = nil
end

--- The waiting approval the cursor is on (or just below, on the buffer's last line, where a
--- window that follows the output has it). Elsewhere the keys keep their usual meaning: `w`
--- moving a word must not answer an approval further up.
---@param buf integer
---@return string?
local function at_cursor(buf)
  local line = vim.api.nvim_win_get_cursor(0)[1]
  local last_line = vim.api.nvim_buf_line_count(buf)
  for _, place in ipairs(places[buf] or {}) do
    if pending[place.key] then
      if line >= place.first and line <= place.last then
        return place.key
      end
      if line == last_line and place.last == last_line - 1 then
        return place.key
      end
    end
  end
  return nil
end

--- A key pressed in a buffer that shows approvals.
---@param buf integer
---@param letter 'a'|'s'|'w'|'d'|'D'
local function on_key(buf, letter)
  local k = at_cursor(buf)
  if not k then
    vim.notify('agent-lsp: no approval is waiting here', vim.log.levels.INFO)
    return
  end
  if letter == 'D' then
    local ev = pending[k]
    if type(ev.diff) == 'string' then
      pcall(M.open_diff, ev)
    else
      vim.notify(('agent-lsp: %s would run:\n%s'):format(ev.tool, ev.detail or ev.text or ''))
    end
  elseif letter == 'd' then
    vim.ui.input({ prompt = 'Reason for the agent (optional, Enter to skip): ' }, function(reason)
      if reason == nil then
        return -- dismissed: still waiting
      end
      answer(k, 'd', vim.trim(reason) ~= '' and vim.trim(reason) or nil)
    end)
  else
    answer(k, letter)
  end
end

--- Maps the approval keys a/s/w/d/D in `buf` (normal mode, buffer-local). Off a waiting
--- approval they keep their usual meaning (`w` moves a word).
---@param buf integer
function M.map_keys(buf)
  local descs = { a = 'allow', s = 'allow for the session', w = 'always allow', d = 'deny', D = 'show the diff' }
  for letter, desc in pairs(descs) do
    vim.keymap.set('n', letter, function()
      if not at_cursor(buf) then
        return letter
      end
      -- an expression mapping may not open windows or change text: answer right after
      vim.schedule(function()
        on_key(buf, letter)
      end)
      return ''
    end, { buffer = buf, nowait = true, expr = true, desc = 'agent-lsp approval: ' .. desc })
  end
end

return M
