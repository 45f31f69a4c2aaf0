--- :AgentSessions (resume a past conversation of this workspace) and :AgentModel (pick the
--- model of the next runs), both picks over what the server lists.

local workspace = require('agent_lsp.workspace')

local M = {}

local function notify(msg, level)
  vim.notify('agent-lsp: ' .. msg, level or vim.log.levels.INFO)
end

--- `2025-11-30T19:31:02.123456+00:00` -> `2025-11-30 19:31 UTC`
---@param iso any
---@return string
local function when(iso)
  if type(iso) ~= 'string' then
    return '?'
  end
  return iso:sub(1, 16):gsub('T', ' ') .. ' UTC'
end

--- One line of the session pick.
---@param session table `{sessionId, title, created, updated, runs, lastStop, editedFiles}`
---@param current? string the session the next run continues
---@return string
function M.describe(session, current)
  local runs = tonumber(session.runs) or 0
  local stop = session.lastStop
  if stop == nil or stop == vim.NIL then
    stop = 'running'
  end
  local files = #(session.editedFiles or {})
  return ('%s%s  ·  %s  ·  %d run%s, last %s%s'):format(
    session.sessionId == current and '* ' or '',
    tostring(session.title or session.sessionId):gsub('%s+', ' '),
    when(session.updated),
    runs,
    runs == 1 and '' or 's',
    tostring(stop),
    files > 0 and ('  ·  %d file%s edited'):format(files, files == 1 and '' or 's') or ''
  )
end

--- :AgentSessions: pick one of the workspace's sessions (newest first, from every earlier
--- server process too); the next :AgentRun, :AgentAsk or :AgentPlan continues it.
function M.pick_session()
  workspace.with_current(function(client, root)
    workspace.execute(client, 'agentLsp.sessions', nil, function(list)
      if type(list) ~= 'table' or #list == 0 then
        notify('no earlier sessions in ' .. root)
        return
      end
      local current = workspace.session(root)
      vim.ui.select(list, {
        prompt = 'Resume which agent session?',
        kind = 'agent_lsp_session',
        format_item = function(session)
          return M.describe(session, current)
        end,
      }, function(session)
        if not session then
          return
        end
        workspace.set_session(root, session.sessionId)
        notify(('the next run continues "%s"'):format(session.title or session.sessionId))
      end)
    end)
  end)
end

--- :AgentModel [name]: the model the next runs of this workspace use (`agentLsp.run`'s
--- `model`). Without a name, a pick from the endpoint's `GET /models`; its error, if any, is
--- shown instead.
---@param name? string
function M.pick_model(name)
  workspace.with_current(function(client, root)
    if name and vim.trim(name) ~= '' then
      workspace.set_model(root, vim.trim(name))
      notify('the next runs use the model ' .. vim.trim(name))
      return
    end
    workspace.execute(client, 'agentLsp.models', nil, function(result)
      result = type(result) == 'table' and result or {}
      local models = result.models or {}
      if type(result.error) == 'string' then
        notify('cannot list the models: ' .. result.error, vim.log.levels.ERROR)
        if #models == 0 then
          return
        end
      end
      if #models == 0 then
        notify('the endpoint lists no models; name one: :AgentModel {name}', vim.log.levels.WARN)
        return
      end
      local current = workspace.model(root) or result.current
      vim.ui.select(models, {
        prompt = ('Model for the next runs (now: %s)'):format(tostring(current)),
        kind = 'agent_lsp_model',
        format_item = function(model)
          return (model == current and '* ' or '') .. model
        end,
      }, function(model)
        if model then
          workspace.set_model(root, model)
          notify('the next runs use the model ' .. model)
        end
      end)
    end)
  end)
end

return M
