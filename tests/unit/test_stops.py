"""The four exits, each explained: done, max_turns, fatal, cancelled."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import Session, run_task
from agent_lsp.agent.messages import StopReason
from tests.unit.kit import (
    Events,
    ScriptedApprover,
    alive,
    assert_history_closed,
    assert_valid_conversation,
    call,
    make_settings,
    run,
    tools_reply,
    transcript_records,
)

pytestmark = pytest.mark.timeout(30)

FAST_RETRY = {"retry_after": 0.01}  # the SDK honours retry-after: keep its retries quick


def _report_is_complete(report) -> None:
    data = report.to_dict()
    assert set(data) >= {"runId", "sessionId", "stopReason", "turns", "finalText", "summary", "editedFiles",
                         "toolCalls", "denied", "usage", "transcript"}
    assert Path(report.transcript).exists()
    assert transcript_records(report)[-1]["type"] == "stop"


async def test_done(model, workspace):
    model.add([tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")), {"text": "Fixed add."}])
    report, events, _ = await run("fix", model, workspace)

    assert report.stop_reason == StopReason.DONE and report.error is None
    assert report.summary.startswith("Done:") and "calc.py" in report.summary
    assert report.usage.prompt_tokens > 0 and report.usage.completion_tokens > 0
    assert events[-1].kind == "stop" and wire_fields(events[-1])["report"] == report.to_dict()
    _report_is_complete(report)


async def test_max_turns_says_what_was_done_and_what_is_left(model, workspace):
    model.add([
        tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b"), text="Fixing add first."),
        tools_reply(call("read_file", path="test_calc.py"), text="Now checking the tests."),
        tools_reply(call("list_files"), text="More to do."),
    ])

    report, _, _ = await run("fix and test", model, workspace, maxTurns=2)

    assert report.stop_reason == StopReason.MAX_TURNS
    assert report.turns == 2 and len(model.requests) == 2
    assert report.tool_calls == 2
    assert "turn limit" in report.summary and "maxTurns" in report.summary
    assert "calc.py" in report.summary, "what was done"
    assert "Left:" in report.summary and "not finished" in report.summary, "what is left"
    assert report.final_text == "Now checking the tests."
    assert "return a + b" in (workspace / "calc.py").read_text(), "work done is kept"
    _report_is_complete(report)


async def test_fatal_when_the_endpoint_keeps_failing(model, workspace):
    model.add([{"status": 500, "message": "upstream exploded", "repeat": 3, **FAST_RETRY}])

    report, _, _ = await run("anything", model, workspace)

    assert report.stop_reason == StopReason.FATAL
    assert len(model.requests) == 3, "the SDK retried 5xx twice before giving up"
    assert "500" in report.error and "upstream exploded" in report.error
    assert report.summary.startswith("Stopped by an error") and "Left:" in report.summary
    _report_is_complete(report)


async def test_a_transient_500_is_retried_by_the_sdk(model, workspace):
    model.add([{"status": 500, **FAST_RETRY}, {"status": 429, **FAST_RETRY}, {"text": "made it"}])
    report, _, _ = await run("anything", model, workspace)
    assert report.stop_reason == StopReason.DONE and report.final_text == "made it"


async def test_a_cut_stream_that_showed_nothing_is_sent_again(model, workspace):
    model.add([{"text": "", "fault": "cut"}, {"text": "second try"}])
    report, events, _ = await run("anything", model, workspace)

    assert report.stop_reason == StopReason.DONE and report.final_text == "second try"
    assert len(model.requests) == 2
    assert any("sending it again" in e.text for e in events.of("status"))


async def test_a_cut_stream_that_showed_text_is_fatal_not_resent(model, workspace):
    """CONTRACT Decision 4: what the user saw is never shown twice; the stop says where it was cut."""
    model.add([{"text": "a reply that gets cut somewhere in the middle", "chunk_size": 4, "fault": "cut"},
               {"text": "never asked for"}])
    report, events, _ = await run("anything", model, workspace)

    assert report.stop_reason == StopReason.FATAL
    assert len(model.requests) == 1
    assert "cut after" in report.error and "characters" in report.error
    assert events.text() and events.text() in "a reply that gets cut somewhere in the middle"


async def test_a_stream_cut_every_time_is_fatal(model, workspace):
    model.add([{"text": "", "fault": "cut", "repeat": 5}])
    report, _, _ = await run("anything", model, workspace)

    assert report.stop_reason == StopReason.FATAL
    assert len(model.requests) == 3
    assert "cut" in report.error


async def test_garbage_streams_are_fatal_after_retries(model, workspace):
    model.add([{"text": "broken", "fault": "garbage", "repeat": 5}])
    report, _, _ = await run("anything", model, workspace)

    assert report.stop_reason == StopReason.FATAL
    assert len(model.requests) == 3
    assert "not a valid completion stream" in report.error


async def test_a_stream_without_a_finish_after_text_is_fatal(model, workspace):
    model.add([{"text": "broken", "fault": "no_finish", "repeat": 5}])
    report, _, _ = await run("anything", model, workspace)

    assert report.stop_reason == StopReason.FATAL
    assert len(model.requests) == 1
    assert "finish reason" in report.error


async def test_hang_past_request_timeout_is_fatal(model, workspace):
    model.add([{"fault": "hang", "repeat": 3}])
    started = time.monotonic()
    report, _, _ = await run("anything", model, workspace, requestTimeout=0.2)

    assert report.stop_reason == StopReason.FATAL
    assert "requestTimeout" in report.error and "not sent again" in report.error
    assert time.monotonic() - started < 10


async def _start(prompt, model, workspace, session, events, **values):
    task = asyncio.create_task(run_task(prompt, session=session, settings=make_settings(model, **values),
                                        workspace=DiskWorkspace([workspace]), approver=ScriptedApprover(), emit=events))
    return task


async def _until(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def test_cancel_mid_model_call(model, workspace):
    model.add([tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b"), text="Fixing."),
               {"text": "never seen", "ttft": 20}])
    session, events = Session(), Events()
    task = await _start("fix", model, workspace, session, events)

    await _until(lambda: len(model.log) == 2)  # the second model call is in flight
    task.cancel()
    report = await asyncio.wait_for(task, 5)

    assert report.stop_reason == StopReason.CANCELLED
    assert report.summary.startswith("Cancelled") and "calc.py" in report.summary and "kept" in report.summary
    assert "return a + b" in (workspace / "calc.py").read_text(), "the edit already made is kept"
    assert report.edited_files == [(workspace / "calc.py").resolve().as_uri()]
    assert events[-1].kind == "stop"
    assert_history_closed(session.messages())
    assert session.running is None
    _report_is_complete(report)


@pytest.mark.timeout(60)
async def test_cancel_mid_command_kills_it_and_closes_every_call(model, workspace):
    (workspace / "sleeper.py").write_text(
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('pids.txt', 'w').write(f'{os.getpid()} {child.pid}')\n"
        "time.sleep(60)\n"
    )
    model.add([tools_reply(
        call("write_file", id="w", path="before.txt", content="made before the command\n"),
        call("run_command", id="c", command=f"{sys.executable} sleeper.py"),
        call("write_file", id="w2", path="after.txt", content="never\n"),
    ), {"text": "never seen"}])
    session, events = Session(), Events()
    task = await _start("sleep", model, workspace, session, events)

    pids_file = workspace / "pids.txt"
    await _until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert all(alive(p) for p in pids)
    task.cancel()
    report = await asyncio.wait_for(task, 5)

    assert report.stop_reason == StopReason.CANCELLED
    await _until(lambda: not any(alive(p) for p in pids), timeout=5)  # the command and its child are gone
    assert (workspace / "before.txt").read_text() == "made before the command\n"
    assert not (workspace / "after.txt").exists()
    assert_history_closed(session.messages())
    results = {m["tool_call_id"]: m["content"] for m in session.messages() if m["role"] == "tool"}
    assert results["w"].startswith("applied:")
    assert results["c"].startswith("cancelled") and results["w2"].startswith("cancelled")

    # A follow-up in the same session sends no dangling tool call.
    model.add([{"text": "follow-up answer"}])
    follow, _, _ = await run("what happened?", model, workspace, session=session)
    assert follow.stop_reason == StopReason.DONE
    assert_valid_conversation(model.requests[-1]["messages"])


async def test_cancel_while_an_approval_waits(model, workspace):
    class Never:
        async def ask(self, request):
            await asyncio.sleep(60)

    model.add([tools_reply(call("write_file", id="w", path="x.txt", content="x")), {"text": "never"}])
    session, events = Session(), Events()
    task = asyncio.create_task(run_task("write", session=session, settings=make_settings(model), workspace=DiskWorkspace([workspace]),
                                        approver=Never(), emit=events))
    await _until(lambda: any(e.kind == "approval" for e in events))
    task.cancel()
    report = await asyncio.wait_for(task, 5)

    assert report.stop_reason == StopReason.CANCELLED
    assert [wire_fields(e)["state"] for e in events.of("approval")] == ["pending", "withdrawn"]
    assert not (workspace / "x.txt").exists()
    assert_history_closed(session.messages())


async def test_a_cancel_after_the_stop_is_decided_still_returns_the_report():
    """Found by the cancel property test: a cancel landing while the stop line is written
    must not lose the report (nor the transcript's stop line, nor the stop event)."""
    import asyncio

    from agent_lsp.agent.loop.handle import uncancellable as _uncancellable

    finished = []

    async def closing() -> str:
        await asyncio.sleep(0.2)  # e.g. the transcript's last write
        finished.append(True)
        return "report"

    task = asyncio.ensure_future(_uncancellable(closing()))
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.sleep(0.01)
    task.cancel()  # twice: an impatient user
    assert await asyncio.wait_for(task, 2) == "report"
    assert finished == [True]
