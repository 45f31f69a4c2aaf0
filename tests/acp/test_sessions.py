"""Persisted sessions over ACP: session/list, session/load from a new process (the conversation
replayed before the answer), and a follow-up that continues it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError
from tests.unit.kit import call, tools_reply


def test_load_a_session_in_a_new_process(connect, model, workspace: Path):
    model.add("remember", [
        tools_reply(call("read_file", "c-read", path="calc.py"), text="Looking."),
        {"text": "add subtracts."},
        {"text": "Yes, still."},
    ])
    first = connect(model_settings(model))
    first.initialize()
    session_id = first.new_session(workspace)
    assert first.prompt(session_id, "remember: what does add do?")["stopReason"] == "end_turn"
    assert first.close()["code"] == 0

    second = connect(model_settings(model))
    second.initialize()
    listed = second.request("session/list", {"cwd": str(workspace)})["sessions"]
    assert [s["sessionId"] for s in listed] == [session_id]
    assert listed[0]["cwd"] == str(workspace.resolve()) and listed[0]["title"].startswith("remember:")
    assert listed[0]["updatedAt"].endswith("Z")
    assert second.request("session/list", {})["sessions"][0]["sessionId"] == session_id

    load = second.send("session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []})
    assert second.response(load) is not None
    answered = next(i for i, e in enumerate(second.events) if e["type"] == "response" and e["id"] == load)
    replay = [e["params"]["update"] for e in second.events[:answered] if e["type"] == "update"]
    kinds = [u["sessionUpdate"] for u in replay]
    assert kinds == ["user_message_chunk", "agent_message_chunk", "tool_call", "agent_message_chunk"]
    assert replay[0]["content"]["text"] == "remember: what does add do?"
    assert replay[2]["toolCallId"] == "c-read" and replay[2]["status"] == "completed" and replay[2]["kind"] == "read"
    assert replay[3]["content"]["text"] == "add subtracts."

    assert second.prompt(session_id, "still?")["stopReason"] == "end_turn"
    messages = model.requests_for("remember")[-1]["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["remember: what does add do?", "still?"]
    second.close()


def test_load_of_an_unknown_or_foreign_session_is_an_error(connect, model, workspace: Path, tmp_path: Path):
    client = connect(model_settings(model))
    client.initialize()
    with pytest.raises(AcpError) as unknown:
        client.request("session/load", {"sessionId": "s-000000000000", "cwd": str(workspace), "mcpServers": []})
    assert unknown.value.code == -32002
    with pytest.raises(AcpError):
        client.request("session/list", {"cursor": "bogus"})
    assert client.request("session/list", {"cwd": str(workspace)})["sessions"] == []
    client.close()
