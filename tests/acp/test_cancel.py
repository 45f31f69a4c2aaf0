"""session/cancel ends the turn `cancelled` within a second (tests allow 5x): during a slow model
call, and during a pending permission whether or not the client answers it `cancelled`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.unit.kit import assert_valid_conversation, call, tools_reply

DEADLINE = 5.0  # CONTRACT: within a second; tests check about 5x


def wait_until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_cancel_during_a_slow_model_turn(connect, model, workspace: Path):
    model.add("slow", [{"text": "never shown", "ttft": 30}])
    model.add("slow", [{"text": "after the cancel"}])
    client = connect(model_settings(model, requestTimeout=60))
    client.initialize()
    session_id = client.new_session(workspace)
    pending = client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow: take your time"}]})
    wait_until(lambda: len(model.requests_for("slow")) == 1)
    started = time.monotonic()
    client.notify("session/cancel", {"sessionId": session_id})
    response = client.response(pending, timeout=DEADLINE + 5)
    assert time.monotonic() - started < DEADLINE
    assert response["stopReason"] == "cancelled"
    # the session goes on
    assert client.prompt(session_id, "and now?")["stopReason"] == "end_turn"
    assert client.text(session_id).endswith("after the cancel")
    client.close()


@pytest.mark.parametrize("answer", ["cancelled", "never"])
def test_cancel_during_a_pending_permission(connect, model, workspace: Path, answer: str):
    model.add("perm", [tools_reply(call("edit_file", "c-edit", path="calc.py", old_text="return a - b", new_text="return a + b"))])
    model.add("perm", [{"text": "fine"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("ask")
    pending = client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "perm: fix it"}]})
    permission = client.wait_for(lambda e: e["type"] == "permission", what="the permission request")
    started = time.monotonic()
    client.notify("session/cancel", {"sessionId": session_id})
    if answer == "cancelled":  # what ACP asks of the client
        client.answer(permission["key"], {"outcome": {"outcome": "cancelled"}})
    response = client.response(pending, timeout=DEADLINE + 5)
    assert time.monotonic() - started < DEADLINE
    assert response["stopReason"] == "cancelled"
    assert "a - b" in (workspace / "calc.py").read_text()
    edit = [u for u in client.updates(session_id, "tool_call_update") if u["toolCallId"] == "c-edit"]
    assert edit and edit[-1]["status"] == "failed"
    client.permissions("deny")
    assert client.prompt(session_id, "go on")["stopReason"] == "end_turn"
    assert_valid_conversation(model.requests_for("perm")[-1]["messages"])
    client.close()
