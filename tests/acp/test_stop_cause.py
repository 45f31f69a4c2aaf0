"""Decision 24 over ACP: the stop reason comes from the typed stopCause, never from the error's
words (an endpoint error that *says* "output limit" or "content filter" is still an error), and
every stop's report (in `_meta`, or in the error's data) carries the cause; session/cancel is the
user, the client going away mid-turn a shutdown."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AGENT_ARGV, AcpError
from tests.e2e.harness import find_processes, is_alive
from tests.e2e.test_lifecycle import parent_of
from tests.unit.kit import call, tools_reply


def start(connect, model, workspace: Path, **settings):
    client = connect(model_settings(model, **settings))
    client.initialize()
    return client, client.new_session(workspace)


def report_of(response: dict) -> dict:
    return response["_meta"]["agentLsp"]["report"]


@pytest.mark.parametrize(("script", "acp", "cause"), [
    ([{"text": "aaaa", "finish_reason": "length"}, {"text": "bbbb", "finish_reason": "length"}], "max_tokens", "output_limit"),
    ([{"text": "", "finish_reason": "content_filter"}], "refusal", "content_filter"),
    ([{"refusal": "I can't help with that."}], "refusal", "content_filter"),  # OpenAI's refusal deltas (issue 32)
    ([{"text": "fine"}], "end_turn", "answer"),
])
def test_the_acp_stop_reason_follows_the_cause(connect, model, workspace: Path, script, acp, cause):
    model.add("go", script)
    client, session_id = start(connect, model, workspace)
    response = client.prompt(session_id, "go: now")
    assert response["stopReason"] == acp
    assert report_of(response)["stopCause"] == cause
    if script[0].get("refusal"):
        assert report_of(response)["error"] == script[0]["refusal"]
    client.close()


@pytest.mark.parametrize("words", ["the reply was cut at its output limit", "blocked by the content filter"])
def test_an_endpoint_error_that_uses_those_words_is_still_an_error(connect, model, workspace: Path, words):
    """The old mapping read the error's text: these errors came back as max_tokens / refusal."""
    model.add("broken", [{"status": 400, "message": words}])
    client, session_id = start(connect, model, workspace)
    with pytest.raises(AcpError) as fatal:
        client.prompt(session_id, "broken: hello")
    assert fatal.value.code == -32603 and words in fatal.value.message
    report = fatal.value.data["report"]
    assert (report["stopReason"], report["stopCause"]) == ("fatal", "model")
    client.close()


def wait_until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_session_cancel_is_the_user(connect, model, workspace: Path):
    model.add("slow", [{"text": "never shown", "ttft": 30}])
    client, session_id = start(connect, model, workspace, requestTimeout=60)
    pending = client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow: take your time"}]})
    wait_until(lambda: len(model.requests_for("slow")) == 1)
    client.notify("session/cancel", {"sessionId": session_id})
    response = client.response(pending, timeout=10)
    assert response["stopReason"] == "cancelled" and report_of(response)["stopCause"] == "user"
    client.close()


def agent_pid(client) -> int:
    """The `agent-lsp acp` process the test client started (its child)."""
    for _ in range(200):
        for pid in find_processes(AGENT_ARGV):
            if parent_of(pid) == client.proc.pid:
                return pid
        time.sleep(0.02)
    raise AssertionError("the agent process was not found")


@pytest.mark.parametrize(("ending", "cause"), [("client-quits", "shutdown"), ("SIGTERM", "signal"), ("SIGHUP", "signal")])
def test_the_agent_going_away_mid_turn_says_why(connect, model, workspace: Path, state_dir: Path, ending, cause):
    model.add("slow", [{"text": "never shown", "ttft": 30}])
    client, session_id = start(connect, model, workspace, requestTimeout=60)
    client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow: take your time"}]})
    wait_until(lambda: len(model.requests_for("slow")) == 1)
    if ending == "client-quits":
        client.close()  # the editor quits: the agent's stdin ends
    else:
        pid = agent_pid(client)
        os.kill(pid, getattr(signal, ending))
        wait_until(lambda: not is_alive(pid), 10)
    transcripts = list((state_dir / "runs").glob("*.jsonl"))
    assert len(transcripts) == 1
    stop = json.loads(transcripts[0].read_text().strip().splitlines()[-1])
    assert stop["type"] == "stop"
    assert (stop["report"]["stopReason"], stop["report"]["stopCause"]) == ("cancelled", cause)


def test_rewinding_a_running_turn_by_run_id_says_it_is_still_running(connect, model, workspace: Path):
    """`_agentLsp/rewind` without a sessionId tells a running run from an unknown one by the
    error's type (it once matched the words "still running")."""
    model.add("hold", [tools_reply(call("edit_file", "e1", path="calc.py", old_text="return a - b", new_text="return a + b")),
                       {"text": "never shown", "ttft": 30}])
    client, session_id = start(connect, model, workspace, approval={"default": "allow"}, requestTimeout=60)
    pending = client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hold: fix add"}]})
    wait_until(lambda: len(model.requests_for("hold")) == 2)  # the edit is made, the next model call is held
    run_id = next(u for u in client.updates(session_id, "tool_call"))["_meta"]["agentLsp"]["runId"]
    with pytest.raises(AcpError) as running:
        client.request("_agentLsp/rewind", {"runId": run_id})
    assert running.value.code == -32602 and "still running" in running.value.message
    client.notify("session/cancel", {"sessionId": session_id})
    assert client.response(pending, timeout=10)["stopReason"] == "cancelled"
    client.close()
