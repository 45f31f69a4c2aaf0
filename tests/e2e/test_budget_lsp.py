"""Issue 24 / Decision 36 over LSP: `budget.maxCostUsd` in the usage events (`budgetUsd`), the
stop right after the call that reaches it, and a budget whose cost cannot be known refused by
`agentLsp.run` with an error answer."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

pytestmark = pytest.mark.timeout(60)

PRICING = {"m": {"inputPerMTok": 100, "outputPerMTok": 0}}  # 1000 prompt tokens: $0.10 a call
USAGE = {"prompt_tokens": 1000, "completion_tokens": 10}


async def test_usage_events_carry_the_budget_and_the_run_stops_on_it(open_editor, model):
    model.add("spend", [{"tool_calls": [{"name": "list_files", "arguments": {}}], "usage": USAGE, "repeat": 4}])
    editor = await open_editor(init={"pricing": PRICING, "budget": {"maxCostUsd": 0.15},
                                     "approval": {"default": "allow"}})
    started = await editor.run("spend it")
    report = await editor.wait_stop(started["runId"], 20)

    assert report["stopReason"] == "max_turns" and report["stopCause"] == "budget"
    assert report["turns"] == 2 and report["toolCalls"] == 1
    assert "the budget was reached: $0.200 spent of $0.150 (budget.maxCostUsd)" in report["summary"]
    assert "passed it by $0.050" in report["summary"]
    usage = editor.events(started["runId"], "usage")
    assert [e["budgetUsd"] for e in usage] == [0.15, 0.15]
    assert [e["costUsd"] for e in usage] == [pytest.approx(0.1), pytest.approx(0.2)]
    # The line every client shows (status bar, mode line, statusline) and the progress suffix:
    # the cost beside the budget.
    assert [e["text"] for e in usage] == ["ctx 1k/128k · $0.100 of $0.150", "ctx 1k/128k · $0.200 of $0.150"]
    reports = [p.message for p in editor.progress(started["runId"]) if isinstance(p, types.WorkDoneProgressReport)]
    assert any(m.endswith("· ctx 1k/128k · $0.100 of $0.150") for m in reports), reports


async def test_a_budget_without_a_price_is_refused_with_an_error(open_editor, model):
    editor = await open_editor(init={"budget": {"maxCostUsd": 1}})
    with pytest.raises(JsonRpcException) as refused:
        await editor.run("anything")
    message = str(refused.value)
    assert "budget.maxCostUsd" in message and "`m`" in message and "pricing" in message
    assert model.requests == []
    assert editor.stream == [], "a refused run streams nothing"


async def test_a_budget_with_stream_usage_off_is_refused_with_an_error(open_editor, model):
    editor = await open_editor(init={"budget": {"maxCostUsd": 1}, "pricing": PRICING, "streamUsage": False})
    with pytest.raises(JsonRpcException, match="streamUsage is false"):
        await editor.run("anything")
    assert model.requests == []
