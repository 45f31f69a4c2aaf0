"""Issue 24 / Decision 36 over ACP: a budget whose cost cannot be known answers session/prompt
with an error before any model call; a budget reached ends the turn `max_turn_requests` with the
report's cause `budget`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError
from tests.unit.kit import call, tools_reply

PRICING = {"m": {"inputPerMTok": 100, "outputPerMTok": 0}}  # 1000 prompt tokens: $0.10 a call
USAGE = {"prompt_tokens": 1000, "completion_tokens": 10}


def test_a_budget_without_a_price_answers_an_error(connect, model, workspace: Path):
    client = connect(model_settings(model, budget={"maxCostUsd": 1}))
    client.initialize()
    session_id = client.new_session(workspace)
    with pytest.raises(AcpError) as refused:
        client.prompt(session_id, "anything")
    assert refused.value.code == -32602 and "budget.maxCostUsd" in str(refused.value.message)
    assert model.requests == []


def test_a_reached_budget_ends_the_turn_as_max_turn_requests(connect, model, workspace: Path):
    model.add("spend", [tools_reply(call("list_files"), usage=USAGE, repeat=3)])
    client = connect(model_settings(model, pricing=PRICING, budget={"maxCostUsd": 0.1},
                                    approval={"default": "allow"}))
    client.initialize()
    response = client.prompt(client.new_session(workspace), "spend it")
    assert response["stopReason"] == "max_turn_requests"
    report = response["_meta"]["agentLsp"]["report"]
    assert report["stopCause"] == "budget" and len(model.requests) == 1
