"""The loop of shared/LOOP.md: build context -> LLM call -> fork on tool calls -> approve ->
execute -> append -> again, until one of the four explained stops."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from agent_lsp.agent.events import CompactionEvent, StatusEvent, SteerEvent
from agent_lsp.agent.loop.budget import NOT_RUN as OVER_BUDGET
from agent_lsp.agent.loop.compaction import (
    COMPACTION_PROMPT,
    open_problems,
    plan_compaction,
    plan_fit,
    plan_squeeze,
    render_for_summary,
    summary_entry,
)
from agent_lsp.agent.loop.model_call import ModelCall
from agent_lsp.agent.loop.services import LoopTools, RunSeams
from agent_lsp.agent.loop.stops import (
    CAP_NOTES,
    CONTINUE_NOTE,
    CUT_NOTE,
    CUT_STOPS,
    LoopOutcome,
    StopRun,
    cancel_if_asked,
)
from agent_lsp.agent.loop.tool_calls import ToolCallRunner
from agent_lsp.agent.loop.verify import Verification
from agent_lsp.agent.messages import Outcome, Reply, ReplyCut, StopCause, ToolResult
from agent_lsp.agent.model.client import ModelError
from agent_lsp.agent.model.tokens import CHARS_PER_TOKEN
from agent_lsp.agent.policy.hooks import HookStopped
from agent_lsp.agent.ports import NO_SPAN, current_tool_span
from agent_lsp.agent.state.session import Entry

log = logging.getLogger(__name__)

FIT_MARGIN = 400  # characters: a cut result's notes (where the rest is) and the estimate's slack


class Steering(Protocol):
    """Where the main loop finds the user's steers (the run's handle)."""

    def take_steers(self) -> list[str]: ...

    def waiting_steers(self) -> list[str]: ...


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
        self.changed_files = seams.changed_files
        self.telemetry = seams.telemetry
        self.budget = seams.budget
        self.spill, self.redact = seams.spill, seams.redact  # for a result cut to fit the window
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
            seams.hooks,
        )
        self.hooks = seams.hooks
        self.stop_hook_active = False  # a Stop hook made this loop go on (Claude Code's flag)
        self.max_turns = max_turns
        self.history = history
        self.system_prompt = system_prompt
        self.turn = 0
        self.logged = 0  # history[:logged] is already in the transcript
        self._cuts = 0
        # Synthetic results given on cancel (written by the run's close).
        self.closed: list[Entry] = []
        self.tool_names = tools.names()
        self.node = ModelCall(seams, agent_id, tools.schemas, max_turns)  # node 2
        self.steering: Steering | None = None  # the main loop's: its run's handle
        self.verification: Verification | None = None  # the main loop's: checks before `done`

    @property
    def model_calls(self) -> int:
        """The model calls that answered (the report's `turns`)."""
        return self.node.answered

    @property
    def last_text(self) -> str:
        return self.node.last_text

    def _tokens(self, messages: list[dict[str, Any]]) -> int:
        return self.node.tokens(messages)

    async def loop(self) -> LoopOutcome:
        """The loop, as one span of the run's trace (a sub-agent's under its delegate call)."""
        self.span = self.node.span = self.calls.agent_span = self.telemetry.agent_started(
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
                    return LoopOutcome(
                        StopCause.TURNS, self.last_text, self.turn, note=self.unheard_steer()
                    )
                self.turn += 1
                self.take_steers()  # the user's steers, right before the call (Decision 50)
                messages = await self.build_context()  # node 1 (+ compaction)
                if over := self.over_budget():  # the compaction's call reached it
                    return over
                reply = await self.node.call(messages, self.turn, self.span)  # node 2 (streamed)
                self.append(Entry(reply.to_message(), "assistant", self.run_id))
                if reply.cut is not None:  # a cut reply is not executed
                    self.refuse_cut_reply(reply)
                    continue
                if not reply.tool_calls:  # node 3: the only fork
                    if (
                        await self.verify_goes_on()
                        or await self.stop_hook_goes_on()
                        or self.steered()
                    ):
                        continue
                    return LoopOutcome(StopCause.ANSWER, reply.text, self.turn)  # node 4
                if over := self.over_budget():  # this call reached it: none of its calls run
                    return over
                self._cuts = 0
                results = await self.calls.run(reply.tool_calls, self.turn)  # approve + execute
                for result in results:  # append in order
                    self.append(Entry(result.to_message(), "tool", self.run_id, result.outcome))
                if spiral := self.calls.spiral():
                    return LoopOutcome(StopCause.SPIRAL, self.last_text, self.turn, note=spiral)
        except (StopRun, HookStopped) as stop:
            if stop.cause == StopCause.HOOK:  # mid-reply: its calls get a result
                self.close_dangling_calls(Outcome.NOT_RUN, f"the run was stopped: {stop}")
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

    async def verify_goes_on(self) -> bool:
        """A `done` with edits: the verify step runs first (before the Stop hooks, Decision 85);
        a failure is the next user message while rounds are left (Decision 59). The message
        follows the model's final answer, never a tool result (Decision 89 needs no filler)."""
        if self.verification is None:
            return False
        failure = await self.verification.step(
            self.calls, self.turn, self.emit, can_go_on=self.turn < self.max_turns
        )
        if failure is None:
            return False
        self.append(Entry({"role": "user", "content": failure}, "note", self.run_id))
        return True

    async def stop_hook_goes_on(self) -> bool:
        """A model-chosen `done`: the Stop (SubagentStop) hooks may block it, their reason then
        being the next user message; that next call counts a turn (Decision 31)."""
        if self.hooks is None or not self.hooks.has(
            "Stop" if self.agent_id == "main" else "SubagentStop"
        ):
            return False
        reason = await self.hooks.stop(self.agent_id, self.turn, self.stop_hook_active, self.span)
        if reason is None:
            return False
        self.stop_hook_active = True
        self.append(Entry({"role": "user", "content": reason}, "note", self.run_id))
        return True

    def take_steers(self) -> None:
        """The steers waiting, each its own user message (meta kind `steer`), each announced."""
        for text in self.steering.take_steers() if self.steering is not None else []:
            self.append(Entry({"role": "user", "content": text}, "steer", self.run_id))
            self.emit(SteerEvent(text, self.turn, agent_id=self.agent_id))

    def steered(self) -> bool:
        """A steer waits at the model's final answer: one more model call (a turn) hears it."""
        return self.steering is not None and bool(self.steering.waiting_steers())

    def unheard_steer(self) -> str | None:
        """Why a max_turns stop left a steer unheard, quoting it (Decision 76)."""
        waiting = self.steering.waiting_steers() if self.steering is not None else []
        if not waiting:
            return None
        quoted = waiting[-1] if len(waiting[-1]) <= 200 else waiting[-1][:200] + "…"
        return (
            f"the turn limit ({self.max_turns} turns, setting maxTurns) came before the model "
            f'could hear the steer "{quoted}"'
        )

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
                await self.fit_newest_results()
                messages = self._messages()
            if self._tokens(messages) > self.limits.context_budget():
                raise StopRun(
                    f"the context does not fit in contextWindow ({self.limits.context_window} "
                    "tokens) even after compaction",
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

    async def fit_newest_results(self) -> None:
        """Side path: the context still does not fit after compaction (which keeps the newest
        exchange whole), so the newest tool results are cut further; what they held stays
        readable in a spill file the cut result names."""
        over = self._tokens(self._messages()) - self.limits.context_budget()
        excess = int(over * CHARS_PER_TOKEN / (self.estimator.ratio or 1.0)) + FIT_MARGIN
        cuts = plan_fit(self.history, excess)
        if not cuts:
            return
        await self.log_pending()
        before = self._tokens(self._messages())
        note = f"[cut to fit contextWindow ({self.limits.context_window} tokens)]\n"
        items = []
        for index, keep in cuts:
            entry = self.history[index]
            name = f"{entry.message.get('tool_call_id') or 'call'}-fit"
            cut = await self.spill.fit(
                entry.message["content"], name, self.redact, max(keep - FIT_MARGIN, 200)
            )
            message = {**entry.message, "content": note + cut.content}
            fitted = Entry(message, "tool", entry.run_id, entry.outcome)
            self.history[index] = fitted
            items.append({"index": index, **fitted.to_record()})
        after = self._tokens(self._messages())
        self.logged = len(self.history)
        text = (
            f"cut {len(cuts)} newest tool result{'s' if len(cuts) != 1 else ''} to fit "
            f"contextWindow (~{before} -> ~{after} tokens)"
        )
        self.emit(CompactionEvent(text, self.turn, agent_id=self.agent_id))
        await self.transcript.write(self.agent_id, self.turn, "history", op="replace", items=items)

    @property
    def schema_tokens(self) -> int:
        """What the tool schemas alone take of every request."""
        return self.estimator.estimate([], self.node.schema_chars)

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
        if self.hooks is not None and self.hooks.has("PreCompact"):
            await self.hooks.pre_compact("auto", self.agent_id, self.turn)
        summarised = [e for e in plan.middle if e.kind != "prompt"]
        prompt = [
            {"role": "system", "content": COMPACTION_PROMPT},
            {"role": "user", "content": render_for_summary(summarised)},
        ]
        try:
            reply = await self.node.traced(
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
            self.node.count_usage(reply, prompt, main_request=False, schema_chars=0)
            summary = reply.text.strip() or render_for_summary(summarised, clip=200)
            await self.transcript.write(
                self.agent_id, self.turn, "reply", purpose="compaction", reply=reply.to_record()
            )
        except ModelError as exc:
            summary = (
                f"(the summariser failed: {exc}; a mechanical digest follows)\n"
                f"{render_for_summary(summarised, clip=200)[-4000:]}"
            )
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
        text = (
            f"compacted {len(summarised)} messages (~{before} -> ~{after} tokens); kept the "
            f"user's requests and {kept} recent messages"
        )
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
