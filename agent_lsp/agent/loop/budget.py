"""The run's cost limit, `budget.maxCostUsd` (CONTRACT Decision 36): refused before the first
call when the run's cost cannot be known, then checked after every model call of the run (the
sub-agents' and the compaction's included); the loop stops right after the call that reaches it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from agent_lsp.agent.messages import Usage
from agent_lsp.settings import Settings

# Endpoints that report each call's own cost (`usage.cost`): a budget needs no `pricing` there.
COST_REPORTING_HOSTS = ("openrouter.ai",)
KEY = "budget.maxCostUsd"
EPSILON = 1e-9
NOT_RUN = (
    "not run: the run's budget (budget.maxCostUsd) was reached with the reply that asked for it"
)


class BudgetRefused(ValueError):
    """A budget the run could not keep: it never starts (a usage error, an error answer)."""


def usd(amount: float) -> str:
    """Dollars as the progress line shows them (Decision 20): 3 decimals below $1, 2 above."""
    if 0 < amount < 0.001:  # a fraction of a tenth of a cent must not read as $0.000
        return f"${amount:.6f}".rstrip("0")
    return f"${amount:.3f}" if amount < 1 else f"${amount:.2f}"


def reports_cost(base_url: str | None) -> bool:
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    return any(host == known or host.endswith("." + known) for known in COST_REPORTING_HOSTS)


def budget_refusal(settings: Settings, model: str) -> str | None:
    """Why a run with this budget cannot start, or None: the cost of its calls must be known,
    from `pricing` for the exact model (with the usage the stream reports) or from the endpoint."""
    limit = settings.budget.max_cost_usd
    if limit is None or reports_cost(settings.base_url):
        return None
    if model not in settings.pricing:
        return (
            f"{KEY} is {usd(limit)} but the cost of model `{model}` is unknown: add its price as "
            f'`pricing: {{"{model}": {{"inputPerMTok": ..., "outputPerMTok": ...}}}}` in your '
            f"settings, or remove the budget"
        )
    if not settings.stream_usage:
        return (
            f"{KEY} is {usd(limit)} but streamUsage is false, so the endpoint reports no token "
            f"usage to price: turn streamUsage on, or remove the budget"
        )
    return None


def check_budget(settings: Settings, model: str) -> None:
    """BudgetRefused when the run cannot keep its budget (every front end, before the run)."""
    if (why := budget_refusal(settings, model)) is not None:
        raise BudgetRefused(f"the run was not started: {why}")


@dataclass
class Budget:
    """The run's limit and, once a call reached it, the summary's words (they stay set: every
    loop of the run, the main one and its sub-agents, stops at its next check)."""

    limit: float | None = None
    reached: str | None = None

    def after_call(self, total: Usage, call: Usage | None, agent_id: str) -> None:
        """Charge one model call (its cost is already in `total`): `call` None or without a
        cost means the endpoint said nothing the cost could be known from."""
        if self.limit is None or self.reached is not None:
            return
        by = "" if agent_id == "main" else f" (a call of sub-agent {agent_id})"
        if call is None or call.cost_usd is None:
            self.reached = (
                f"the budget ({usd(self.limit)}, {KEY}) could not be kept: the endpoint reported "
                f"no usage for a model call{by}, so the run's cost is unknown"
            )
            return
        spent = total.cost_usd or 0.0
        if spent < self.limit - EPSILON:  # float sums: $0.003 is reached in three $0.001 calls
            return
        self.reached = f"the budget was reached: {usd(spent)} spent of {usd(self.limit)} ({KEY})"
        if spent > self.limit + EPSILON:
            self.reached += f"; the last model call{by} passed it by {usd(spent - self.limit)}"
