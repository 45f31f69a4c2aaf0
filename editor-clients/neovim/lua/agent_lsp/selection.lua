--- The selection :AgentAsk works on, as byte positions and as an LSP range (0-based, in the
--- client's position encoding, UTF-16 for agent-lsp).

local M = {}

---@class agent_lsp.Selection
---@field srow integer 1-based first line
---@field scol integer 0-based byte column of the first character
---@field erow integer 1-based last line
---@field ecol integer 0-based byte column just past the last character

---@param bufnr integer
---@param row integer 1-based
---@return string
local function line(bufnr, row)
  return vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ''
end

--- Byte column just past the character that starts at byte `col` (0-based) of `text`.
---@param text string
---@param col integer
---@return integer
local function past_char(text, col)
  if col >= #text then
    return #text
  end
  return col + 1 + vim.str_utf_end(text, col + 1)
end

---@param bufnr integer
---@param mode string visual mode: 'v', 'V' or CTRL-V
---@param a [integer, integer] (1-based row, 0-based byte col)
---@param b [integer, integer]
---@return agent_lsp.Selection
local function from_positions(bufnr, mode, a, b)
  if b[1] < a[1] or (b[1] == a[1] and b[2] < a[2]) then
    a, b = b, a
  end
  if mode ~= 'v' then
    -- linewise (and blockwise, taken as its lines)
    return { srow = a[1], scol = 0, erow = b[1], ecol = #line(bufnr, b[1]) }
  end
  local last = line(bufnr, b[1])
  local ecol = vim.o.selection == 'exclusive' and math.min(b[2], #last) or past_char(last, b[2])
  return { srow = a[1], scol = math.min(a[2], #line(bufnr, a[1])), erow = b[1], ecol = ecol }
end

--- The selection of a command: the visual selection when the command runs from visual mode
--- (`<Cmd>` mapping) or on the `'<,'>` range, else the given line range; nil without a range.
---@param bufnr integer
---@param cmd_opts { range: integer, line1?: integer, line2?: integer }
---@return agent_lsp.Selection?
function M.get(bufnr, cmd_opts)
  local mode = vim.fn.mode()
  if mode == 'v' or mode == 'V' or mode == '\22' then
    local v, cur = vim.fn.getpos('v'), vim.fn.getpos('.')
    vim.api.nvim_feedkeys(vim.keycode('<Esc>'), 'nx', false)
    return from_positions(bufnr, mode, { v[2], v[3] - 1 }, { cur[2], cur[3] - 1 })
  end
  if not cmd_opts or cmd_opts.range == 0 then
    return nil
  end
  local s = vim.api.nvim_buf_get_mark(bufnr, '<')
  local e = vim.api.nvim_buf_get_mark(bufnr, '>')
  if s[1] == cmd_opts.line1 and e[1] == cmd_opts.line2 then
    return from_positions(bufnr, vim.fn.visualmode(), s, e)
  end
  return from_positions(bufnr, 'V', { cmd_opts.line1, 0 }, { cmd_opts.line2, 0 })
end

--- The LSP range of a selection (the server reads the text itself).
---@param bufnr integer
---@param sel agent_lsp.Selection
---@param encoding string 'utf-8', 'utf-16' or 'utf-32'
---@return lsp.Range range
function M.to_lsp(bufnr, sel, encoding)
  local first, last = line(bufnr, sel.srow), line(bufnr, sel.erow)
  return {
    start = { line = sel.srow - 1, character = vim.str_utfindex(first, encoding, sel.scol, false) },
    ['end'] = { line = sel.erow - 1, character = vim.str_utfindex(last, encoding, sel.ecol, false) },
  }
end

return M
