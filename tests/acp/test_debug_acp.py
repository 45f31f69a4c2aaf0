"""The debugger through ACP (issue 36): an ACP editor has no `agentLsp/debug`, so debugpy started
by agent-lsp runs the session; the panel sees the debug calls as `execute` tool calls."""

from __future__ import annotations

from pathlib import Path

from tests.acp.conftest import model_settings
from tests.unit.kit import call, last_tool_results, tools_reply

PROGRAM = "def average(values):\n    count = len(values) - 1\n    return sum(values) / count\n\n\nprint(average([3, 5, 10]))\n"


def test_debug_calls_reach_the_panel_as_execute_tool_calls(connect, model, workspace: Path):
    (workspace / "avg.py").write_text(PROGRAM)
    model.add("debug-acp", [
        tools_reply(call("debug_start", "c-start", program="avg.py", breakpoints=[{"path": "avg.py", "line": 3}])),
        tools_reply(call("debug_step", "c-step", action="continue")),
        {"text": "count is one short"},
    ])
    client = connect(model_settings(model, approval={"default": "allow"}))
    client.initialize()
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "debug-acp: why?")["stopReason"] == "end_turn"

    calls = {u["toolCallId"]: u for u in client.updates(session_id, "tool_call")}
    assert calls["c-start"]["kind"] == "execute" and calls["c-start"]["title"] == "Debug avg.py"
    assert calls["c-step"]["kind"] == "execute" and calls["c-step"]["title"] == "Debugger: continue"
    done = {u["toolCallId"]: u for u in client.updates(session_id, "tool_call_update") if u.get("status")}
    assert done["c-start"]["status"] == "completed" and done["c-step"]["status"] == "completed"
    results = last_tool_results(model.requests[-1])
    assert "count (int) = 2" in last_tool_results(model.requests[1])["c-start"]
    assert results["c-step"] == "state: exited (0)\noutput:\n9.0"
    client.close()
    assert client.schema_problems() == []
