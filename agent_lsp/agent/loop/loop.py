"""The loop of shared/LOOP.md: build context -> LLM call -> fork on tool calls -> approve ->
execute -> append -> again, until one of the four explained stops."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from agent_lsp.agent.events import (
    CompactionEvent,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    UsageEvent,
)
from agent_lsp.agent.loop.budget import NOT_RUN as OVER_BUDGET
from agent_lsp.agent.loop.budget import usd
from agent_lsp.agent.loop.compaction import (
    COMPACTION_PROMPT,
    open_problems,
    plan_compaction,
    plan_squeeze,
    render_for_summary,
    summary_entry,
)
from agent_lsp.agent.loop.services import LoopTools, RunSeams, call_cost
from agent_lsp.agent.loop.tool_calls import ToolCallRunner, cancel_if_asked
from agent_lsp.agent.messages import (
    Outcome,
    Reply,
    ReplyCut,
    StopCause,
    StopReason,
    ToolCall,
    ToolResult,
)
from agent_lsp.agent.model.client import ModelError
from agent_lsp.agent.ports import NO_SPAN, current_tool_span
from agent_lsp.agent.state.session import Entry

log = logging.getLogger(__name__)

MODEL_ATTEMPTS = 3  # a stream cut before anything reached the user is sent again
CUT_NOTE = "not run: your reply was cut at the output limit; send smaller calls"
CAP_NOTES = {
    ReplyCut.ARGUMENT_CAP: "not run: one tool call's arguments passed the 1 MB cap, so the reply was cut off and nothing of it ran; send smaller calls (e.g. several edit_file calls instead of one huge write)",
    ReplyCut.REPLY_CAP: "not run: the whole reply passed the 4 MB cap, so it was cut off and nothing of it ran; send smaller calls",
}
CUT_STOPS = {  # the message, and the typed cause front ends map from
    ReplyCut.OUTPUT_LIMIT: (
        "the model's reply was cut at its output limit (twice in a row)",
        StopCause.OUTPUT_LIMIT,
    ),
    ReplyCut.ARGUMENT_CAP: (
        "the model's reply passed the 1 MB cap on one call's arguments twice in a row",
        StopCause.ARGUMENT_CAP,
    ),
    ReplyCut.REPLY_CAP: (
        "the model's reply passed the 4 MB cap on one reply twice in a row",
        StopCause.ARGUMENT_CAP,
    ),
}
CONTINUE_NOTE = "(Your last reply was cut at the output limit. Continue exactly where it stopped, more briefly.)"


class StopRun(Exception):
    """Typed loop control: the loop cannot go on (a fatal stop); `cause` says why, typed."""

    def __init__(self, message: str, cause: StopCause):
        super().__init__(message)
        self.cause = cause


@dataclass
class LoopOutcome:
    cause: StopCause  # decided where the stop is; the reason follows from it
    final_text: str
    turns: int
    error: str | None = None
    note: str | None = (
        None  # for the summary: why a max_turns stop came early (a spiral), who cancelled (a signal's name)
    )

    @property
    def reason(self) -> StopReason:
        return self.cause.reason


class AgentLoop:
    def __init__(
        self,
        seams: RunSeams,
        agent_id: str,
        tools: LoopTools,
        max_turns: int,
        history: list[Entry],
        system_prompt: str,
    ):
        self.run_id = seams.run_id
        self.model = seams.model
        self.emit = seams.emit
        self.transcript = seams.transcript
        self.estimator = seams.estimator
        self.limits = seams.limits
        self.stats = seams.stats
        self.pricing = seams.pricing
        self.changed_files = seams.changed_files
        self.telemetry = seams.telemetry
        self.budget = seams.budget
        self.span = NO_SPAN  # this agent's span (telemetry), while its loop goes
        self.agent_id = agent_id
        self.calls = ToolCallRunner(
            agent_id,
            tools,
            seams.gate,
            seams.emit,
            seams.transcript,
            seams.redact,
            seams.stats,
            seams.spill,
            seams.telemetry,
        )
        self.max_turns = max_turns
        self.history = history
        self.system_prompt = system_prompt
        self.turn = 0
        self.model_calls = 0  # model calls that answered (the report's `turns`)
        self.last_text = ""
        self.logged = 0  # history[:logged] is already in the transcript
        self._cuts = 0
        self.closed: list[
            Entry
        ] = []  # synthetic results given on cancel (written by the run's close)
        self.schemas = tools.schemas()  # the same every turn: built once (and cache-friendly)
        self.tool_names = tools.names()
        self._schema_chars = len(_json(self.schemas))

    @property
    def is_main(self) -> bool:
        return self.agent_id == "main"

    async def loop(self) -> LoopOutcome:
        """The loop, as one span of the run's trace (a sub-agent's under its delegate call)."""
        self.span = self.calls.agent_span = self.telemetry.agent_started(
            self.agent_id, current_tool_span.get()
        )
        try:
            outcome = await self.turns()
        except BaseException as exc:
            cancelled = isinstance(exc, asyncio.CancelledError)
            self.telemetry.agent_ended(
                self.span,
                "cancelled" if cancelled else "fatal",
                "cancelled" if cancelled else "internal",
                None if cancelled else f"{type(exc).__name__}: {exc}",
            )
            raise
        self.telemetry.agent_ended(
            self.span, str(outcome.reason), str(outcome.cause), outcome.error
        )
        return outcome

    async def turns(self) -> LoopOutcome:
        """The whole design in one function."""
        self.logged = max(0, len(self.history) - 1)  # the new user message is this run's input
        try:
            while True:
                cancel_if_asked()
                if over := self.over_budget():  # a sub-agent's call reached it
                    return over
                if self.turn >= self.max_turns:  # append, then check the turn budget
                    return LoopOutcome(StopCause.TURNS, self.last_text, self.turn)
                self.turn += 1
                messages = await self.build_context()  # node 1 (+ compaction)
                if over := self.over_budget():  # the compaction's call reached it
                    return over
                reply = await self.call_model(messages)  # node 2 (streamed)
                self.append(Entry(reply.to_message(), "assistant", self.run_id))
                if reply.cut is not None:  # a cut reply is not executed
                    self.refuse_cut_reply(reply)
                    continue
                if not reply.tool_calls:  # node 3: the only fork
                    return LoopOutcome(StopCause.ANSWER, reply.text, self.turn)  # node 4
                if over := self.over_budget():  # this call reached it: none of its calls run
                    return over
                self._cuts = 0
                results = await self.calls.run(reply.tool_calls, self.turn)  # approve + execute
                for result in results:  # append in order
                    self.append(Entry(result.to_message(), "tool", self.run_id, result.outcome))
                if spiral := self.calls.spiral():
                    return LoopOutcome(StopCause.SPIRAL, self.last_text, self.turn, note=spiral)
        except StopRun as stop:
            return LoopOutcome(stop.cause, self.last_text, self.turn, str(stop))
        except asyncio.CancelledError:
            self.close_dangling_calls(
                Outcome.CANCELLED, "cancelled: the user cancelled the run before this call finished"
            )
            raise
        except Exception:  # run_task reports it as fatal; the session stays valid for a follow-up
            self.close_dangling_calls(
                Outcome.ERROR,
                "error: the run stopped on an internal error before this call finished",
            )
            raise

    def over_budget(self) -> LoopOutcome | None:
        """CONTRACT Decision 36: the stop right after the model call that reached the run's
        budget; the calls of the reply it answered get a `not run` result."""
        if self.budget.reached is None:
            return None
        self.close_dangling_calls(Outcome.NOT_RUN, OVER_BUDGET)
        return LoopOutcome(StopCause.BUDGET, self.last_text, self.turn, note=self.budget.reached)

    def append(self, entry: Entry) -> None:
        self.history.append(entry)

    # -- node 1: build context -------------------------------------------------------------
    async def build_context(self) -> list[dict[str, Any]]:
        messages = self._messages()
        if (
            self._tokens(messages) > self.limits.squeeze_threshold()
            and await self.squeeze_results()
        ):
            messages = self._messages()
        if self._tokens(messages) > self.limits.compaction_threshold():
            await self.log_pending()
            await self.compact_history(self.limits.context_budget())
            messages = self._messages()
            if self._tokens(messages) > self.limits.context_budget():
                raise StopRun(
                    f"the context does not fit in contextWindow ({self.limits.context_window} tokens) even after compaction",
                    StopCause.MODEL,
                )
        new = self.history[self.logged :]
        first = {"system": self.system_prompt, "tools": self.tool_names} if self.turn == 1 else {}
        await self.transcript.write(
            self.agent_id,
            self.turn,
            "request",
            messages=[e.message for e in new],
            meta=[e.meta() for e in new],
            **first,
        )
        self.logged = len(self.history)
        return messages

    async def log_pending(self) -> None:
        """Entries not yet in the transcript, as one history record (so a session rebuilt from
        transcripts has them even when no request follows)."""
        new = self.history[self.logged :]
        if new:
            await self.transcript.write(
                self.agent_id,
                self.turn,
                "history",
                op="append",
                entries=[e.to_record() for e in new],
            )
        self.logged = len(self.history)

    async def squeeze_results(self) -> bool:
        """Side path: bulky old tool results become stubs the model can re-read (they were the
        bulk of what every later request re-sent). Returns whether anything was squeezed."""
        stubs = plan_squeeze(self.history)
        freed = sum(
            len(str(self.history[i].message.get("content"))) - len(str(stub.message["content"]))
            for i, stub in stubs
        )
        # Only when it frees a good share of the budget: each squeeze breaks the prompt cache once.
        if not stubs or freed / 4 < self.limits.context_budget() * 0.2:
            return False
        await self.log_pending()
        before = self.estimator.estimate(self._messages())
        for index, stub in stubs:
            self.history[index] = stub
        after = self.estimator.estimate(self._messages())
        self.emit(
            CompactionEvent(
                f"squeezed {len(stubs)} old tool results to stubs (~{before} -> ~{after} tokens)",
                self.turn,
                agent_id=self.agent_id,
            )
        )
        await self.transcript.write(
            self.agent_id,
            self.turn,
            "history",
            op="replace",
            items=[{"index": i, **e.to_record()} for i, e in stubs],
        )
        return True

    def _tokens(self, messages: list[dict[str, Any]]) -> int:
        return self.estimator.estimate(messages, self._schema_chars)

    def _messages(self) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": self.system_prompt},
            *(e.message for e in self.history),
        ]

    async def compact_history(self, budget: int) -> None:
        """Side path: summarise the middle of the history; keep the requests and the recent tail."""
        plan = plan_compaction(self.history, budget // 3, self.estimator)
        if plan is None:
            return
        summarised = [e for e in plan.middle if e.kind != "prompt"]
        prompt = [
            {"role": "system", "content": COMPACTION_PROMPT},
            {"role": "user", "content": render_for_summary(summarised)},
        ]
        try:
            reply = await self._traced(
                prompt,
                lambda: self.model.complete(
                    prompt,
                    [],
                    lambda _t: None,
                    agent_id=self.agent_id,
                    turn=self.turn,
                    purpose="compaction",
                    timeout=self.limits.request_timeout,
                ),
            )
            self._count_usage(reply, prompt, main_request=False, schema_chars=0)
            summary = reply.text.strip() or render_for_summary(summarised, clip=200)
            await self.transcript.write(
                self.agent_id, self.turn, "reply", purpose="compaction", reply=reply.to_record()
            )
        except ModelError as exc:
            summary = f"(the summariser failed: {exc}; a mechanical digest follows)\n{render_for_summary(summarised, clip=200)[-4000:]}"
        note = summary_entry(
            summary,
            self.changed_files(),
            open_problems(plan.middle),
            len(summarised),
            len(plan.kept_prompts),
            self.run_id,
        )
        before = self.estimator.estimate(self._messages())
        replacement = [note, *plan.kept_prompts]
        self.history[plan.start : plan.end] = replacement
        after = self.estimator.estimate(self._messages())
        self.logged = len(self.history)
        kept = len(self.history) - plan.start - 1
        text = f"compacted {len(summarised)} messages (~{before} -> ~{after} tokens); kept the user's requests and {kept} recent messages"
        self.emit(CompactionEvent(text, self.turn, agent_id=self.agent_id))
        await self.transcript.write(
            self.agent_id,
            self.turn,
            "compaction",
            summary=note.message["content"],
            dropped=len(summarised),
            tokensBefore=before,
            tokensAfter=after,
            start=plan.start,
            end=plan.end,
            entries=[e.to_record() for e in replacement],
        )

    # -- node 2: the streamed LLM call -------------------------------------------------------
    async def call_model(self, messages: list[dict[str, Any]]) -> Reply:
        # `waiting: model` is the typed form of the text: a front end shows its waiting line from it.
        self.emit(
            StatusEvent(
                f"turn {self.turn}/{self.max_turns}: asking the model",
                self.turn,
                waiting="model",
                agent_id=self.agent_id,
            )
        )
        stats = self.stats

        def delta_of(kind: type[TextDelta | ThinkingDelta]) -> Callable[[str], None]:
            def on_delta(delta: str) -> None:
                stats.reached_model = True
                if self.is_main:
                    self.emit(kind(delta, agent_id=self.agent_id))

            return on_delta

        on_thinking = delta_of(ThinkingDelta) if self.is_main else None
        reply = await self._traced(
            messages, lambda: self._complete(messages, delta_of(TextDelta), on_thinking)
        )
        self.model_calls += 1
        stats.reached_model = True
        if reply.finish_reason == "content_filter":
            raise StopRun(
                "the endpoint's content filter stopped the model's reply", StopCause.CONTENT_FILTER
            )
        self._unique_ids(reply.tool_calls)
        self._count_usage(
            reply, messages, main_request=self.is_main, schema_chars=self._schema_chars
        )
        self.last_text = reply.text or self.last_text
        await self.transcript.write(self.agent_id, self.turn, "reply", reply=reply.to_record())
        return reply

    async def _traced(
        self, messages: list[dict[str, Any]], call: Callable[[], Awaitable[Reply]]
    ) -> Reply:
        """A model call as a `chat` span of this agent's (telemetry)."""
        chat = self.telemetry.chat_started(self.span, self.model.name, messages)
        try:
            reply = await call()
        except (
            BaseException
        ) as exc:  # `kind: message`, the kind a stop cause or the exception's type
            kind = (
                "cancelled"
                if isinstance(exc, asyncio.CancelledError)
                else exc.cause
                if isinstance(exc, StopRun)
                else type(exc).__name__
            )
            self.telemetry.chat_ended(chat, None, f"{kind}: {exc}")
            raise
        self.telemetry.chat_ended(chat, reply)
        return reply

    async def _complete(
        self,
        messages: list[dict[str, Any]],
        on_text: Callable[[str], None],
        on_thinking: Callable[[str], None] | None,
    ) -> Reply:
        """One model call within one deadline, a stream that failed before it began sent again."""
        deadline = self.limits.request_timeout
        loop = asyncio.get_running_loop()
        ends = loop.time() + deadline
        try:
            async with asyncio.timeout(
                deadline
            ):  # one deadline for the whole call, retries included
                for attempt in range(1, MODEL_ATTEMPTS + 1):
                    try:
                        reply = await self.model.complete(
                            messages,
                            self.schemas,
                            on_text,
                            agent_id=self.agent_id,
                            turn=self.turn,
                            timeout=max(1.0, ends - loop.time()),
                            on_thinking=on_thinking,
                        )
                        break
                    except ModelError as exc:
                        await self.transcript.write(
                            self.agent_id, self.turn, "modelError", error=str(exc), attempt=attempt
                        )
                        if exc.streamed:
                            raise StopRun(
                                f"the model's stream was cut after {exc.streamed} characters had been shown ({exc})",
                                StopCause.MODEL,
                            ) from None
                        if not exc.retryable or attempt == MODEL_ATTEMPTS:
                            raise StopRun(f"model request failed: {exc}", StopCause.MODEL) from None
                        self.emit(
                            StatusEvent(
                                f"the model's stream failed before it began ({exc}); sending it again ({attempt}/{MODEL_ATTEMPTS - 1})",
                                self.turn,
                                agent_id=self.agent_id,
                            )
                        )
        except TimeoutError:
            await self.transcript.write(
                self.agent_id, self.turn, "modelError", error="requestTimeout"
            )
            raise StopRun(
                f"the model call took longer than requestTimeout ({deadline:g} s) in all, retries included; it was stopped and not sent again",
                StopCause.MODEL,
            ) from None
        return reply

    def _unique_ids(self, calls: list[ToolCall]) -> None:
        """CONTRACT Decision 7: every id unique in the run before anything runs (a duplicate
        would give every call the last one's result and overwrite spill files)."""
        for call in calls:
            chosen = self.stats.claim_call_id(call.id)
            if chosen != call.id:
                call.model_id, call.id = call.id or None, chosen

    def _count_usage(
        self, reply: Reply, messages: list[dict[str, Any]], *, main_request: bool, schema_chars: int
    ) -> None:
        stats = self.stats
        if reply.usage is not None:
            reply.usage.cost_usd = call_cost(reply.usage, self.pricing)
            stats.add_usage(reply.usage)
            if reply.usage.prompt_tokens:
                # prompt_tokens counts the tool schemas too: calibrate on what was actually sent.
                self.estimator.calibrate(messages, reply.usage.prompt_tokens, schema_chars)
        if main_request:
            stats.context_tokens = (
                reply.usage.prompt_tokens
                if reply.usage and reply.usage.prompt_tokens
                else self._tokens(messages)
            )
        self.budget.after_call(stats.usage, reply.usage, self.agent_id)
        data = stats.usage_data(self.limits.context_window)
        self.emit(
            UsageEvent(
                usage_line(data, self.budget.limit),
                replace(stats.usage),
                stats.context_tokens,
                self.limits.context_window,
                agent_id=self.agent_id,
                budget_usd=self.budget.limit,
            )
        )

    def refuse_cut_reply(self, reply: Reply) -> None:
        """CONTRACT Decisions 5 and 6: nothing of a cut reply runs; each call is told why and
        the loop goes on; a second cut in a row stops the run."""
        self._cuts += 1
        if self._cuts >= 2:
            raise StopRun(*CUT_STOPS[reply.cut or ReplyCut.OUTPUT_LIMIT])
        note = CAP_NOTES.get(reply.cut or ReplyCut.OUTPUT_LIMIT, CUT_NOTE)
        self.emit(
            StatusEvent(
                f"turn {self.turn}: {note.removeprefix('not run: ')}",
                self.turn,
                agent_id=self.agent_id,
            )
        )
        for call in reply.tool_calls:
            self.append(
                Entry(
                    ToolResult(call.id, Outcome.NOT_RUN, note).to_message(),
                    "tool",
                    self.run_id,
                    Outcome.NOT_RUN,
                )
            )
        if not reply.tool_calls:
            self.append(Entry({"role": "user", "content": CONTINUE_NOTE}, "note", self.run_id))

    # -- tool layer (tool_calls.py); after a cancel or an error, every call gets a result --------
    def close_dangling_calls(self, outcome: Outcome, why: str) -> None:
        """After a cancel, give every tool call of the last reply a result (finished or
        `why`), so a follow-up in this session never sends a dangling tool call."""
        for index in range(len(self.history) - 1, -1, -1):
            message = self.history[index].message
            if message.get("role") == "assistant" and message.get("tool_calls"):
                answered = {
                    e.message.get("tool_call_id")
                    for e in self.history[index + 1 :]
                    if e.kind == "tool"
                }
                for call in message["tool_calls"]:
                    if call["id"] not in answered:
                        done = self.calls.finished(call["id"])
                        result = done or ToolResult(call["id"], outcome, why)
                        entry = Entry(result.to_message(), "tool", self.run_id, result.outcome)
                        self.history.append(entry)
                        if done is None:
                            self.closed.append(entry)
                return
            if message.get("role") == "user":
                return

    async def record_closed(self) -> None:
        """The synthetic results of close_dangling_calls, in the transcript like any result."""
        for entry in self.closed:
            await self.transcript.write(
                self.agent_id,
                self.turn,
                "toolResult",
                callId=entry.message["tool_call_id"],
                ok=False,
                outcome=str(entry.outcome),
                truncated=False,
                content=entry.message["content"],
            )
        self.closed = []


def usage_line(data: dict[str, Any], budget: float | None = None) -> str:
    """`ctx 31k/128k · $0.012` (CONTRACT Decision 20), `… · $0.012 of $1.00` with a budget
    (Decision 36): every client shows the line as it comes."""
    line = f"ctx {round(data['contextTokens'] / 1000)}k/{round(data['contextWindow'] / 1000)}k"
    cost = data.get("costUsd")
    if cost is not None:
        line += f" · ${cost:.3f}" if cost < 1 else f" · ${cost:.2f}"
        if budget is not None:
            line += f" of {usd(budget)}"
    return line


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
