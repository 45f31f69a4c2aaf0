"""A prompt sent while the session's turn runs is queued behind it (Decision 49), session/cancel
ends the queued prompts with the running one, and a process that sees many sessions keeps only
the host's bound of them in memory (the others reopen from their transcripts on next use)."""

from __future__ import annotations

from pathlib import Path

from tests.acp.conftest import model_settings
from tests.acp.test_cancel import wait_until


def _prompt(client, session_id: str, text: str) -> int:
    return client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})


def test_a_second_prompt_waits_for_the_running_turn(connect, model, workspace: Path):
    model.add("queue", [{"text": "first answer", "ttft": 1.5}, {"text": "second answer"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    first = _prompt(client, session_id, "queue: the first")
    wait_until(lambda: len(model.requests_for("queue")) == 1)
    second = _prompt(client, session_id, "and the second")
    assert client.response(first)["stopReason"] == "end_turn"
    assert client.response(second)["stopReason"] == "end_turn"  # not an error: it waited
    requests = model.requests_for("queue")
    assert len(requests) == 2  # the second was sent after the first turn's answer
    users = [m["content"] for m in requests[1]["messages"] if m["role"] == "user"]
    assert users == ["queue: the first", "and the second"]
    assert [m["content"] for m in requests[1]["messages"] if m["role"] == "assistant"] == ["first answer"]
    client.close()


def test_cancel_ends_the_running_turn_and_every_queued_prompt(connect, model, workspace: Path):
    model.add("busy", [{"text": "never shown", "ttft": 30}, {"text": "afterwards"}])
    client = connect(model_settings(model, requestTimeout=60))
    client.initialize()
    session_id = client.new_session(workspace)
    running = _prompt(client, session_id, "busy: slow one")
    wait_until(lambda: len(model.requests_for("busy")) == 1)
    queued = [_prompt(client, session_id, f"queued {n}") for n in range(2)]
    client.notify("session/cancel", {"sessionId": session_id})
    assert client.response(running)["stopReason"] == "cancelled"
    assert [client.response(q)["stopReason"] for q in queued] == ["cancelled", "cancelled"]
    assert len(model.requests_for("busy")) == 1  # no queued prompt reached the model
    assert client.prompt(session_id, "still there?")["stopReason"] == "end_turn"
    users = [m["content"] for m in model.requests_for("busy")[-1]["messages"] if m["role"] == "user"]
    assert "queued 0" not in users and "queued 1" not in users  # never entered the session
    client.close()


def _agent_rss_kib(client) -> int:
    """The agent process's resident memory: the node client's only child."""
    children = Path(f"/proc/{client.proc.pid}/task/{client.proc.pid}/children").read_text().split()
    (pid,) = children
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def test_many_sessions_of_one_process_stay_within_the_bound(connect, model, workspace: Path):
    """80 sessions, each holding a 1 MB prompt: the process keeps 32 of them (the host's bound),
    so it grows by far less than what 80 of them take (about 180 MiB); a parked session continues as it was."""
    big = "x" * 1_000_000
    model.add("", [{"text": "ok", "repeat": 200}])
    client = connect(model_settings(model, contextWindow=1_000_000))
    client.initialize()
    first = client.new_session(workspace)
    client.request("session/set_mode", {"sessionId": first, "modeId": "plan"})
    assert client.prompt(first, f"the oldest {big[:100]}")["stopReason"] == "end_turn"
    before = _agent_rss_kib(client)
    for n in range(80):
        session_id = client.new_session(workspace)
        assert client.prompt(session_id, f"session {n} {big}", timeout=60)["stopReason"] == "end_turn"
    grown_mib = (_agent_rss_kib(client) - before) / 1024
    assert grown_mib < 130, f"80 sessions of 1 MB grew the agent by {grown_mib:.0f} MiB"
    # the oldest, parked long ago, continues with its history and its mode
    assert client.prompt(first, "and now?")["stopReason"] == "end_turn"
    request = model.requests_for("")[-1]
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert users[0].startswith("the oldest") and "and now?" in users[-1]
    offered = {t["function"]["name"] for t in request.get("tools", [])}
    assert "read_file" in offered and "edit_file" not in offered  # still in plan mode
    client.close()
