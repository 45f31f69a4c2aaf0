"""Side path: context compaction. When the built context would exceed contextWindow, older
history is summarised before the call; the goal, the changed files and the open problems
survive verbatim, and an assistant's tool calls are never split from their results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_lsp.agent.loop.compaction import plan_compaction
from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.model.tokens import TokenEstimator
from agent_lsp.agent.state.session import Entry
from tests.unit.kit import assert_valid_conversation, call, run, tools_reply, transcript_records

pytestmark = pytest.mark.timeout(30)

GOAL = "GOAL-7: make add() return the sum; constraint: do not touch mul()."
SUMMARY = "SUMMARY-OF-EARLIER-WORK: calc.py was fixed, logs were read."
# The scripted server's prompt_tokens leave out the tool schemas; a zero keeps the estimator
# at plain characters / 4, so when compaction happens does not depend on that figure.
RAW = {"usage": {"prompt_tokens": 0}}


def entries(messages: list[dict]) -> list[Entry]:
    kinds = {"user": "prompt", "assistant": "assistant", "tool": "tool"}
    return [Entry(m, kinds[m["role"]]) for m in messages]


def split(history: list[dict], keep: int, estimator: TokenEstimator) -> tuple[int, int]:
    """(goal_end, tail_start) of a compaction of `history`, or (1, 1) with nothing to compact."""
    plan = plan_compaction(entries(history), keep, estimator)
    return (plan.start, plan.end) if plan else (1, 1)


def _history(n_exchanges: int, calls_per_reply: int = 2, size: int = 400) -> list[dict]:
    history: list[dict] = [{"role": "user", "content": "the goal"}]
    k = 0
    for turn in range(n_exchanges):
        ids = [f"t{turn}c{i}" for i in range(calls_per_reply)]
        history.append({"role": "assistant", "content": f"turn {turn}", "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}} for i in ids]})
        for i in ids:
            k += 1
            history.append({"role": "tool", "tool_call_id": i, "content": "x" * (size + k)})
    history.append({"role": "assistant", "content": "last words"})
    return history


@pytest.mark.parametrize("keep", [1, 50, 120, 200, 333, 500, 800, 1500, 5000])
def test_split_never_separates_a_tool_call_from_its_results(keep):
    history = _history(8, calls_per_reply=3)
    goal_end, tail_start = split(history, keep, TokenEstimator())

    assert goal_end == 1, "the first user message is the goal, kept verbatim"
    assert goal_end <= tail_start <= len(history)
    assert history[tail_start - 1 if tail_start == len(history) else tail_start]["role"] != "tool" or tail_start == len(history)
    note = {"role": "user", "content": "summary"}
    compacted = history[:goal_end] + [note] + history[tail_start:]
    assert_valid_conversation(compacted)
    # The newest message always stays.
    assert compacted[-1] == history[-1]


def test_split_keeps_the_recent_tail_within_budget():
    history = _history(8)
    estimator = TokenEstimator()
    _, tail_start = split(history, 400, estimator)
    assert 1 < tail_start < len(history)
    assert estimator.estimate(history[tail_start:]) <= 400 + 50


def test_split_with_nothing_to_compact():
    history = [{"role": "user", "content": "goal"}, {"role": "assistant", "content": "a" * 10000}]
    goal_end, tail_start = split(history, 10, TokenEstimator())
    assert (goal_end, tail_start) == (1, 1)


@pytest.fixture
def logs(workspace: Path) -> list[str]:
    names = []
    for n in range(6):
        name = f"log{n}.txt"
        (workspace / name).write_text("".join(f"log {n} line {i:03d}: something happened here\n" for i in range(70)))
        names.append(name)
    return names


async def test_long_history_is_compacted_before_the_call(model, workspace, logs):
    (workspace / "AGENTS.md").write_text("MEMORY-RULE: never touch mul().\n")
    model.add("GOAL-7", [
        tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b"), **RAW),
        tools_reply(call("read_file", path="missing.py"), **RAW),  # an open problem
        *[tools_reply(call("read_file", path=name), text=f"Reading {name}.", **RAW) for name in logs],
        {"text": "All done."},
    ])
    model.add("", [{"text": SUMMARY, "repeat": 10}])  # the summariser's conversation

    report, events, session = await run(GOAL, model, workspace, contextWindow=4000, toolOutputLimit=3000,
                                        approval={"default": "allow"})

    assert report.stop_reason == StopReason.DONE, report.error
    assert report.final_text == "All done."
    compactions = events.of("compaction")
    assert len(compactions) >= 2, "compaction events must be emitted (twice here: what survives must survive again)"
    main = model.requests_for("GOAL-7")
    summariser = model.requests_for("")
    assert len(summariser) == len(compactions) >= 1

    # Every request the server received is a valid conversation.
    for request in model.requests:
        assert_valid_conversation(request["messages"])

    after = [r for r in main if any("[Context compacted" in str(m.get("content")) for m in r["messages"])]
    assert after, "later requests carry the compaction note"
    for request in after:
        messages = request["messages"]
        assert messages[0]["role"] == "system" and "MEMORY-RULE: never touch mul()." in messages[0]["content"]
        assert messages[1] == {"role": "user", "content": GOAL}, "the goal survives verbatim"
        note = messages[2]["content"]
        assert messages[2]["role"] == "user" and note.startswith("[Context compacted")
        assert SUMMARY in note
        assert "Files changed so far: calc.py" in note
        assert "missing.py" in note and "Open problems" in note
    # The last request is smaller than it would have been: old logs are gone from it.
    final = main[-1]["messages"]
    assert not any("log 0 line" in str(m.get("content")) for m in final)
    # The summariser saw the old history (bulky output squeezed), not the goal again.
    first_summary = summariser[0]["messages"]
    assert first_summary[0]["role"] == "system" and "compact" in first_summary[0]["content"]
    assert GOAL not in json.dumps(first_summary)
    # The run's own history was compacted too, and stays valid for a follow-up.
    assert_valid_conversation(session.messages())
    assert session.messages()[0] == {"role": "user", "content": GOAL}

    records = [r for r in transcript_records(report) if r["type"] == "compaction"]
    assert len(records) == len(compactions)
    assert SUMMARY in records[0]["summary"] and records[0]["dropped"] > 0
    # Compaction calls do not count as turns.
    assert report.turns == len(main)


async def test_no_compaction_when_it_fits(model, workspace, logs):
    model.add([tools_reply(call("read_file", path=logs[0])), {"text": "ok"}])
    _, events, _ = await run("read", model, workspace)
    assert events.of("compaction") == []
    assert len(model.requests) == 2


async def test_a_failing_summariser_falls_back_to_a_digest(model, workspace, logs):
    model.add("GOAL-7", [*[tools_reply(call("read_file", path=name), **RAW) for name in logs], {"text": "All done."}])
    model.add("", [{"status": 400, "message": "summariser broke", "repeat": 10}])

    report, events, _ = await run(GOAL, model, workspace, contextWindow=4000, toolOutputLimit=3000)

    assert report.stop_reason == StopReason.DONE, report.error
    assert events.of("compaction")
    last = model.requests_for("GOAL-7")[-1]["messages"]
    assert last[1]["content"] == GOAL
    assert "summariser failed" in last[2]["content"]


async def test_context_that_cannot_fit_is_a_fatal_stop(model, workspace):
    huge = "z" * 40000
    model.add([{"text": "never called"}])
    report, _, _ = await run(huge, model, workspace, contextWindow=4000)

    assert report.stop_reason == StopReason.FATAL
    assert "contextWindow" in report.error
    assert model.requests == [], "an oversized request is never sent"


async def test_compaction_in_a_follow_up_keeps_the_first_goal(model, workspace, logs):
    session = Session()
    model.add("GOAL-7", [{"text": "noted", **RAW}, *[tools_reply(call("read_file", path=n), **RAW) for n in logs], {"text": "done"}])
    model.add("", [{"text": SUMMARY, "repeat": 10}])

    await run(GOAL, model, workspace, session=session, contextWindow=4000, toolOutputLimit=3000)
    report, events, _ = await run("now read all the logs", model, workspace, session=session,
                                  contextWindow=4000, toolOutputLimit=3000)

    assert report.stop_reason == StopReason.DONE, report.error
    assert events.of("compaction")
    last = model.requests_for("GOAL-7")[-1]["messages"]
    assert last[1] == {"role": "user", "content": GOAL}


async def test_compaction_keeps_the_current_runs_request_verbatim(model, workspace, logs):
    """Issue 11.1: a follow-up's request and its constraints must survive compaction word for
    word, not only the session's first message."""
    session = Session()
    constraint = "RUN-2-CONSTRAINT: only touch log files, never calc.py; answer in French."
    model.add("GOAL-7", [{"text": "noted", **RAW},
                         *[tools_reply(call("read_file", path=n), **RAW) for n in logs * 2], {"text": "fini"}])
    model.add("", [{"text": SUMMARY, "repeat": 20}])

    await run(GOAL, model, workspace, session=session, contextWindow=4000, toolOutputLimit=3000)
    report, events, _ = await run(constraint, model, workspace, session=session, contextWindow=4000, toolOutputLimit=3000)

    assert report.stop_reason == StopReason.DONE, report.error
    assert len(events.of("compaction")) >= 2
    for request in model.requests_for("GOAL-7")[2:]:
        contents = [m.get("content") for m in request["messages"] if m["role"] == "user"]
        assert constraint in contents, "the current run's request is kept verbatim in every request"
        assert GOAL in contents
    summarised = "\n".join(json.dumps(r["messages"]) for r in model.requests_for(""))
    assert "RUN-2-CONSTRAINT" not in summarised, "a kept request is not also summarised away"


async def test_calibration_by_reported_usage_does_not_compact_a_small_context(model, workspace):
    # The API's prompt_tokens count the tool schemas too. A realistic figure must not make the
    # estimator believe the messages are four times bigger than they are.
    realistic = {"usage": {"prompt_tokens": 1300, "completion_tokens": 10}}
    model.add([tools_reply(call("read_file", path="README.md"), **realistic),
               tools_reply(call("read_file", path="calc.py"), **realistic),
               {"text": "small talk", **realistic}])

    report, events, _ = await run("hello", model, workspace, contextWindow=5000)

    assert report.stop_reason == StopReason.DONE, report.error
    assert events.of("compaction") == []
    assert len(model.requests) == 3
