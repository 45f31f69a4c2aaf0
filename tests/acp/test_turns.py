"""A turn through the official TypeScript client: streaming, tool calls with kinds, locations and
diffs, permissions answered each way, edits through the editor (fs/*) or to disk, usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.unit.kit import API_KEY, call, last_tool_results, tools_reply

FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


def script_fix(model, key: str) -> None:
    model.add(key, [
        tools_reply(call("read_file", "c-read", path="calc.py")),
        tools_reply(call("edit_file", "c-edit", path="calc.py", old_text="return a - b", new_text="return a + b"), text="Fixing it."),
        {"text": "Fixed add."},
    ])


def tool_calls(client, session_id: str) -> dict[str, dict]:
    return {u["toolCallId"]: u for u in client.updates(session_id, "tool_call")}


def results(client, session_id: str) -> dict[str, dict]:
    return {u["toolCallId"]: u for u in client.updates(session_id, "tool_call_update") if u.get("status") in ("completed", "failed")}


@pytest.mark.parametrize("fs", [True, False], ids=["editor-fs", "disk"])
def test_read_then_edit_allowed(connect, model, workspace: Path, fs: bool):
    script_fix(model, "fix-allowed")
    client = connect(model_settings(model))
    client.initialize(fs=fs)
    session_id = client.new_session(workspace)
    client.permissions("allow")
    response = client.prompt(session_id, "fix-allowed: the add function is wrong")
    assert response["stopReason"] == "end_turn"
    assert response["_meta"]["agentLsp"]["report"]["stopReason"] == "done"
    assert (workspace / "calc.py").read_text() == FIXED
    # the turn's last words say that no check covered the edit (Verified done)
    assert "Fixing it." in client.text(session_id) and client.text(session_id).endswith("Fixed add.\n\n(not verified: calc.py)")

    calls = tool_calls(client, session_id)
    calc = str(workspace / "calc.py")
    assert calls["c-read"]["kind"] == "read" and calls["c-read"]["status"] == "pending"
    assert calls["c-read"]["locations"] == [{"path": calc}]
    assert calls["c-read"]["rawInput"] == {"path": "calc.py"}
    assert calls["c-edit"]["kind"] == "edit" and calls["c-edit"]["title"] == "Edit calc.py"
    done = results(client, session_id)
    assert done["c-read"]["status"] == "completed"
    assert done["c-edit"]["status"] == "completed"
    diff = next(c for c in done["c-edit"]["content"] if c["type"] == "diff")
    assert diff == {"type": "diff", "path": calc, "oldText": (workspace / "calc.py").read_text().replace("a + b", "a - b"), "newText": FIXED}

    [permission] = client.of("permission")
    request = permission["params"]
    assert request["sessionId"] == session_id
    assert [(o["kind"], o["name"]) for o in request["options"]] == [
        ("allow_once", "Allow"), ("allow_always", "Allow for session"), ("allow_always", "Always allow"),  # Decision 27
        ("reject_once", "Deny")]
    assert request["toolCall"]["toolCallId"] == "c-edit" and request["toolCall"]["kind"] == "edit"
    assert any(c["type"] == "diff" and c["newText"] == FIXED for c in request["toolCall"]["content"])

    writes = [e for e in client.of("fs") if e["method"] == "fs/write_text_file"]
    reads = [e for e in client.of("fs") if e["method"] == "fs/read_text_file"]
    if fs:
        assert [w["params"]["path"] for w in writes] == [calc] and writes[0]["params"]["content"] == FIXED
        assert reads
    else:
        assert writes == [] and reads == []

    usage = client.updates(session_id, "usage_update")
    assert usage and usage[-1]["size"] == 128000 and usage[-1]["used"] > 0
    assert client.close()["code"] == 0
    assert API_KEY not in client.wire.read_text()


def test_edit_denied_is_fed_back_and_the_turn_goes_on(connect, model, workspace: Path):
    script_fix(model, "fix-denied")
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("deny")
    assert client.prompt(session_id, "fix-denied: the add function is wrong")["stopReason"] == "end_turn"
    assert "a - b" in (workspace / "calc.py").read_text()
    assert results(client, session_id)["c-edit"]["status"] == "failed"
    fed_back = last_tool_results(model.requests_for("fix-denied")[-1])["c-edit"]
    assert fed_back.startswith("denied: the user said no")
    assert not [e for e in client.of("fs") if e["method"] == "fs/write_text_file"]
    client.close()


def test_allow_for_session_is_not_asked_again(connect, model, workspace: Path):
    model.add("twice", [
        tools_reply(call("edit_file", "e1", path="calc.py", old_text="return a - b", new_text="return a + b")),
        {"text": "one"},
        tools_reply(call("edit_file", "e2", path="calc.py", old_text="return a * b", new_text="return b * a")),
        {"text": "two"},
    ])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allowSession", otherwise="deny")
    assert client.prompt(session_id, "twice: first")["stopReason"] == "end_turn"
    assert client.prompt(session_id, "second")["stopReason"] == "end_turn"
    assert len(client.of("permission")) == 1
    assert "return b * a" in (workspace / "calc.py").read_text()
    client.close()


def test_an_unanswered_permission_is_withdrawn_after_the_approval_timeout(connect, model, workspace: Path):
    script_fix(model, "fix-unanswered")
    client = connect(model_settings(model, approval={"default": "ask", "timeout": 1}))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("never")
    assert client.prompt(session_id, "fix-unanswered: the add function is wrong")["stopReason"] == "end_turn"
    assert "a - b" in (workspace / "calc.py").read_text()
    fed_back = last_tool_results(model.requests_for("fix-unanswered")[-1])["c-edit"]
    assert fed_back.startswith("denied: unanswered after 1 s")
    client.close()
