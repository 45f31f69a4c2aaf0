"""Decision 24: every stop carries a typed `stopCause`, set where the stop is decided, in the
report, the stop event and the transcript's stop record; its stopReason follows from it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_lsp.agent.events import Event, wire_fields
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import Session, run_task
from agent_lsp.agent.messages import RunReport, StopCause, StopReason, Usage
from agent_lsp.settings import Settings
from tests.unit.kit import (
    Events,
    ScriptedApprover,
    call,
    make_settings,
    run,
    tools_reply,
    transcript_records,
)

pytestmark = pytest.mark.timeout(60)

MB = 1_000_000


def assert_cause(report: RunReport, events: Events, cause: StopCause) -> None:
    """The cause, its reason, and the same pair on every surface the core writes."""
    assert report.stop_cause == cause and report.stop_reason == cause.reason, report.to_dict()
    wire = report.to_dict()
    assert wire["stopCause"] == str(cause) and wire["stopReason"] == str(cause.reason)
    assert events[-1].kind == "stop" and wire_fields(events[-1])["report"]["stopCause"] == str(cause)
    stop = transcript_records(report)[-1]
    assert stop["type"] == "stop" and stop["report"]["stopCause"] == str(cause)
    json.dumps(wire)  # plain JSON on the wire


async def test_an_answer_is_done_answer(model, workspace):
    model.add([{"text": "all good"}])
    report, events, _ = await run("hi", model, workspace)
    assert_cause(report, events, StopCause.ANSWER)


async def test_the_turn_budget_is_max_turns_turns(model, workspace):
    model.add([tools_reply(call("read_file", path="calc.py"))] * 2)
    report, events, _ = await run("read", model, workspace, maxTurns=1)
    assert_cause(report, events, StopCause.TURNS)


async def test_the_spiral_guard_is_max_turns_spiral(model, workspace):
    model.add([tools_reply(call("read_file", path="nope.txt"))] * 6)
    report, events, _ = await run("read", model, workspace, maxTurns=30)
    assert_cause(report, events, StopCause.SPIRAL)
    assert "5 times" in report.summary, "the summary still says what it counted"


class BrokenTextSink(Events):
    """A front end whose stream handling has a bug: our own failure, not the endpoint's."""

    def __call__(self, event: Event) -> None:
        if event.kind == "text":
            raise TypeError("a bug in the text sink")
        super().__call__(event)


async def test_our_own_bug_is_fatal_internal(model, workspace):
    model.add([{"text": "hello"}])
    report, events, _ = await run("hi", model, workspace, events=BrokenTextSink())
    assert_cause(report, events, StopCause.INTERNAL)


@pytest.mark.parametrize("case", ["http_400", "timeout", "cut_after_text", "garbage", "no_api_key", "context_too_big"])
async def test_a_model_that_cannot_answer_is_fatal_model(model, workspace, case):
    values: dict = {}
    settings = None
    env = None
    prompt = "hi"
    if case == "http_400":
        model.add([{"status": 400, "message": "this model does not exist"}])
    elif case == "timeout":
        model.add([{"fault": "hang", "repeat": 3}])
        values = {"requestTimeout": 0.3}
    elif case == "cut_after_text":
        model.add([{"text": "a reply cut in the middle", "chunk_size": 4, "fault": "cut"}])
    elif case == "garbage":
        model.add([{"text": "x", "fault": "garbage", "repeat": 3}])
    elif case == "no_api_key":
        settings, env = Settings.model_validate({"model": "m"}), {}
    else:  # a prompt larger than the whole context window: no compaction can make it fit
        values, prompt = {"contextWindow": 4096}, "word " * 20_000
    report, events, _ = await run(prompt, model, workspace, settings=settings, env=env, **values)
    assert_cause(report, events, StopCause.MODEL)


async def test_two_replies_cut_at_the_output_limit_are_fatal_output_limit(model, workspace):
    model.add([{"text": "long and", "finish_reason": "length"}, {"text": "cut again", "finish_reason": "length"}])
    report, events, _ = await run("explain", model, workspace)
    assert_cause(report, events, StopCause.OUTPUT_LIMIT)


async def test_the_content_filter_is_fatal_content_filter(model, workspace):
    model.add([{"text": "", "finish_reason": "content_filter"}])
    report, events, _ = await run("hi", model, workspace)
    assert_cause(report, events, StopCause.CONTENT_FILTER)


@pytest.mark.parametrize("cap", ["one_call_past_1_mb", "one_reply_past_4_mb"])
async def test_two_replies_past_our_caps_are_fatal_argument_cap(model, workspace, cap):
    if cap == "one_call_past_1_mb":
        calls = [call("write_file", path="big.txt", content="x" * (MB + 10))]
    else:  # every call under 1 MB, the whole reply over 4 MB
        calls = [call("write_file", path=f"part{i}.txt", content="x" * (MB - 1000)) for i in range(5)]
    model.add([{"tool_calls": calls, "chunk_size": 65536}] * 2)
    report, events, _ = await run("write", model, workspace, approval={"default": "allow"})
    assert_cause(report, events, StopCause.ARGUMENT_CAP)
    assert not list(Path(workspace).glob("*.txt")), "nothing of a cut reply ran"


async def test_a_cancel_with_no_other_cause_is_the_user(model, workspace):
    model.add([{"text": "never", "ttft": 30}])
    events = Events()
    task = asyncio.ensure_future(run_task("slow", session=Session(), settings=make_settings(model), workspace=DiskWorkspace([workspace]),
                                          approver=ScriptedApprover(), emit=events))
    while not model.log:
        await asyncio.sleep(0.01)
    task.cancel()
    report = await asyncio.wait_for(task, 10)
    assert_cause(report, events, StopCause.USER)
    assert report.summary.startswith("Cancelled by the user")


def test_every_cause_belongs_to_exactly_one_of_the_four_reasons():
    by_reason: dict[StopReason, set[str]] = {}
    for cause in StopCause:
        by_reason.setdefault(cause.reason, set()).add(str(cause))
    assert by_reason == {
        StopReason.DONE: {"answer"},
        StopReason.MAX_TURNS: {"turns", "spiral", "budget"},
        StopReason.FATAL: {"model", "output_limit", "content_filter", "argument_cap", "schema", "hook", "internal"},
        StopReason.CANCELLED: {"user", "signal", "shutdown"},
    }
    with pytest.raises(ValueError, match="does not belong"):  # a report can never say "done" for a cancel
        RunReport("r", "s", StopReason.DONE, StopCause.USER, 0, "", "", [], 0, 0, Usage(), "t")
