"""OpenTelemetry from the language server (CONTRACT "Headless at scale", Telemetry): turned on by
the user's own initializationOptions, exported to a real OTLP/HTTP receiver, the pending spans and
metrics flushed when the editor shuts the server down."""

from __future__ import annotations

import os
import sys

import pytest

from agent_lsp.testing.otlp import OtlpReceiver
from tests.unit.kit import API_KEY, call, tools_reply

PROBE = "import os\nprint('TP=' + os.environ.get('TRACEPARENT', 'none'))\n"


@pytest.fixture
def receiver():
    with OtlpReceiver() as r:
        yield r


def clean_env(receiver: OtlpReceiver) -> dict[str, str]:
    env = {k: "" for k in os.environ if k.startswith("OTEL_") or k == "AGENT_LSP_ENABLE_TELEMETRY"}
    return {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}


@pytest.mark.parametrize("enabled", [True, False])
async def test_a_run_in_the_editor_is_traced_when_the_user_turns_telemetry_on(open_editor, model, workspace, receiver, enabled):
    (workspace / "probe.py").write_text(PROBE)
    model.add("MAIN", [
        tools_reply(call("run_command", id="cmd", command=f"{sys.executable} probe.py"),
                    call("delegate", id="d1", task="SUB-A: who calls add?")),
        {"text": "All done."},
    ])
    model.add("SUB-A", [tools_reply(call("read_file", id="r1", path="calc.py")), {"text": "add is in calc.py"}])
    editor = await open_editor("visual-studio-code", init={"telemetry": {"enabled": enabled}}, env=clean_env(receiver))
    editor.approval_answers = ["Allow"]
    started = await editor.run("MAIN: look around")
    report = await editor.wait_stop(started["runId"], timeout=30)
    assert report["stopReason"] == "done", report
    output = [m["content"] for m in model.requests_for("MAIN")[1]["messages"] if m.get("tool_call_id") == "cmd"][0]
    await editor.quit()  # shutdown: what is pending goes out now (the batch delay is 5 s, the metrics' 60 s)

    if not enabled:
        assert receiver.bodies == [] and "TP=none" in output
        return
    assert receiver.wait(lambda: receiver.points("gen_ai.client.token.usage"), timeout=5), "flushed at shutdown"
    spans = receiver.spans()
    root = [s for s in spans if s.name == "invoke_agent agent-lsp" and not s.parent_id]
    assert len(root) == 1 and root[0].attributes["gen_ai.conversation.id"] == report["sessionId"]
    names = sorted(s.name for s in spans if s.parent_id == root[0].span_id)
    assert names == ["chat m", "chat m", "execute_tool delegate", "execute_tool run_command"]
    delegate = next(s for s in spans if s.name == "execute_tool delegate")
    sub = next(s for s in spans if s.parent_id == delegate.span_id)
    assert sub.name == "invoke_agent agent-lsp"
    assert sorted(s.name for s in spans if s.parent_id == sub.span_id) == ["chat m", "chat m", "execute_tool read_file"]
    command = next(s for s in spans if s.name == "execute_tool run_command")
    assert command.attributes["agent_lsp.approval.decision"] == "allow"  # the user's answer in the editor
    assert [e[1]["agent_lsp.approval.by_policy"] for e in command.events] == [False]
    assert f"TP=00-{command.trace_id}-{command.span_id}-" in output
    assert API_KEY.encode() not in receiver.raw() and b"MAIN: look around" not in receiver.raw()


async def test_every_span_of_two_runs_at_once_is_under_its_own_runs_agent_span(open_editor, model, workspace, receiver):
    """Issue 32: over LSP as headless and over ACP, a run's `chat` and `execute_tool` spans are
    children of that run's `invoke_agent` span, also with another run going at the same time."""
    model.add("ONE", [tools_reply(call("read_file", id="r1", path="calc.py"),
                                  call("edit_file", id="e1", path="calc.py", old_text="a - b", new_text="a + b")),
                      {"text": "one"}])
    model.add("TWO", [tools_reply(call("run_command", id="c2", command="echo hi"), call("search", id="s2", pattern="add")),
                      {"text": "two"}])
    init = {"telemetry": {"enabled": True}, "approval": {"default": "allow"}}
    editor = await open_editor("neovim", init=init, env=clean_env(receiver))
    editor.open("calc.py")
    first = await editor.run("ONE", textDocument={"uri": editor.uri("calc.py")})
    second = await editor.run("TWO")
    for started in (first, second):
        assert (await editor.wait_stop(started["runId"], 30))["stopReason"] == "done"
    await editor.quit()
    assert receiver.wait(lambda: len(receiver.spans()) >= 10, timeout=5), "flushed at shutdown"
    spans = receiver.spans()
    for started, tools in ((first, ["read_file", "edit_file"]), (second, ["run_command", "search"])):
        [agent] = [s for s in spans if s.attributes.get("agent_lsp.run.id") == started["runId"]]
        assert not agent.parent_id
        under = sorted(s.name for s in spans if s.parent_id == agent.span_id)
        assert under == sorted(["chat m", "chat m", *(f"execute_tool {t}" for t in tools)])
        assert {s.trace_id for s in spans if s.parent_id == agent.span_id} == {agent.trace_id}
