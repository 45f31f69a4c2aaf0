--- :AgentChat: one session as a conversation. A `markdown` chat buffer (tool calls, results and
--- thinking folded; approvals inline with the keys a/s/w/d/D) above an input buffer: <CR> in
--- normal mode or <C-s> sends a follow-up in the same session, or steers the run that runs;
--- :AgentQueue queues one; :AgentFork on a past prompt forks the session there; :AgentStop
--- cancels the queued runs (newest first), then the running one (CONTRACT Decision 74).

local workspace = require('agent_lsp.workspace')
local approval = require('agent_lsp.approval')
local runs = require('agent_lsp.runs')

local M = {}

M.chat_name = 'agent-lsp://chat'
M.input_name = 'agent-lsp://chat-input'

---@class agent_lsp.Queued
---@field run_id string
---@field session_id string
---@field prompt string
---@field line integer its line in the chat buffer
---@field state 'queued'|'started'|'removed'
---@field cancelling? boolean its cancel was sent

local S = {
  chat = nil, ---@type integer?
  input = nil, ---@type integer?
  client_id = nil, ---@type integer?
  root = nil, ---@type string?
  session = nil, ---@type string?
  current = nil, ---@type string? the run of this chat that runs
  awaiting = 0, -- replies to agentLsp.run still to come
  loading = nil, ---@type table[]? live events that came while the history loads
  shown = {}, ---@type table<string, boolean> runs of this chat (their events are shown)
  early = {}, ---@type table<string, table[]> events that came before their run's reply
  queued = {}, ---@type agent_lsp.Queued[]
  prompts = {}, ---@type table<integer, { run_id: string, prompt: string }> by header line
  folds = {}, ---@type table<integer, string> fold levels by line
  approvals = {}, ---@type table<string, integer> the keys line of each inline approval
  seq = {}, ---@type table<string, integer>
  at_line_start = true,
}

local function notify(msg, level)
  vim.notify('agent-lsp: ' .. msg, level or vim.log.levels.INFO)
end

---@param buf integer?
---@return boolean
local function valid(buf)
  return buf ~= nil and vim.api.nvim_buf_is_valid(buf)
end

--- Forgets what the chat buffer showed (a new or another session).
local function reset()
  S.current, S.shown, S.early, S.queued, S.loading = nil, {}, {}, {}, nil
  S.prompts, S.folds, S.approvals, S.seq, S.at_line_start = {}, {}, {}, {}, true
  if valid(S.chat) then
    vim.bo[S.chat].modifiable = true
    vim.api.nvim_buf_set_lines(S.chat, 0, -1, false, {})
    vim.bo[S.chat].modified = false
    approval.clear_places(S.chat)
  end
end

---@param name string
---@param filetype string
---@return integer
local function scratch(name, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = filetype
  return buf
end

--- The fold level of a chat line (its 'foldexpr').
---@param lnum integer
---@return string
function M.foldexpr(lnum)
  return S.folds[lnum] or '0'
end

---@return integer
local function chat_buf()
  if valid(S.chat) then
    return S.chat --[[@as integer]]
  end
  local buf = scratch(M.chat_name, 'markdown')
  vim.bo[buf].undolevels = -1
  S.chat = buf
  reset()
  approval.map_keys(buf)
  vim.keymap.set('n', 'x', function()
    local line = vim.api.nvim_win_get_cursor(0)[1]
    local item = vim.iter(S.queued):find(function(q)
      return q.line == line and q.state == 'queued'
    end)
    if not item then
      return 'x'
    end
    vim.schedule(function()
      M.remove_queued(item)
    end)
    return ''
  end, { buffer = buf, expr = true, nowait = true, desc = 'agent-lsp chat: remove the queued prompt' })
  return buf
end

--- Appends `text` at the end of the chat; "\n" in it starts new lines. Windows that showed the
--- end follow it.
---@param text string
local function put(text)
  text = require('agent_lsp.stream').append_to(chat_buf(), text)
  S.at_line_start = text:sub(-1) == '\n' or (text == '' and S.at_line_start)
end

--- Appends whole lines (after ending a partly written one), each with a fold level
--- (`'>1'` starts a fold, `'1'` continues it, nil: not folded).
---@param lines string[]
---@param folds? string[]
---@return integer first the line number of the first of them
local function put_lines(lines, folds)
  local buf = chat_buf()
  local empty = vim.api.nvim_buf_line_count(buf) == 1 and vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ''
  if not S.at_line_start and not empty then
    put('\n')
  end
  local first = vim.api.nvim_buf_line_count(buf)
  for i, level in pairs(folds or {}) do
    S.folds[first + i - 1] = level
  end
  put(table.concat(lines, '\n') .. '\n')
  return first
end

--- Replaces one line in place (the line count stays, so the recorded lines stay right).
---@param lnum integer
---@param text string
local function set_line(lnum, text)
  if valid(S.chat) and lnum <= vim.api.nvim_buf_line_count(S.chat) then
    vim.api.nvim_buf_set_lines(S.chat, lnum - 1, lnum, false, { text })
    vim.bo[S.chat].modified = false
  end
end

---@param text any
---@return string[]
local function split(text)
  text = type(text) == 'string' and text or ''
  return vim.split((text:gsub('\r\n?', '\n'):gsub('\n+$', '')), '\n', { plain = true })
end

--- `lines` with each prefixed, and the fold levels of a folded block (`start`: it opens one).
---@param lines string[]
---@param prefix string
---@param start boolean
---@return string[], string[]
local function folded(lines, prefix, start)
  local out, folds = {}, {}
  for i, line in ipairs(lines) do
    out[i] = prefix .. line
    folds[i] = (i == 1 and start) and '>1' or '1'
  end
  return out, folds
end

--- Writes a prompt as a heading; :AgentFork finds its run by the line.
---@param run_id string
---@param prompt string
local function header(run_id, prompt)
  local lines = split(prompt)
  local first_line = #lines > 0 and lines[1] or ''
  local rest = vim.list_slice(lines, 2)
  local first = put_lines(vim.list_extend({ '', '## ' .. first_line }, rest))
  S.prompts[first + 1] = { run_id = run_id, prompt = prompt }
  S.shown[run_id] = true
end

--- An approval: what would run, and the keys that answer it; once answered, the keys line
--- says how.
---@param ev table
local function render_approval(ev)
  local k = approval.key(ev.runId, ev.callId)
  if ev.state == 'pending' then
    local lines = { ('> approval: `%s`'):format(ev.tool or '') }
    vim.list_extend(lines, (folded(split(ev.detail or ev.text), '    ', false)))
    lines[#lines + 1] = approval.keys_line
    local first = put_lines(lines)
    S.approvals[k] = first + #lines - 1
    approval.place(S.chat, k, first, first + #lines - 1)
  elseif S.approvals[k] then
    set_line(S.approvals[k], '→ ' .. tostring(ev.state))
    S.approvals[k] = nil
  else
    put_lines({ ('_approval %s: %s_'):format(tostring(ev.state), ev.tool or '') })
  end
end

local quiet = { hook = true, compaction = true }

--- Renders one stream event (live, or from `agentLsp.history`).
---@param ev table
local function render(ev)
  local kind = ev.kind
  if kind == 'text' then
    put(type(ev.text) == 'string' and ev.text or '')
  elseif kind == 'thinking' then
    put_lines(folded(split(ev.text), '> ', true))
  elseif kind == 'toolCall' then
    local args = vim.json.encode(ev.arguments or vim.empty_dict()):gsub('\n', ' ')
    put_lines({ ('- `%s` %s'):format(tostring(ev.tool), args:sub(1, 200)) }, { '>1' })
  elseif kind == 'toolResult' then
    local lines, folds = folded(split(ev.text), '    ', false)
    table.insert(lines, 1, ev.ok == false and '  - failed' or '  - ok')
    table.insert(folds, 1, '1')
    put_lines(lines, folds)
  elseif kind == 'approval' then
    render_approval(ev)
  elseif kind == 'steer' then
    put_lines({ '» ' .. table.concat(split(ev.text), ' ') })
  elseif quiet[kind] then
    put_lines({ ('_%s: %s_'):format(kind, table.concat(split(ev.text), ' ')) })
  elseif kind == 'stop' then
    local report = type(ev.report) == 'table' and ev.report or {}
    local why = report.error or (report.stopReason ~= 'done' and report.summary) or nil
    local line = ('_%s_'):format(tostring(report.stopReason or 'stopped'))
    put_lines({ '', why and (line .. ': ' .. table.concat(split(why), ' ')) or line })
    if S.current == tostring(ev.runId) then
      S.current = nil
    end
  end
  -- usage, status and kinds of a newer server: nothing to show
end

---@param run_id string
---@return agent_lsp.Queued?
local function queued_item(run_id)
  return vim.iter(S.queued):find(function(q)
    return q.run_id == run_id
  end)
end

--- A queued run's first event: it started (or, a lone stop, it was removed).
---@param item agent_lsp.Queued
---@param ev table
local function dequeue(item, ev)
  if ev.kind == 'stop' then
    item.state = 'removed'
    set_line(item.line, '~~queued: ' .. split(item.prompt)[1] .. '~~ removed')
    return false
  end
  item.state = 'started'
  local run = runs.get(item.run_id)
  if run then
    run.session_id = run.session_id or item.session_id
  end
  set_line(item.line, '_queued: ' .. split(item.prompt)[1] .. ' (started)_')
  S.current = item.run_id
  header(item.run_id, item.prompt)
  return true
end

--- `agentLsp/stream` event: shown when it belongs to this chat's session.
---@param ev table
function M.on_stream(ev)
  if not valid(S.chat) or type(ev) ~= 'table' or ev.runId == nil then
    return
  end
  if S.loading then
    table.insert(S.loading, ev) -- the history on its way may hold it already
    return
  end
  local id = tostring(ev.runId)
  local item = queued_item(id)
  if item and item.state == 'queued' and not dequeue(item, ev) then
    return
  end
  if not S.shown[id] then
    local run = runs.get(id)
    if run and run.session_id and run.session_id == S.session then
      header(id, run.title) -- a run of this session started elsewhere (:AgentRun)
    elseif S.awaiting > 0 then
      S.early[id] = S.early[id] or {}
      table.insert(S.early[id], ev) -- the reply to agentLsp.run may still come
      return
    else
      return
    end
  end
  if type(ev.seq) == 'number' then
    if S.seq[id] and ev.seq <= S.seq[id] then
      return
    end
    S.seq[id] = ev.seq
  end
  render(ev)
end

---@return vim.lsp.Client?
local function client()
  local c = S.client_id and vim.lsp.get_client_by_id(S.client_id)
  if not c then
    notify('the agent-lsp server of this chat is gone: :AgentChat starts it again', vim.log.levels.ERROR)
  end
  return c or nil
end

--- The reply to a run this chat started: its prompt and the events that came first.
---@param prompt string
---@param result table?
local function on_reply(prompt, result)
  S.awaiting = math.max(0, S.awaiting - 1)
  if result then
    S.session = result.sessionId or S.session
    if S.root and S.session then
      workspace.set_session(S.root, S.session)
    end
    if result.queued then
      local line = put_lines({ ('_queued: %s_  [x] remove'):format(split(prompt)[1]) })
      table.insert(S.queued, {
        run_id = result.runId, session_id = result.sessionId, prompt = prompt, line = line, state = 'queued',
      })
    else
      S.current = result.runId
      header(result.runId, prompt)
    end
    for _, ev in ipairs(S.early[result.runId] or {}) do
      M.on_stream(ev)
    end
    S.early[result.runId] = nil
  end
  if S.awaiting == 0 then
    S.early = {}
  end
end

--- Starts a run of the chat's session (`queue`: after the one that runs).
---@param prompt string
---@param queue? boolean
local function start(prompt, queue)
  local c = client()
  if not c then
    return
  end
  S.awaiting = S.awaiting + 1
  local args = { prompt = prompt, sessionId = S.session, queue = queue or nil }
  require('agent_lsp.commands').start(c, args, {
    title = prompt,
    quiet = true,
    new_session = S.session == nil,
    on_reply = function(result)
      on_reply(prompt, result)
    end,
  })
end

---@return boolean
local function running()
  local run = S.current and runs.get(S.current)
  return run ~= nil and not run.done
end

--- Sends a prompt: a follow-up in the session, or a steer of the run that runs.
---@param text string
function M.send(text)
  text = vim.trim(text or '')
  if text == '' then
    return
  end
  local c = client()
  if not c then
    return
  end
  if not running() then
    start(text)
    return
  end
  workspace.execute(c, 'agentLsp.steer', { runId = S.current, text = text }, function(ok)
    if ok ~= true then
      start(text) -- it ended meanwhile: a follow-up then
    end
  end)
end

--- :AgentQueue {text}: runs after the session's running run (at once when none runs).
---@param text string
function M.queue(text)
  if vim.trim(text or '') == '' then
    notify(':AgentQueue {prompt}', vim.log.levels.WARN)
    return
  end
  if not valid(S.chat) then
    M.open()
  end
  start(vim.trim(text), true)
end

--- Sends the input buffer's text and empties it.
local function send_input()
  if not valid(S.input) then
    return
  end
  local text = table.concat(vim.api.nvim_buf_get_lines(S.input --[[@as integer]], 0, -1, false), '\n')
  vim.api.nvim_buf_set_lines(S.input --[[@as integer]], 0, -1, false, {})
  M.send(text)
end

---@return integer
local function input_buf()
  if valid(S.input) then
    return S.input --[[@as integer]]
  end
  local buf = scratch(M.input_name, 'markdown')
  S.input = buf
  vim.keymap.set('n', '<CR>', send_input, { buffer = buf, desc = 'agent-lsp chat: send' })
  vim.keymap.set({ 'n', 'i' }, '<C-s>', send_input, { buffer = buf, desc = 'agent-lsp chat: send' })
  return buf
end

--- Removes a queued prompt (`agentLsp.cancel` of its run).
---@param item agent_lsp.Queued
function M.remove_queued(item)
  local c = client()
  if c and item.state == 'queued' and not item.cancelling then
    item.cancelling = true
    workspace.execute(c, 'agentLsp.cancel', { runId = item.run_id }, function() end)
  end
end

--- Cancels the queued runs of a session, newest first (before its running run is cancelled).
---@param c vim.lsp.Client
---@param session_id string
function M.cancel_queued(c, session_id)
  for i = #S.queued, 1, -1 do
    local item = S.queued[i]
    if item.state == 'queued' and item.session_id == session_id and not item.cancelling then
      item.cancelling = true
      workspace.execute(c, 'agentLsp.cancel', { runId = item.run_id }, function() end)
    end
  end
end

--- :AgentStop: the chat's queued runs (newest first), then its running run.
function M.stop()
  local c = S.client_id and vim.lsp.get_client_by_id(S.client_id)
  if c and S.session then
    M.cancel_queued(c, S.session)
  end
  if running() then
    require('agent_lsp.commands').cancel(S.current)
  elseif not (c and S.session) then
    notify('nothing runs in this chat', vim.log.levels.WARN)
  end
end

--- Renders a session's past from `agentLsp.history`, as it was shown live.
---@param c vim.lsp.Client
---@param session_id string
---@param after? fun()
local function load_history(c, session_id, after)
  local meanwhile = {}
  S.loading = meanwhile
  local function done(in_history)
    if S.loading ~= meanwhile then
      return -- another session was opened since
    end
    -- events that came meanwhile: those of the runs shown from the history are in it
    S.loading = nil
    for _, ev in ipairs(meanwhile) do
      if not in_history[tostring(ev.runId)] then
        M.on_stream(ev)
      end
    end
  end
  workspace.execute(c, 'agentLsp.history', { sessionId = session_id }, function(history)
    if S.session ~= session_id or type(history) ~= 'table' then
      return done({})
    end
    if type(history.title) == 'string' then
      put_lines({ '# ' .. split(history.title)[1] })
    end
    local from_history = {}
    for _, run in ipairs(history.runs or {}) do
      local id = tostring(run.runId)
      header(id, type(run.prompt) == 'string' and run.prompt or '')
      -- a run this Neovim streams: its own events (the history may hold text that the stream
      -- has not sent yet, and the stream goes on from the last seq shown)
      local mine = runs.get(id)
      local live = mine and not mine.done and mine.events
      from_history[id] = not live or nil
      for _, ev in ipairs(live or run.events or {}) do
        if live and type(ev.seq) == 'number' then
          S.seq[id] = ev.seq
        end
        render(vim.tbl_extend('keep', ev, { runId = id }))
      end
      if run.stop == nil or run.stop == vim.NIL then
        S.current = id -- still running: its next events go on below
      end
    end
    done(from_history)
    if after then
      after()
    end
  end, function()
    done({})
  end)
end

--- Shows the chat window above the input window in the current tab (the existing ones when
--- the tab has them); the input window gets the cursor.
local function show()
  local chat, input = chat_buf(), input_buf()
  local tab = vim.api.nvim_get_current_tabpage()
  local function in_tab(buf)
    return vim.iter(vim.fn.win_findbuf(buf)):find(function(win)
      return vim.api.nvim_win_get_tabpage(win) == tab
    end)
  end
  local chat_win = in_tab(chat)
  if not chat_win then
    chat_win = vim.api.nvim_open_win(chat, false, { split = 'right', win = -1 })
    vim.wo[chat_win].wrap = true
    vim.wo[chat_win].linebreak = true
    vim.wo[chat_win].number = false
    vim.wo[chat_win].spell = false
    vim.wo[chat_win].foldmethod = 'expr'
    vim.wo[chat_win].foldexpr = "v:lua.require'agent_lsp.chat'.foldexpr(v:lnum)"
    vim.wo[chat_win].foldlevel = 0
    vim.wo[chat_win].foldenable = true
  end
  local input_win = in_tab(input)
  if not input_win then
    input_win = vim.api.nvim_open_win(input, false, { split = 'below', win = chat_win, height = 5 })
    vim.wo[input_win].winfixheight = true
    vim.wo[input_win].number = false
    vim.wo[input_win].winbar = 'agent-lsp: <CR> or <C-s> sends (steers while a run runs)'
  end
  pcall(vim.api.nvim_win_set_cursor, chat_win, { vim.api.nvim_buf_line_count(chat), 0 })
  vim.api.nvim_set_current_win(input_win)
end

--- Switches the chat to a session (nil: a new one) and renders its past.
---@param c vim.lsp.Client
---@param session_id string?
---@param after? fun()
local function switch(c, session_id, after)
  reset()
  S.session = session_id
  if S.root then
    workspace.set_session(S.root, session_id)
  end
  if session_id then
    load_history(c, session_id, after)
  elseif after then
    after()
  end
end

--- :AgentChat [sessionId]: opens the chat of the workspace's session (the one the next run
--- continues, e.g. picked with :AgentSessions), or of the session named.
---@param session_id? string
function M.open(session_id)
  local function with(c, root)
    S.client_id, S.root = c.id, root
    local target = (session_id and session_id ~= '') and session_id or workspace.session(root)
    chat_buf()
    if target ~= S.session and not running() then
      switch(c, target)
    end
    show()
  end
  local current = vim.api.nvim_get_current_buf()
  local own = S.client_id and vim.lsp.get_client_by_id(S.client_id)
  if own and (current == S.chat or current == S.input) then
    with(own, S.root)
  else
    workspace.with_current(with)
  end
end

--- :AgentFork, on (or below) a past prompt in the chat: a new session with the history before
--- that prompt's run; the prompt goes into the input for editing.
function M.fork()
  if vim.api.nvim_get_current_buf() ~= S.chat then
    notify(':AgentFork works on a prompt in the chat buffer (:AgentChat)', vim.log.levels.WARN)
    return
  end
  local line = vim.api.nvim_win_get_cursor(0)[1]
  local found = nil
  for lnum = line, 1, -1 do
    found = S.prompts[lnum]
    if found then
      break
    end
  end
  local c = client()
  if not found or not c or not S.session then
    notify('no prompt at or above the cursor', vim.log.levels.WARN)
    return
  end
  local arg = { sessionId = S.session, runId = found.run_id }
  workspace.execute(c, 'agentLsp.fork', arg, function(result)
    switch(c, result.sessionId, function()
      show()
      vim.api.nvim_buf_set_lines(input_buf(), 0, -1, false, split(found.prompt))
    end)
  end)
end

--- The chat buffer's text (for tests and scripts).
---@return string
function M.text()
  return valid(S.chat) and table.concat(vim.api.nvim_buf_get_lines(S.chat --[[@as integer]], 0, -1, false), '\n') or ''
end

--- The chat's state (for tests and scripts).
---@return table `{session, current, chat, input, queued, shown_last}` (the newest prompt's run)
function M.state()
  local last = nil
  for lnum, prompt in pairs(S.prompts) do
    if not last or lnum > last[1] then
      last = { lnum, prompt.run_id }
    end
  end
  return {
    session = S.session, current = S.current, chat = S.chat, input = S.input, queued = S.queued,
    shown_last = last and last[2],
  }
end

return M
