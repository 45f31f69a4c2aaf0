--- The `agent-lsp://stream` scratch buffer: every run's `agentLsp/stream` events, live.

local M = {}

M.bufname = 'agent-lsp://stream'

local bufnr = nil ---@type integer?
local last_run = nil ---@type string? run whose text the last line continues
local at_line_start = true -- the last line is empty and can take a new line as is
local last_seq = {} ---@type table<string, integer>
local headed = {} ---@type table<string, true> runs whose header is in the buffer

---@return integer
function M.buf()
  if bufnr and vim.api.nvim_buf_is_valid(bufnr) then
    return bufnr
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, M.bufname)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].undolevels = -1
  vim.bo[buf].filetype = 'agent_lsp_stream'
  bufnr = buf
  last_run, at_line_start, headed = nil, true, {}
  require('agent_lsp.approval').map_keys(buf)
  return buf
end

---@param buf integer
---@return integer[]
local function windows(buf)
  return vim.tbl_filter(function(win)
    return vim.api.nvim_win_get_buf(win) == buf
  end, vim.api.nvim_list_wins())
end

--- Appends `text` to the end of a scratch buffer; "\n" in it starts new lines. Windows that
--- show the end follow the new output. (The chat buffer's appends too.)
---@param buf integer
---@param text string
---@return string text with its line ends made "\n"
function M.append_to(buf, text)
  local follow = {}
  local line_count = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(windows(buf)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= line_count then
      follow[#follow + 1] = win
    end
  end
  local last = vim.api.nvim_buf_get_lines(buf, -2, -1, false)[1] or ''
  text = text:gsub('\r\n?', '\n')
  local lines = vim.split(text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(buf, line_count - 1, #last, line_count - 1, #last, lines)
  vim.bo[buf].modified = false
  local new_count = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(follow) do
    pcall(vim.api.nvim_win_set_cursor, win, { new_count, 0 })
  end
  return text
end

--- Appends `text` to the end of the stream buffer; "\n" in it starts new lines.
---@param text string
local function append(text)
  text = M.append_to(M.buf(), text)
  at_line_start = text:sub(-1) == '\n' or (text == '' and at_line_start)
end

--- Appends whole lines, after ending a partly written line.
---@param lines string
local function append_lines(lines)
  local buf = M.buf()
  local prefix = ''
  local empty_buffer = vim.api.nvim_buf_line_count(buf) == 1
    and vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ''
  if not at_line_start and not empty_buffer then
    prefix = '\n'
  end
  append(prefix .. lines .. '\n')
end

---@param id string
---@return string
local function short(id)
  return id:sub(1, 8)
end

local labels = {
  toolCall = 'tool',
  toolResult = 'result',
  approval = 'approval',
  status = 'status',
  compaction = 'compaction',
  thinking = 'thinking',
  hook = 'hook',
  process = 'process',
  stop = 'stop',
}

--- A readable line (or lines) for a non-text event.
---@param ev table
---@return string
function M.format(ev)
  local label = labels[ev.kind] or tostring(ev.kind)
  if ev.kind == 'toolResult' and ev.ok == false then
    label = 'result: error'
  elseif ev.kind == 'approval' and ev.state then
    label = 'approval: ' .. tostring(ev.state)
  elseif ev.kind == 'stop' and type(ev.report) == 'table' and ev.report.stopReason then
    label = 'stop: ' .. tostring(ev.report.stopReason)
  end
  local text = type(ev.text) == 'string' and ev.text or ''
  if ev.kind == 'toolCall' and text == '' and ev.tool then
    text = ('%s %s'):format(ev.tool, vim.json.encode(ev.arguments or vim.empty_dict()))
  end
  if ev.kind == 'toolResult' and ev.truncated and ev.spillPath then
    text = ('%s (truncated; full output in %s)'):format(text, ev.spillPath)
  end
  text = text:gsub('\n+$', '')
  local lines = vim.split(text, '\n', { plain = true })
  for i = 2, #lines do
    lines[i] = '    ' .. lines[i]
  end
  if ev.kind == 'steer' then
    -- the user's words, sent while the run ran
    return '» ' .. table.concat(lines, '\n')
  end
  return ('[%s] %s'):format(label, table.concat(lines, '\n'))
end

--- Writes the header line of a run, once.
---@param run_id string
---@param title? string
function M.begin_run(run_id, title)
  M.buf() -- a new buffer forgets the headers: create it first
  if headed[run_id] then
    return
  end
  headed[run_id] = true
  local header = ('## run %s'):format(short(run_id))
  if title and title ~= '' then
    title = title:gsub('%s+', ' ')
    if #title > 72 then
      title = title:sub(1, 69) .. '...'
    end
    header = header .. ': ' .. title
  end
  append_lines(header)
  last_run = run_id
end

--- Renders one `agentLsp/stream` event.
---@param ev table `{runId, seq, kind, text, ...}`
function M.add(ev)
  local run_id = tostring(ev.runId)
  if type(ev.seq) == 'number' then
    if last_seq[run_id] and ev.seq <= last_seq[run_id] then
      return -- already shown
    end
    last_seq[run_id] = ev.seq
  end
  if ev.kind == 'usage' then
    return -- after every model call: the statusline shows it (see runs.statusline)
  end
  if ev.kind ~= 'text' and ev.kind ~= 'steer' and not labels[ev.kind] then
    return -- a kind of a newer server: nothing to show
  end
  M.buf()
  if not headed[run_id] then
    -- the stream overtook the reply to agentLsp.run
    M.begin_run(run_id)
  elseif last_run ~= run_id then
    -- another run wrote in between: say whose output goes on
    append_lines(('[run %s]'):format(short(run_id)))
    last_run = run_id
  end
  if ev.kind == 'text' then
    append(type(ev.text) == 'string' and ev.text or '')
  elseif ev.kind == 'approval' and ev.state == 'pending' then
    -- answered right here with the keys (approval.lua), or with :AgentApprove
    local first = vim.api.nvim_buf_line_count(bufnr) + (at_line_start and 0 or 1)
    append_lines(M.format(ev) .. '\n    ' .. require('agent_lsp.approval').keys_line)
    local last = vim.api.nvim_buf_line_count(bufnr) - 1
    require('agent_lsp.approval').place(bufnr, require('agent_lsp.approval').key(ev.runId, ev.callId), first, last)
  else
    append_lines(M.format(ev))
  end
  if ev.kind == 'stop' then
    last_run = nil
  end
end

--- Shows the stream buffer in a window (an existing one in this tab, else a new split).
---@param opts? { enter?: boolean, split?: string }
---@return integer win
function M.open(opts)
  opts = opts or {}
  local buf = M.buf()
  local shown = vim.fn.win_findbuf(buf)
  for _, win in ipairs(shown) do
    if vim.api.nvim_win_get_tabpage(win) == vim.api.nvim_get_current_tabpage() then
      if opts.enter then
        vim.api.nvim_set_current_win(win)
      end
      return win
    end
  end
  local split = opts.split or require('agent_lsp.config').get().stream.split
  local win
  if split == 'tab' then
    local current = vim.api.nvim_get_current_win()
    vim.cmd.tabnew()
    local scratch = vim.api.nvim_get_current_buf()
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, buf)
    if vim.api.nvim_buf_is_valid(scratch) and scratch ~= buf then
      pcall(vim.api.nvim_buf_delete, scratch, {})
    end
    if not opts.enter then
      vim.api.nvim_set_current_win(current)
    end
  else
    win = vim.api.nvim_open_win(buf, opts.enter == true, { split = split, win = -1 })
  end
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].number = false
  vim.wo[win].spell = false
  pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(buf), 0 })
  return win
end

--- The buffer's text (for tests and scripts).
---@return string
function M.text()
  return table.concat(vim.api.nvim_buf_get_lines(M.buf(), 0, -1, false), '\n')
end

return M
