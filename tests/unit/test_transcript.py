"""Observability: one JSONL transcript per run, no API key anywhere, and it replays."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.ports import Decision
from agent_lsp.settings import Settings
from tests.unit.kit import API_KEY, ScriptedApprover, call, run, tools_reply, transcript_records

pytestmark = pytest.mark.timeout(30)


async def test_transcript_logs_every_step(model, workspace):
    model.add([
        tools_reply(call("read_file", id="r", path="calc.py"), text="Reading."),
        tools_reply(call("edit_file", id="e", path="calc.py", old_text="a - b", new_text="a + b"),
                    call("write_file", id="w", path="x.txt", content="x")),
        {"text": "Done."},
    ])
    approver = ScriptedApprover(Decision.ALLOW, Decision.DENY)

    report, _, _ = await run("fix add", model, workspace, approver=approver)

    records = transcript_records(report)
    assert Path(report.transcript).name == f"{report.run_id}.jsonl"
    for record in records:
        assert {"ts", "runId", "agentId", "turn", "type"} <= set(record), record
        assert record["runId"] == report.run_id and record["agentId"] == "main"
    types = [r["type"] for r in records]
    assert types[-1] == "stop" and records[-1]["report"] == report.to_dict()
    for kind in ("request", "reply", "toolCall", "approval", "toolResult"):
        assert kind in types, kind

    requests = [r for r in records if r["type"] == "request"]
    assert [r["turn"] for r in requests] == [1, 2, 3]
    # Each request logs its new messages only, not the whole history again.
    assert requests[0]["messages"] == [{"role": "user", "content": "fix add"}]
    assert "system" in requests[0] and "system" not in requests[1]
    assert [m["role"] for m in requests[1]["messages"]] == ["assistant", "tool"]
    assert [m["role"] for m in requests[2]["messages"]] == ["assistant", "tool", "tool"]

    replies = [r["reply"]["text"] for r in records if r["type"] == "reply"]
    assert replies == ["Reading.", "", "Done."]
    calls = [(r["turn"], r["callId"], r["tool"]) for r in records if r["type"] == "toolCall"]
    assert calls == [(1, "r", "read_file"), (2, "e", "edit_file"), (2, "w", "write_file")]
    approvals = [(r["callId"], r["decision"], r["byPolicy"]) for r in records if r["type"] == "approval"]
    assert approvals == [("r", "allow", True), ("e", "allow", False), ("w", "deny", False)], "policy grants are recorded too"
    results = {r["callId"]: r for r in records if r["type"] == "toolResult"}
    assert results["r"]["ok"] is True and "return a - b" in results["r"]["content"]
    assert results["w"]["ok"] is False and results["w"]["content"].startswith("denied:")
    assert all(r["ts"] <= s["ts"] for r, s in zip(records, records[1:], strict=False))


async def test_transcript_dir_setting(model, workspace, tmp_path):
    model.add([{"text": "hi"}])
    report, _, _ = await run("hello", model, workspace, transcriptDir=str(tmp_path / "my-runs"))
    assert Path(report.transcript).parent == tmp_path / "my-runs"
    assert transcript_records(report)[-1]["type"] == "stop"


async def test_transcripts_go_to_the_state_dir_not_the_workspace(model, workspace, state_dir):
    model.add([{"text": "hi"}])
    report, _, _ = await run("hello", model, workspace)
    assert Path(report.transcript).is_relative_to(state_dir / "runs")
    assert sorted(p.name for p in workspace.iterdir()) == ["README.md", "calc.py", "test_calc.py"]


async def test_the_api_key_never_appears(model, workspace):
    # The key reaches the conversation: a file holds it, the model repeats it in its text,
    # in a tool call's arguments and in the approval's detail, and a failing command prints it.
    (workspace / ".env").write_text(f"OPENAI_API_KEY={API_KEY}\n")
    model.add([
        tools_reply(call("read_file", path=".env"), text="Let me look at the env file."),
        tools_reply(call("write_file", path="leak.txt", content=f"key={API_KEY}\n"),
                    call("run_command", command=f"ls {API_KEY}"), text=f"The key is {API_KEY}, I will save it."),
        {"text": f"Your key is {API_KEY}. Done.", "chunk_size": 3},
    ])

    report, events, _ = await run("show me the key", model, workspace, approval={"default": "allow"})

    assert report.stop_reason == StopReason.DONE
    assert API_KEY not in Path(report.transcript).read_text()
    assert API_KEY not in json.dumps(report.to_dict())
    assert API_KEY not in events.text(), "not even across text deltas"
    for event in events:
        assert API_KEY not in event.text, event
        assert API_KEY not in json.dumps(wire_fields(event), default=str), event
    # Redaction hides the key, not the rest of the answer.
    assert "Done." in events.text() and "Done." in report.final_text


async def test_redaction_loses_no_text_that_only_looks_like_the_key(model, workspace):
    text = "Keys look like sk-test-secret-key-123 but this is not one. It ends with sk-test-s"
    model.add([{"text": text, "chunk_size": 2}])
    report, events, _ = await run("hi", model, workspace)
    assert events.text() == text == report.final_text
    assert [e.kind for e in events if e.kind != "usage"][-2:] == ["text", "stop"]


async def test_the_api_key_is_not_in_errors(model, workspace):
    model.add([{"status": 401, "message": f"Incorrect API key provided: {API_KEY}"}])
    report, events, _ = await run("hi", model, workspace)

    assert report.stop_reason == StopReason.FATAL
    assert "Incorrect API key" in report.error and API_KEY not in report.error
    assert API_KEY not in json.dumps(report.to_dict())
    assert API_KEY not in Path(report.transcript).read_text()
    assert all(API_KEY not in json.dumps(wire_fields(e), default=str) + e.text for e in events)


async def test_a_recorded_run_replays_to_the_same_result(model, workspace, tmp_path):
    replay_ws = tmp_path / "replay-ws"
    shutil.copytree(workspace, replay_ws)
    model.add("MAIN", [
        tools_reply(call("search", pattern="def add"), call("delegate", task="SUB: read the tests"), text="Looking."),
        tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")),
        tools_reply(call("write_file", path="NOTES.md", content="fixed add\n")),
        {"text": "Fixed add() and left a note."},
    ])
    model.add("SUB", [tools_reply(call("read_file", path="test_calc.py")), {"text": "test_add expects 5"}])

    recorded, recorded_events, _ = await run("MAIN: fix add", model, workspace)
    assert recorded.stop_reason == StopReason.DONE
    served = len(model.requests)

    settings = Settings(model=f"replay:{recorded.transcript}")
    replayed, replay_events, _ = await run("MAIN: fix add", model, replay_ws, settings=settings)

    assert len(model.requests) == served, "a replay makes no model request"
    assert replayed.stop_reason == StopReason.DONE
    assert replayed.final_text == recorded.final_text == "Fixed add() and left a note."
    assert replay_events.text() == recorded_events.text()
    assert [Path(u).name for u in replayed.edited_files] == ["calc.py", "NOTES.md"]
    for name in ("calc.py", "NOTES.md"):
        assert (replay_ws / name).read_text() == (workspace / name).read_text()
    assert replayed.turns == recorded.turns and replayed.tool_calls == recorded.tool_calls


async def test_replay_of_a_missing_transcript_is_fatal(model, workspace, tmp_path):
    settings = Settings(model=f"replay:{tmp_path / 'nope.jsonl'}")
    report, _, _ = await run("hi", model, workspace, settings=settings)
    assert report.stop_reason == StopReason.FATAL and "cannot read the replay transcript" in report.error


async def test_the_transcript_holds_every_calls_outcome_even_cancelled_ones(model, workspace):
    """Issue 11.6: policy grants and the synthetic "cancelled" results are in the transcript."""
    import asyncio

    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import Session, run_task
    from tests.unit.kit import Events, make_settings

    model.add([tools_reply(call("read_file", id="r", path="calc.py"), call("run_command", id="slow", command="sleep 30"),
                           call("write_file", id="w", path="x.txt", content="x")), {"text": "never"}])
    events = Events()
    task = asyncio.ensure_future(run_task("go", session=Session(), settings=make_settings(model, approval={"default": "allow"}),
                                          workspace=DiskWorkspace([workspace]), approver=ScriptedApprover(), emit=events))
    for _ in range(500):
        if any(e.kind == "status" and "sleep 30" in e.text for e in events):
            break
        await asyncio.sleep(0.02)
    task.cancel()
    report = await asyncio.wait_for(task, 10)
    records = transcript_records(report)
    approvals = {r["callId"]: (r["decision"], r["byPolicy"]) for r in records if r["type"] == "approval"}
    assert approvals["r"] == ("allow", True) and approvals["slow"] == ("allow", True)
    outcomes = {r["callId"]: r.get("outcome") for r in records if r["type"] == "toolResult"}
    assert outcomes == {"r": "ok", "slow": "cancelled", "w": "cancelled"}


async def test_nothing_is_recorded_after_the_stop_record(tmp_path):
    """Decision 73: the stop record is a transcript's last; a late writer (a hook still settling
    when a second cancel cut the run's end short) must not reopen the file and append."""
    from agent_lsp.agent.state.transcript import Redactor, Transcript

    transcript = Transcript(tmp_path / "r-1.jsonl", "r-1", Redactor([]))
    await transcript.write("main", 1, "stop", report={})
    await transcript.close()
    await transcript.write("main", 1, "hook", event="Notification")
    await transcript.flush()
    lines = (tmp_path / "r-1.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["stop"]
