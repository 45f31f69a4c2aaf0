"""Decision 36's rules in isolation: when a budget can be kept, and what the stop says."""

from __future__ import annotations

import pytest

from agent_lsp.agent.loop.budget import (
    Budget,
    BudgetRefused,
    budget_refusal,
    check_budget,
    reports_cost,
    usd,
)
from agent_lsp.agent.messages import Usage
from agent_lsp.settings import resolve

PRICE = {"m": {"inputPerMTok": 1, "outputPerMTok": 2}}


def settings(**values):
    resolved, problems = resolve({"model": "m", **values})
    assert problems == []
    return resolved


def test_no_budget_is_never_refused():
    assert budget_refusal(settings(), "m") is None


@pytest.mark.parametrize("url", ["https://openrouter.ai/api/v1", "https://eu.openrouter.ai/api/v1"])
def test_an_endpoint_that_reports_cost_needs_no_price(url):
    assert reports_cost(url) and not reports_cost("https://openrouter.ai.evil.example/v1")
    assert budget_refusal(settings(baseUrl=url, budget={"maxCostUsd": 1}, streamUsage=False), "x") is None


def test_a_budget_needs_the_exact_models_price_and_stream_usage():
    assert budget_refusal(settings(budget={"maxCostUsd": 1}, pricing=PRICE), "m") is None
    assert "`m-2`" in (budget_refusal(settings(budget={"maxCostUsd": 1}, pricing=PRICE), "m-2") or "")
    with pytest.raises(BudgetRefused, match="streamUsage is false"):
        check_budget(settings(budget={"maxCostUsd": 1}, pricing=PRICE, streamUsage=False), "m")


@pytest.mark.parametrize("bad", [0, -1, "lots"])
def test_a_bad_budget_setting_is_shown_and_ignored(bad):
    resolved, problems = resolve({"budget": {"maxCostUsd": bad}})
    assert resolved.budget.max_cost_usd is None and any("budget.maxCostUsd" in p for p in problems)


def test_the_stop_says_how_far_the_last_call_passed_it():
    budget, total = Budget(0.25), Usage()
    for n in range(1, 4):
        call = Usage(1000, 0, 0, 0.1)
        total.add(call)
        budget.after_call(total, call, "main" if n < 3 else "main/1")
        assert (budget.reached is None) == (n < 3)
    assert budget.reached == ("the budget was reached: $0.300 spent of $0.250 (budget.maxCostUsd); "
                              "the last model call (a call of sub-agent main/1) passed it by $0.050")
    assert usd(0.0004) == "$0.0004" and usd(1.5) == "$1.50" and usd(0) == "$0.000"


def test_a_call_without_a_cost_cannot_be_kept_to_a_budget():
    budget = Budget(1.0)
    budget.after_call(Usage(), None, "main")
    assert budget.reached is not None and "reported no usage" in budget.reached
    unlimited = Budget(None)
    unlimited.after_call(Usage(), None, "main")
    assert unlimited.reached is None
