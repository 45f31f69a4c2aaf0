"""agentLsp.history's rules (Decisions 52, 78): which stream kinds it keeps, how results and
approval diffs are cut, text coalesced, seq renumbered, images as placeholders, and the run's
history read back from its transcript equal to the one kept in memory."""

from __future__ import annotations

import base64
import json

import pytest

from agent_lsp.agent.events import (
    ApprovalEvent,
    ApprovalState,
    StatusEvent,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from agent_lsp.agent.images import ImagePart
from agent_lsp.agent.messages import Outcome, RunReport, StopCause, StopReason, Usage
from agent_lsp.agent.state.history import HISTORY_CHARS, RunEvents, history_event, read_run_events
from agent_lsp.agent.state.transcript import Redactor, Transcript

pytestmark = pytest.mark.timeout(30)

REPORT = RunReport("r-1", "s-1", StopReason.DONE, StopCause.ANSWER, 2, "fixed", "Done.", [], 1, 0, Usage(1, 2), "/t")


def test_usage_and_status_are_left_out_other_kinds_kept():
    assert history_event({"kind": "usage", "text": "x"}) is None
    assert history_event({"kind": "status", "text": "x"}) is None
    for kind in ("text", "thinking", "toolCall", "hook", "compaction", "steer", "stop"):
        assert history_event({"kind": kind, "text": "x", "seq": 3}) == {"kind": kind, "text": "x", "seq": 3}


def test_a_result_is_cut_to_2000_characters():
    long = "y" * 5000
    out = history_event({"kind": "toolResult", "text": long, "tail": long, "callId": "c", "ok": True})
    assert len(out["text"]) == HISTORY_CHARS == 2000 and out["text"].endswith("…")
    assert out["text"][:-1] == long[:1999] and len(out["tail"]) == 2000 and out["ok"] is True
    short = history_event({"kind": "toolResult", "text": "short"})
    assert short["text"] == "short"


def test_an_approval_loses_new_text_and_its_diffs_are_cut():
    diff = "+" + "z" * 4000
    out = history_event({"kind": "approval", "state": "pending", "uri": "file:///a", "diff": diff,
                         "newText": "whole file", "files": [{"uri": "file:///b", "diff": diff}]})
    assert "newText" not in out and len(out["diff"]) == 2000 and out["diffTruncated"] is True
    assert len(out["files"][0]["diff"]) == 2000 and out["files"][0]["uri"] == "file:///b"
    small = history_event({"kind": "approval", "uri": "file:///a", "diff": "+x", "newText": "x"})
    assert small == {"kind": "approval", "uri": "file:///a", "diff": "+x"}


def test_text_is_coalesced_per_turn_and_seq_renumbered():
    log = RunEvents("r-1")
    for event in [
        ThinkingDelta("let me "), ThinkingDelta("think"),
        TextDelta("Hel"), UsageEvent("u", Usage(), 1, 2), TextDelta("lo"),
        ToolCallEvent("read a", "c1", "read_file", {"path": "a"}),
        TextDelta("sub", agent_id="main/1"), TextDelta("main"), TextDelta(" again"),
        StatusEvent("waiting", 2),
        ToolResultEvent("r" * 3000, "c1", Outcome.OK),
        TextDelta("Done."),
        StopEvent("Done.", REPORT),
    ]:
        log.add(event)
    events = log.snapshot()
    assert [(e["kind"], e["agentId"], e.get("text")) for e in events[:-2]] == [
        ("thinking", "main", "let me think"),
        ("text", "main", "Hello"),
        ("toolCall", "main", "read a"),
        ("text", "main/1", "sub"),
        ("text", "main", "main again"),
        ("toolResult", "main", "r" * 1999 + "…"),
    ]
    assert events[-2]["text"] == "Done."  # flushed before the stop
    assert events[-1] == {"report": json.loads(json.dumps(REPORT.to_dict())), "agentId": "main",
                          "runId": "r-1", "seq": 7, "kind": "stop", "text": "Done."}
    assert [e["seq"] for e in events] == list(range(8))


def test_a_running_runs_snapshot_has_its_text_so_far_and_nothing_follows_the_seal():
    log = RunEvents("r-1")
    log.add(TextDelta("partial"))
    assert [(e["kind"], e["text"], e["seq"]) for e in log.snapshot()] == [("text", "partial", 0)]
    log.seal()
    log.add(TextDelta("late"))  # after the transcript's stop record: not in either history
    log.add(StopEvent("Done.", REPORT))
    assert [e["kind"] for e in log.snapshot()] == ["text", "stop"]


async def test_the_transcript_gives_back_the_same_history(tmp_path):
    png = base64.b64encode(b"\x89PNG" + b"0" * 96).decode()
    transcript = Transcript(tmp_path / "r-1.jsonl", "r-1", Redactor(["sk-SECRET-KEY"]))
    log = RunEvents("r-1", transcript, [ImagePart("image/png", png)])
    assert log.images == [{"mimeType": "image/png", "bytes": 100}]
    log.add(TextDelta("thinking aloud"))
    log.add(ApprovalEvent("edit a", "c1", "edit_file", "edit a.py", ApprovalState.PENDING,
                          uri="file:///a.py", diff="-x\n+y", new_text="y"))
    log.add(ToolResultEvent("ok", "c1", Outcome.OK, tail="t" * 2500))
    log.seal()
    await transcript.write("main", 2, "stop", report=REPORT.to_dict())
    await transcript.close()
    log.add(StopEvent("Done.", REPORT))

    read = read_run_events("r-1", transcript.path)
    assert read.snapshot() == log.snapshot() and read.images == log.images
    assert "newText" not in read.snapshot()[1] and png not in transcript.path.read_text()


def test_a_missing_or_damaged_transcript_gives_what_it_can(tmp_path):
    assert read_run_events("r-1", tmp_path / "gone.jsonl").snapshot() == []
    path = tmp_path / "r-1.jsonl"
    good = {"type": "event", "event": {"kind": "text", "text": "kept", "seq": 0}}
    path.write_text("{not json\n" + json.dumps(good) + '\n{"type": "ev')
    assert read_run_events("r-1", path).snapshot() == [good["event"]]
