"""OpenTelemetry over ACP (CONTRACT "Headless at scale", Telemetry): `agent-lsp acp` plugs the same
telemetry into its host; a turn is one trace, exported to a real OTLP/HTTP receiver by the time
the agent process has exited (the batch delay is long: only the exit flush can send it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_lsp.testing.otlp import OtlpReceiver
from tests.acp.conftest import model_settings
from tests.unit.kit import API_KEY, call, tools_reply

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def receiver():
    with OtlpReceiver() as r:
        yield r


def test_a_turn_over_acp_is_one_trace_flushed_when_the_agent_exits(connect, model, workspace: Path, receiver):
    model.add("look", [tools_reply(call("read_file", id="r1", path="calc.py")), {"text": "add is in calc.py"}])
    env = {k: "" for k in os.environ if k.startswith("OTEL_")}  # only what the test says
    env.update({"AGENT_LSP_ENABLE_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "60000", "OPENAI_API_KEY": API_KEY})
    client = connect(model_settings(model, approval={"default": "allow"}), env=env)
    client.initialize()
    session_id = client.new_session(workspace)
    response = client.prompt(session_id, "look around")
    assert response["stopReason"] == "end_turn", response
    report = response["_meta"]["agentLsp"]["report"]
    client.close()  # the client goes away: the agent exits, flushing what is pending

    assert receiver.wait(lambda: len(receiver.spans()) >= 3, timeout=0.5), f"flushed at exit: {receiver.bodies}"
    spans = receiver.spans()
    assert {s.trace_id for s in spans} == {spans[0].trace_id}, "one trace per turn"
    root = [s for s in spans if s.name == "invoke_agent agent-lsp"]
    assert len(root) == 1 and not root[0].parent_id
    assert root[0].attributes["gen_ai.conversation.id"] == report["sessionId"] == session_id
    assert root[0].attributes["agent_lsp.stop.reason"] == "done"
    assert sorted(s.name for s in spans if s.parent_id == root[0].span_id) == ["chat m", "chat m", "execute_tool read_file"]
    assert API_KEY.encode() not in receiver.raw() and b"look around" not in receiver.raw()
