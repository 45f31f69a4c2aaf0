"""Node 2 of shared/LOOP.md, the streamed model call: sent again within one deadline when the
stream failed before it began, traced as a `chat` span, its tool call ids made unique and its
usage counted (ModelCall, a part each AgentLoop holds)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from agent_lsp.agent.events import StatusEvent, TextDelta, ThinkingDelta, UsageEvent
from agent_lsp.agent.loop.budget import usd
from agent_lsp.agent.loop.services import RunSeams, call_cost
from agent_lsp.agent.loop.stops import StopRun
from agent_lsp.agent.messages import Reply, StopCause, ToolCall
from agent_lsp.agent.model.client import ModelError
from agent_lsp.agent.ports import NO_SPAN, TraceSpan

MODEL_ATTEMPTS = 3  # a stream cut before anything reached the user is sent again
EMPTY_RETRIES = 1  # an empty answer (no text, no calls) is asked again once (Decision 68)
NEAR_WINDOW = 0.5  # a request past this share of contextWindow is "near the window"


class ModelCall:
    """The model call of one agent's loop (AgentLoop holds one): its parts are the run's seams,
    its tool schemas and turn limit; `turn` and `span` are those of the call in flight."""

    def __init__(
        self,
        seams: RunSeams,
        agent_id: str,
        schemas: Callable[[], list[dict[str, Any]]],
        max_turns: int,
    ):
        self.agent_id = agent_id
        self.model = seams.model
        self.emit = seams.emit
        self.transcript = seams.transcript
        self.estimator = seams.estimator
        self.limits = seams.limits
        self.stats = seams.stats
        self.pricing = seams.pricing
        self.telemetry = seams.telemetry
        self.budget = seams.budget
        # The tools offered now: the same list object while they stay the same (cache-friendly);
        # its size is measured again only when the list changes.
        self._schemas_now = schemas
        self._schemas: list[dict[str, Any]] | None = None
        self._schema_chars = 0
        self.max_turns = max_turns
        self.answered = 0  # model calls that answered (the report's `turns`)
        self.last_text = ""  # the newest reply's text (none: the one before)
        self.turn = 0
        self.span: TraceSpan = NO_SPAN

    @property
    def schemas(self) -> list[dict[str, Any]]:
        schemas = self._schemas_now()
        if schemas is not self._schemas:
            self._schemas = schemas
            self._schema_chars = len(json.dumps(schemas, ensure_ascii=False))
        return schemas

    @property
    def schema_chars(self) -> int:
        """The characters of the tool schemas offered now (each request carries them)."""
        _ = self.schemas
        return self._schema_chars

    @property
    def is_main(self) -> bool:
        return self.agent_id == "main"

    def tokens(self, messages: list[dict[str, Any]]) -> int:
        return self.estimator.estimate(messages, self.schema_chars)

    # -- node 2: the streamed LLM call -------------------------------------------------------
    async def call(self, messages: list[dict[str, Any]], turn: int, span: TraceSpan) -> Reply:
        self.turn, self.span = turn, span
        # `waiting: model` is the typed form of the text: a front end shows its waiting line
        # from it.
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
        reply = await self.traced(
            messages, lambda: self._complete(messages, delta_of(TextDelta), on_thinking)
        )
        self.answered += 1
        stats.reached_model = True
        if reply.refusal:  # the model declined: its words are the stop's (Decision 68)
            raise StopRun(reply.refusal, StopCause.CONTENT_FILTER)
        if reply.finish_reason == "content_filter":
            raise StopRun(
                "the endpoint's content filter stopped the model's reply", StopCause.CONTENT_FILTER
            )
        self._unique_ids(reply.tool_calls)
        self.count_usage(reply, messages, main_request=self.is_main, schema_chars=self.schema_chars)
        self.last_text = reply.text or self.last_text
        await self.transcript.write(self.agent_id, self.turn, "reply", reply=reply.to_record())
        return reply

    async def traced(
        self, messages: list[dict[str, Any]], call: Callable[[], Awaitable[Reply]]
    ) -> Reply:
        """A model call as a `chat` span of this agent's (telemetry)."""
        chat = self.telemetry.chat_started(self.span, self.model.name, messages)
        try:
            reply = await call()
        except BaseException as exc:
            # `kind: message`, the kind a stop cause or the exception's type.
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
        """One model call within one deadline, a stream that failed before it began sent again
        (an empty answer once)."""
        deadline = self.limits.request_timeout
        loop = asyncio.get_running_loop()
        ends = loop.time() + deadline
        empty_answers = 0
        try:
            # One deadline for the whole call, retries included.
            async with asyncio.timeout(deadline):
                for attempt in range(1, MODEL_ATTEMPTS + 1):
                    try:
                        return await self.model.complete(
                            messages,
                            self.schemas,
                            on_text,
                            agent_id=self.agent_id,
                            turn=self.turn,
                            timeout=max(1.0, ends - loop.time()),
                            on_thinking=on_thinking,
                            on_status=self._status,
                        )
                    except ModelError as exc:
                        await self.transcript.write(
                            self.agent_id, self.turn, "modelError", error=str(exc), attempt=attempt
                        )
                        empty_answers += exc.empty
                        self._give_up_or_note(exc, attempt, empty_answers, messages)
        except TimeoutError:
            await self.transcript.write(
                self.agent_id, self.turn, "modelError", error="requestTimeout"
            )
            raise StopRun(
                f"the model call took longer than requestTimeout ({deadline:g} s) in all, "
                "retries included; it was stopped and not sent again",
                StopCause.MODEL,
            ) from None
        raise AssertionError("unreachable: the last attempt stops")  # pragma: no cover

    def _status(self, text: str) -> None:
        self.emit(StatusEvent(text, self.turn, agent_id=self.agent_id))

    def _give_up_or_note(
        self, exc: ModelError, attempt: int, empty_answers: int, messages: list[dict[str, Any]]
    ) -> None:
        """After a failed attempt: StopRun, or a status line saying it is sent again. An empty
        answer is asked again once, then stops naming the endpoint (Decision 68)."""
        if exc.streamed:
            raise StopRun(
                f"the model's stream was cut after {exc.streamed} characters "
                f"had been shown ({exc})",
                StopCause.MODEL,
            )
        if exc.empty and (empty_answers > EMPTY_RETRIES or attempt == MODEL_ATTEMPTS):
            raise StopRun(
                f"model request failed: {exc}{self._overflow_hint(messages)}", StopCause.MODEL
            )
        if not exc.retryable or attempt == MODEL_ATTEMPTS:
            raise StopRun(f"model request failed: {exc}", StopCause.MODEL)
        if exc.empty:
            self._status(f"{exc}; asking again ({empty_answers}/{EMPTY_RETRIES})")
        else:
            self._status(
                f"the model's stream failed before it began ({exc}); sending it again "
                f"({attempt}/{MODEL_ATTEMPTS - 1})"
            )

    def _overflow_hint(self, messages: list[dict[str, Any]]) -> str:
        """An empty answer to a request near the window is most likely a context overflow that
        the server did not report (llama.cpp past its n_ctx answers an empty stream)."""
        tokens, window = self.tokens(messages), self.limits.context_window
        if tokens < window * NEAR_WINDOW:
            return ""
        return (
            f"; likely a context overflow: the request was ~{tokens} tokens of contextWindow "
            f"{window} (if the server's own context is smaller, e.g. llama.cpp's --n_ctx, set "
            "contextWindow to it)"
        )

    def _unique_ids(self, calls: list[ToolCall]) -> None:
        """CONTRACT Decision 7: every id unique in the run before anything runs (a duplicate
        would give every call the last one's result and overwrite spill files)."""
        for call in calls:
            chosen = self.stats.claim_call_id(call.id)
            if chosen != call.id:
                call.model_id, call.id = call.id or None, chosen

    def count_usage(
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
                else self.tokens(messages)
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
