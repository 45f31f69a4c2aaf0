"""Issue 10.11, 10.15, 10.16 and Decisions 4-7: a model that trickles, sends huge arguments,
reuses tool-call ids or is cut at its output limit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.messages import StopReason
from tests.unit.kit import (
    assert_valid_conversation,
    call,
    last_tool_results,
    run,
    tools_reply,
    transcript_records,
)

pytestmark = pytest.mark.timeout(90)


async def test_a_trickling_stream_is_cut_at_request_timeout(model, workspace):
    model.add([{"text": "t" * 2000, "chunk_size": 1, "chunk_delay": 0.02}])
    started = time.monotonic()
    report, _, _ = await run("hi", model, workspace, requestTimeout=1.5)
    assert report.stop_reason == StopReason.FATAL and "requestTimeout" in report.error
    assert time.monotonic() - started < 15


async def test_retries_count_against_one_deadline(model, workspace):
    """A hung endpoint with SDK retries used to stall ~3x the setting: now one deadline in all."""
    model.add([{"fault": "hang", "repeat": 5}])
    started = time.monotonic()
    report, _, _ = await run("hi", model, workspace, requestTimeout=1.0)
    assert report.stop_reason == StopReason.FATAL
    assert time.monotonic() - started < 2.8, "the whole call, retries included, is bounded by requestTimeout"


async def test_a_ten_megabyte_argument_is_refused_quickly_and_nothing_runs(model, workspace):
    huge = "x" * 10_000_000
    model.add([{"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "small.txt", "content": "ok"}},
                               {"id": "w2", "name": "write_file", "arguments": {"path": "big.txt", "content": huge}}],
                "chunk_size": 64},
               {"text": "understood"}])
    started = time.monotonic()
    report, _, _ = await run("write", model, workspace, approval={"default": "allow"})
    assert time.monotonic() - started < 30, "accumulating the argument is linear, not quadratic"
    assert report.stop_reason == StopReason.DONE and report.final_text == "understood"
    results = last_tool_results(model.requests[-1])
    assert all(r.startswith("not run:") and "1 MB" in r for r in results.values()), results
    assert not (workspace / "small.txt").exists() and not (workspace / "big.txt").exists(), "no tool of that reply ran"


async def test_duplicate_tool_call_ids_get_their_own_results(model, workspace):
    model.add([
        tools_reply(call("read_file", id="dup", path="calc.py"), call("read_file", id="dup", path="README.md")),
        tools_reply(call("read_file", id="dup", path="test_calc.py")),
        {"text": "ok"},
    ])
    report, events, session = await run("read", model, workspace, toolOutputLimit=200)
    second = model.requests[1]["messages"]
    calls = [c["id"] for m in second if m.get("tool_calls") for c in m["tool_calls"]]
    assert len(set(calls)) == 2 and calls[0] == "dup"
    results = last_tool_results(model.requests[1])
    assert "def add" in results[calls[0]] and "# sample" in results[calls[1]]
    third = last_tool_results(model.requests[2])
    assert len(third) == 1 and list(third)[0] not in calls, "unique across turns too"
    assert_valid_conversation(model.requests[2]["messages"])
    originals = [r.get("modelCallId") for r in transcript_records(report) if r["type"] == "toolCall"]
    assert originals.count("dup") == 2, "the transcript keeps a duplicate's original id"
    approvals = {wire_fields(e)["callId"] for e in events.of("toolCall")}
    assert len(approvals) == 3


async def test_reused_ids_never_overwrite_spill_files(model, workspace):
    (workspace / "a.txt").write_text("A" * 5000)
    (workspace / "b.txt").write_text("B" * 5000)
    model.add([tools_reply(call("read_file", id="same", path="a.txt")), tools_reply(call("read_file", id="same", path="b.txt")),
               {"text": "ok"}])
    _, events, _ = await run("read", model, workspace, toolOutputLimit=500)
    spills = [wire_fields(e)["spillPath"] for e in events.of("toolResult")]
    assert len(set(spills)) == 2
    assert "AAAA" in Path(spills[0]).read_text() and "BBBB" in Path(spills[1]).read_text()


async def test_a_reply_cut_at_the_output_limit_is_not_executed(model, workspace):
    model.add([
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "half.txt", "content": "cut"}}], "finish_reason": "length"},
        tools_reply(call("write_file", id="w2", path="whole.txt", content="ok")),
        {"text": "done"},
    ])
    report, _, session = await run("write", model, workspace, approval={"default": "allow"})
    assert report.stop_reason == StopReason.DONE
    assert not (workspace / "half.txt").exists() and (workspace / "whole.txt").read_text() == "ok"
    assert last_tool_results(model.requests[1])["w"] == "not run: your reply was cut at the output limit; send smaller calls"
    assert_valid_conversation(session.messages())


async def test_a_text_reply_cut_at_the_limit_asks_to_continue_then_a_second_cut_is_fatal(model, workspace):
    model.add([{"text": "the answer is long and", "finish_reason": "length"}, {"text": "again cut", "finish_reason": "length"}])
    report, _, _ = await run("explain", model, workspace)
    assert report.stop_reason == StopReason.FATAL and "output limit" in report.error
    assert "cut at the output limit" in model.requests[1]["messages"][-1]["content"]


async def test_a_content_filter_stops_the_run(model, workspace):
    model.add([{"text": "", "finish_reason": "content_filter"}])
    report, _, _ = await run("hi", model, workspace)
    assert report.stop_reason == StopReason.FATAL and "content filter" in report.error


async def test_a_follow_up_after_a_cut_reply_sends_a_valid_conversation(model, workspace):
    session = Session()
    model.add([{"tool_calls": [{"id": "x", "name": "read_file", "arguments": {"path": "calc.py"}}], "finish_reason": "length"},
               {"text": "fine"}, {"text": "follow-up answer"}])
    await run("one", model, workspace, session=session)
    await run("two", model, workspace, session=session)
    assert_valid_conversation(model.requests[-1]["messages"])
