"""Side path: sub-agent delegation. Own loop, own context, read-only tools, own turn budget;
only the summary comes back, as one tool result; several delegates run concurrently."""

from __future__ import annotations

import json

import pytest

from agent_lsp.agent.messages import StopReason
from tests.unit.kit import call, last_tool_results, run, tools_reply, transcript_records

pytestmark = pytest.mark.timeout(30)

READ_ONLY = {"read_file", "list_files", "search"}


async def test_only_the_summary_enters_the_main_context(model, workspace):
    model.add("MAIN", [tools_reply(call("delegate", id="d1", task="SUB-A: find every caller of add")), {"text": "Thanks."}])
    model.add("SUB-A", [
        tools_reply(call("search", pattern=r"add\("), text="Searching for callers."),
        tools_reply(call("read_file", path="test_calc.py")),
        {"text": "A-SUMMARY: add is called in test_calc.py:5."},
    ])

    report, events, session = await run("MAIN task: who calls add?", model, workspace)

    assert report.stop_reason == StopReason.DONE
    assert last_tool_results(model.requests_for("MAIN")[1]) == {"d1": "A-SUMMARY: add is called in test_calc.py:5."}
    main_text = json.dumps(model.requests_for("MAIN")[1]["messages"])
    assert "Searching for callers." not in main_text
    assert "assert add(2, 3) == 5" not in main_text, "the sub-agent's reads stay in its own context"
    assert [m["role"] for m in model.requests_for("MAIN")[1]["messages"]] == ["system", "user", "assistant", "tool"]
    assert not any("assert add(2, 3)" in json.dumps(m) for m in session.messages())

    # The sub-agent had its own context: its own system prompt and the task as its user message.
    sub = model.requests_for("SUB-A")
    assert len(sub) == 3
    assert sub[0]["messages"][1] == {"role": "user", "content": "SUB-A: find every caller of add"}
    assert "sub-agent" in sub[0]["messages"][0]["content"]
    assert "MAIN task" not in json.dumps(sub[-1]["messages"])
    # Its streamed text is not the main answer.
    assert "Searching for callers." not in events.text()
    # Sub-agent turns do not count as main turns.
    assert report.turns == 2


async def test_sub_agents_have_read_only_tools(model, workspace):
    model.add("MAIN", [tools_reply(call("delegate", id="d", task="SUB-W: change calc.py")), {"text": "ok"}])
    model.add("SUB-W", [
        tools_reply(call("edit_file", id="e", path="calc.py", old_text="a - b", new_text="a + b"),
                    call("delegate", id="dd", task="deeper")),
        {"text": "I could not edit."},
    ])

    report, _, _ = await run("MAIN: delegate an edit", model, workspace)

    names = {t["function"]["name"] for t in model.requests_for("SUB-W")[0]["tools"]}
    assert names == READ_ONLY
    results = last_tool_results(model.requests_for("SUB-W")[1])
    assert "unknown tool 'edit_file'" in results["e"]
    assert "unknown tool 'delegate'" in results["dd"]
    assert "return a - b" in (workspace / "calc.py").read_text()
    assert report.edited_files == []


async def test_sub_agent_has_its_own_turn_budget(model, workspace):
    model.add("MAIN", [tools_reply(call("delegate", id="d", task="SUB-LOOP: read forever")), {"text": "main done"}])
    model.add("SUB-LOOP", [tools_reply(call("list_files"), text="still looking", repeat=10)])

    report, _, _ = await run("MAIN: delegate", model, workspace, delegateMaxTurns=3, maxTurns=5)

    assert len(model.requests_for("SUB-LOOP")) == 3
    result = last_tool_results(model.requests_for("MAIN")[1])["d"]
    assert "turn limit of 3" in result and "still looking" in result
    assert report.stop_reason == StopReason.DONE and report.turns == 2


async def test_several_delegates_run_concurrently(model, workspace):
    model.add("MAIN", [tools_reply(*(call("delegate", id=f"d{k}", task=f"SUB-{k}: part {k}") for k in "XYZ")), {"text": "merged"}])
    for k in "XYZ":
        model.add(f"SUB-{k}", [
            tools_reply(call("read_file", path="calc.py"), ttft=1.0),  # long enough to overlap on a busy machine
            {"text": f"{k}-SUMMARY"},
        ])

    report, _, _ = await run("MAIN: three parts", model, workspace)

    assert report.stop_reason == StopReason.DONE
    # Each sub-agent's first request was in flight at the same time as the others'.
    firsts = [next(e for e in model.log if e.key == f"SUB-{k}") for k in "XYZ"]
    assert max(e.t_start for e in firsts) < min(e.t_end for e in firsts)
    # And the results come back in the model's order.
    assert last_tool_results(model.requests_for("MAIN")[1]) == {"dX": "X-SUMMARY", "dY": "Y-SUMMARY", "dZ": "Z-SUMMARY"}


async def test_a_failing_sub_agent_is_a_tool_error_not_a_fatal_stop(model, workspace):
    model.add("MAIN", [tools_reply(call("delegate", id="d", task="SUB-F: fail")), {"text": "handled"}])
    model.add("SUB-F", [{"status": 400, "message": "bad request for the sub-agent"}])

    report, _, _ = await run("MAIN: delegate", model, workspace)

    assert report.stop_reason == StopReason.DONE
    result = last_tool_results(model.requests_for("MAIN")[1])["d"]
    assert result.startswith("error: the sub-agent failed") and "400" in result


async def test_sub_agent_ids_in_the_transcript(model, workspace):
    model.add("MAIN", [tools_reply(call("delegate", task="SUB-1: a"), call("delegate", task="SUB-2: b")), {"text": "ok"}])
    model.add("SUB-1", [{"text": "one"}])
    model.add("SUB-2", [{"text": "two"}])

    report, _, _ = await run("MAIN: two", model, workspace)

    agents = {r["agentId"] for r in transcript_records(report)}
    assert agents == {"main", "main/1", "main/2"}
    replies = {(r["agentId"], r["turn"]): r["reply"]["text"] for r in transcript_records(report) if r["type"] == "reply"}
    assert replies[("main/1", 1)] == "one" and replies[("main/2", 1)] == "two"
