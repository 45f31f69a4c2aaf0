"""The narrow interface the loop sees of its run: the model, the sinks, the approval gate and
the run's counters. The run (run.py) builds it; the loop never reaches past it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.messages import Usage
from agent_lsp.agent.model.client import Model
from agent_lsp.agent.model.tokens import TokenEstimator
from agent_lsp.agent.policy.approval import ApprovalPolicy
from agent_lsp.agent.ports import Approver, EventSink
from agent_lsp.agent.state.transcript import Redactor, Transcript
from agent_lsp.agent.tools.base import ToolContext
from agent_lsp.settings import Pricing


@dataclass
class Limits:
    context_window: int
    tool_output_limit: int
    request_timeout: float

    def context_budget(self) -> int:
        return self.context_window - min(8192, self.context_window // 8)  # room for the reply

    def squeeze_threshold(self) -> int:
        # Bulky old tool results become stubs at half the budget: one cache break that frees
        # most of a long session's context, long before a (lossier) compaction is needed.
        return int(self.context_budget() * 0.5)

    def compaction_threshold(self) -> int:
        # Compact a little before the hard limit: each compaction breaks the provider's prompt
        # cache once, and a history kept near the limit makes every later request the biggest.
        return int(self.context_budget() * 0.75)


@dataclass
class RunStats:
    """What the run counts: shared by the main loop and its sub-agents."""

    tool_calls: int = 0
    denied: int = 0
    usage: Usage = field(default_factory=Usage)
    context_tokens: int = 0  # the main agent's last request
    call_ids: set[str] = field(default_factory=set)  # every tool-call id used in this run
    reached_model: bool = False  # a reply (or a first streamed delta) came back: the endpoint answered as a model


def call_cost(usage: Usage, pricing: Pricing | None) -> float | None:
    """One call's cost (CONTRACT Decision 20): the endpoint's own figure wins."""
    if usage.cost_usd is not None:
        return usage.cost_usd
    if pricing is None:
        return None
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    cached_price = pricing.cached_input_per_m_tok if pricing.cached_input_per_m_tok is not None else pricing.input_per_m_tok
    return ((usage.prompt_tokens - cached) * pricing.input_per_m_tok + cached * cached_price
            + usage.completion_tokens * pricing.output_per_m_tok) / 1e6


@dataclass
class LoopServices:
    run_id: str
    model: Model
    emit: EventSink
    transcript: Transcript
    redact: Redactor
    estimator: TokenEstimator
    limits: Limits
    policy: ApprovalPolicy
    approver: Approver
    approval_timeout: float
    tool_ctx: ToolContext
    spill_dir: Path
    stats: RunStats
    pricing: Pricing | None = None
    changed_files: Callable[[], list[str]] = list  # workspace-relative, for the compaction note
