"""The loop's seams: the small parts a loop is handed (the model, its tools, the approval gate,
the event sink, the transcript, the limits, the run's counters, where big results spill). The run
(run.py) builds them from what it has; the loop talks to each one directly and never reaches
past it, and nothing it holds is an alias of session state."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.loop.budget import Budget
from agent_lsp.agent.loop.context import Truncated, truncate_tool_output
from agent_lsp.agent.messages import ToolCall, Usage, parse_arguments
from agent_lsp.agent.model.client import Model
from agent_lsp.agent.model.tokens import TokenEstimator
from agent_lsp.agent.policy.approval import ApprovalPolicy, PolicyVerdict
from agent_lsp.agent.policy.hooks import RunHooks
from agent_lsp.agent.ports import (
    Answer,
    ApprovalRequest,
    Approver,
    EventSink,
    NoTelemetry,
    RunTelemetry,
    as_answer,
)
from agent_lsp.agent.state.transcript import Redactor, Transcript
from agent_lsp.agent.tools.base import Prepared, Tool, ToolBox, ToolContext
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

    def schema_warning(self, schema_tokens: int) -> str | None:
        """What the run says at its start when the tool schemas alone take a quarter of the
        budget or more (each request re-sends them, so the conversation gets what is left)."""
        budget = self.context_budget()
        if schema_tokens * 4 < budget:
            return None
        return (
            f"the tool schemas alone take ~{schema_tokens} tokens, "
            f"{round(100 * schema_tokens / self.context_window)}% of contextWindow "
            f"({self.context_window} tokens): big tool results will be cut to fit; raise "
            "contextWindow if the model allows, or offer fewer tools (MCP servers, language "
            "servers)"
        )


@dataclass
class RunStats:
    """What the run counts: shared by the main loop and its sub-agents."""

    tool_calls: int = 0
    denied: int = 0
    usage: Usage = field(default_factory=Usage)
    context_tokens: int = 0  # the main agent's last request
    call_ids: set[str] = field(default_factory=set)  # every tool-call id used in this run
    # a reply (or a first streamed delta) came back: the endpoint answered as a model
    reached_model: bool = False

    def add_usage(self, usage: Usage) -> None:
        self.usage.add(usage)

    def claim_call_id(self, wanted: str) -> str:
        """CONTRACT Decision 7: `wanted` if it is new in the run, else a fresh `<id>_<n>`."""
        if wanted and wanted not in self.call_ids:
            chosen = wanted
        else:
            base, n = wanted or "call", 2
            while f"{base}_{n}" in self.call_ids:
                n += 1
            chosen = f"{base}_{n}"
        self.call_ids.add(chosen)
        return chosen

    def usage_data(self, context_window: int) -> dict[str, Any]:
        """The usage event's data (and the stop summary's figures)."""
        return {
            **self.usage.to_dict(),
            "contextTokens": self.context_tokens,
            "contextWindow": context_window,
        }


def call_cost(usage: Usage, pricing: Pricing | None) -> float | None:
    """One call's cost (CONTRACT Decision 20): the endpoint's own figure wins."""
    if usage.cost_usd is not None:
        return usage.cost_usd
    if pricing is None:
        return None
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    cached_price = (
        pricing.cached_input_per_m_tok
        if pricing.cached_input_per_m_tok is not None
        else pricing.input_per_m_tok
    )
    return (
        (usage.prompt_tokens - cached) * pricing.input_per_m_tok
        + cached * cached_price
        + usage.completion_tokens * pricing.output_per_m_tok
    ) / 1e6


class ApprovalGate:
    """Between a prepared call and its execution: the policy decides, a person is asked when it
    says ask, and "Allow for session" is remembered."""

    def __init__(
        self,
        policy: ApprovalPolicy,
        approver: Approver,
        timeout: float,
        save_always: Callable[[str], Awaitable[None]] | None = None,
    ):
        self._policy = policy
        self._approver = approver
        # seconds an approval may stay unanswered (for the "unanswered" note)
        self.timeout = timeout
        self._save_always = save_always

    def decide(self, tool: Tool, prepared: Prepared) -> PolicyVerdict:
        return self._policy.decide(tool, prepared)

    async def ask(self, request: ApprovalRequest) -> Answer:
        return as_answer(await self._approver.ask(request))

    def remember(self, tool: Tool, prepared: Prepared) -> None:
        self._policy.remember(tool, prepared)

    def offers(self, tool: Tool) -> bool:
        return self._policy.offers(tool)

    async def allow_always(self, tool: Tool, prepared: Prepared, rule: str) -> str | None:
        """ "Always allow": the rule in force now (and the call remembered for the session),
        then saved in the user settings file; what went wrong saving it, if anything."""
        self._policy.remember(tool, prepared)
        self._policy.allow_always(rule)
        if self._save_always is None:
            return "no settings file to save it in"
        try:
            await self._save_always(rule)
        except Exception as exc:  # the call still runs: it was allowed; the save is reported
            return str(exc) or type(exc).__name__
        return None

    async def always(self, tool: Tool, prepared: Prepared, rule: str) -> tuple[str, bool]:
        """allow_always, then the line the user sees and whether the rule was saved."""
        problem = await self.allow_always(tool, prepared, rule)
        if problem is None:
            return f"saved the rule {rule} in your settings file: it is allowed from now on", True
        return f"the rule {rule} applies to this session only: saving it failed ({problem})", False


class LoopTools:
    """One loop's tools and what they may touch: the schemas the model sees, and a call made
    into a prepared (validated, described) one."""

    def __init__(self, box: ToolBox, ctx: ToolContext):
        self._box = box
        self._ctx = ctx

    def schemas(self) -> list[dict[str, Any]]:
        """The schemas offered now: the process tools join once a background process started."""
        return self._box.schemas(self._ctx)

    def names(self) -> list[str]:
        return list(self._box.tools)

    def has_side_effects(self, call: ToolCall) -> bool:
        """A known tool whose call may write (not read-only, or a delegate to an agent that can
        write): it runs alone, in order."""
        tool = self._box.tools.get(call.name)
        if tool is None:
            return False
        if type(tool).writes is Tool.writes:  # decided by the tool alone: no arguments parsed
            return not tool.read_only
        try:
            raw = parse_arguments(call)
        except ValueError:
            raw = {}
        return tool.writes(raw if isinstance(raw, dict) else {}, list(self._box.tools.values()))

    async def prepare(self, call: ToolCall) -> tuple[Tool, Prepared]:
        """ToolError (an unknown tool, bad arguments), PathRefused or ValueError when it cannot
        be prepared."""
        tool = self._box.get(call.name)
        return tool, await tool.prepare(tool.parse(parse_arguments(call)), self._ctx)


@dataclass
class Spill:
    """Where a big tool result goes: cut to `limit` characters, the whole text in `folder`, and
    that file made readable for the rest of the session (an explicit grant, `allow_read`)."""

    folder: Path
    limit: int
    allow_read: Callable[[Path], None]

    async def fit(
        self, text: str, call_id: str, redact: Callable[[str], str], limit: int | None = None
    ) -> Truncated:
        """`text` cut to `limit` (the setting's by default); `call_id` names the spill file."""
        cut = await truncate_tool_output(text, limit or self.limit, self.folder, call_id, redact)
        if cut.spill_path is not None:
            self.allow_read(cut.spill_path.resolve())
        return cut


@dataclass
class RunSeams:
    """What a run hands each of its loops (the main one and its sub-agents); the loop keeps
    each part as its own attribute."""

    run_id: str
    model: Model
    emit: EventSink
    transcript: Transcript
    redact: Redactor
    estimator: TokenEstimator
    limits: Limits
    stats: RunStats
    gate: ApprovalGate
    spill: Spill
    pricing: Pricing | None = None
    changed_files: Callable[[], list[str]] = list  # workspace-relative, for the compaction note
    # Spans and metrics at the loop's nodes.
    telemetry: RunTelemetry = field(default_factory=NoTelemetry)
    budget: Budget = field(default_factory=Budget)  # the run's cost limit (Decision 36)
    hooks: RunHooks | None = None  # the run's hooks (none declared: None)
