"""Background processes in ACP (issue 35, Decision 86): the `process` events are thoughts in the
agent panel, `_agentLsp/stopProcess {runId, processId}` ends one, and the report lists them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.acp.driver import AcpError
from tests.acp.test_stop_cause import report_of, start, wait_until
from tests.unit.kit import call, tools_reply

PY = sys.executable
SLEEPER = "import time\nprint('zzz', flush=True)\nwhile True:\n    time.sleep(1)\n"


def test_stop_process_ends_one_and_the_turns_end_stops_the_other(connect, model, workspace: Path):
    (workspace / "sleeper.py").write_text(SLEEPER)
    model.add("hold", [
        tools_reply(call("run_command", "c1", command=f"{PY} -u sleeper.py", background=True),
                    call("run_command", "c2", command=f"{PY} -u sleeper.py", background=True)),
        {"text": "never shown", "ttft": 30},
    ])
    client, session_id = start(connect, model, workspace, approval={"default": "allow"}, requestTimeout=60)
    pending = client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hold: serve"}]})
    wait_until(lambda: len(model.requests_for("hold")) == 2)  # both started, the next call held
    run_id = next(u for u in client.updates(session_id, "tool_call"))["_meta"]["agentLsp"]["runId"]

    assert client.request("_agentLsp/stopProcess", {"runId": run_id, "processId": "p1"}) == {"stopped": True}
    assert client.request("_agentLsp/stopProcess", {"runId": run_id, "processId": "p1"}) == {"stopped": False}
    assert client.request("_agentLsp/stopProcess", {"runId": "r-none", "processId": "p1"}) == {"stopped": False}
    with pytest.raises(AcpError) as bad:
        client.request("_agentLsp/stopProcess", {"runId": run_id})
    assert bad.value.code == -32602
    client.notify("session/cancel", {"sessionId": session_id})
    response = client.response(pending, timeout=20)

    assert response["stopReason"] == "cancelled"
    assert [(p["processId"], p["state"]) for p in report_of(response)["processes"]] == [("p1", "stopped"), ("p2", "stopped")]
    thoughts = [u["content"]["text"] for u in client.updates(session_id, "agent_thought_chunk")]
    assert any("[process] background process p2 started" in t for t in thoughts), thoughts
    assert any("[process] background process p1 stopped" in t for t in thoughts), thoughts
    client.close()
