"""The loop's fork, approve and execute nodes (shared/LOOP.md): each call validated and approved
(by policy or by the user; a denial goes back to the model), read-only calls run in parallel and
side effects in order, every result appended, repeated failures noted and a spiral stopped.
The loop holds one ToolCallRunner and hands it each reply's calls; the runner is given its own
narrow parts (the tools, the approval gate, the sinks, the counters, the spill)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from agent_lsp.agent.display import clip, escape_invisible
from agent_lsp.agent.events import (
    ApprovalState,
    StatusEvent,
    ToolCallEvent,
    ToolResultEvent,
    wire_fields,
)
from agent_lsp.agent.loop.asker import ApprovalAsker
from agent_lsp.agent.loop.call_text import arguments_of, describe_call
from agent_lsp.agent.loop.services import ApprovalGate, LoopTools, RunStats, Spill
from agent_lsp.agent.loop.tool_hooks import ToolHooks
from agent_lsp.agent.messages import Outcome, ToolCall, ToolResult
from agent_lsp.agent.policy.approval import PolicyVerdict
from agent_lsp.agent.policy.hooks import HookStopped, PreToolVerdict, RunHooks
from agent_lsp.agent.ports import (
    NO_SPAN,
    Answer,
    Decision,
    EventSink,
    RunTelemetry,
    TraceSpan,
    current_tool_span,
)
from agent_lsp.agent.state.transcript import Redactor, Transcript
from agent_lsp.agent.tools.base import EditRejected, Prepared, Tool, ToolError
from agent_lsp.agent.tools.paths import PathRefused

log = logging.getLogger(__name__)

ALLOWING = (Decision.ALLOW, Decision.ALLOW_SESSION, Decision.ALLOW_ALWAYS, Decision.PREVIEW)
REPEATED_FAILURE_NOTE = 3
REPEATED_FAILURE_STOP = 5
TAIL_LINES = 12  # of a command's output, shown to the user


class ToolCallRunner:
    """One loop's calls: approved, run and reported; its counts of failures and denials span
    the loop's turns (the spiral guard reads them)."""

    def __init__(
        self,
        agent_id: str,
        tools: LoopTools,
        gate: ApprovalGate,
        emit: EventSink,
        transcript: Transcript,
        redact: Redactor,
        stats: RunStats,
        spill: Spill,
        telemetry: RunTelemetry,
        hooks: RunHooks | None = None,
    ):
        self.agent_id = agent_id
        self.tools = tools
        self.gate = gate
        self.emit = emit
        self.transcript = transcript
        self.redact = redact
        self.stats = stats
        self.spill = spill
        self.telemetry = telemetry
        self.asker = ApprovalAsker(agent_id, gate, emit, redact)
        self.turn = 0
        self.hooks = ToolHooks(hooks, agent_id)
        if hooks is not None:
            self.asker.notify = lambda text: hooks.notification(text, agent_id, self.turn)
        self.agent_span = NO_SPAN  # the loop's own span: each call's span is its child
        # call id -> its span and approval decision
        self._spans: dict[str, tuple[TraceSpan, str | None]] = {}
        self._finished: dict[str, ToolResult] = {}
        self._failures: Counter[tuple[str, str, str]] = Counter()
        self._denials: Counter[tuple[str, str]] = Counter()
        self._show_tail: set[str] = set()  # calls whose output's last lines the user sees
        # told of every call that ran, with its result (the run's verification, verify.py)
        self.observe: Callable[[ToolCall, Prepared, ToolResult], None] | None = None

    def finished(self, call_id: str) -> ToolResult | None:
        """The result of a call of the last reply, if it finished."""
        return self._finished.get(call_id)

    async def run(self, calls: list[ToolCall], turn: int) -> list[ToolResult]:
        """Every call of one reply, approved and executed: read-only calls in parallel, side
        effects alone and in order; the results in the calls' order."""
        self.turn = turn
        self._finished = {}
        batch: list[tuple[ToolCall, Prepared, Answer]] = []
        for call in calls:
            if self.tools.has_side_effects(call):
                await self._run_batch(batch)
                batch = []
                admitted = await self.admit(call)
                if admitted is not None:
                    await self._execute(call, *admitted)
            else:
                admitted = await self.admit(call)
                if admitted is not None:
                    batch.append((call, *admitted))
        await self._run_batch(batch)
        return [self._finished[c.id] for c in calls]

    async def _run_batch(self, batch: list[tuple[ToolCall, Prepared, Answer]]) -> None:
        """The read-only calls together. When one stops the run (a hook's `continue: false`),
        the others are cancelled and awaited first: nothing of theirs may follow the stop
        (Decision 73); those left without a result are closed by the loop."""
        if not batch:
            return
        tasks = [asyncio.ensure_future(self._execute(*item)) for item in batch]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            raise

    async def admit(self, call: ToolCall) -> tuple[Prepared, Answer] | None:
        """Validate and approve one call; a refusal becomes its result and None is returned."""
        self.stats.tool_calls += 1
        self.emit(
            ToolCallEvent(
                describe_call(call), call.id, call.name, arguments_of(call), agent_id=self.agent_id
            )
        )
        span = self.telemetry.tool_started(self.agent_span, call)
        self._spans[call.id] = (span, None)
        await self.transcript.write(
            self.agent_id,
            self.turn,
            "toolCall",
            callId=call.id,
            tool=call.name,
            arguments=call.arguments,
            **({"modelCallId": call.model_id} if call.model_id else {}),
        )
        ready = await self._prepare(call)
        if ready is None:
            return None
        tool, prepared = ready
        hooked = PreToolVerdict()
        if self.hooks.any:  # PreToolUse: before the user is asked (Decision 31)
            hooked = await self.hooks.before(call, tool, self.turn, span)
            admitted = await self._apply_pre_hook(call, tool, prepared, hooked)
            if admitted is None:
                return None
            tool, prepared = admitted
        if prepared.refresh is not None:  # an edit: the diff on the text as it is now
            await prepared.refresh()
            prepared.detail = self.redact(escape_invisible(prepared.detail))
        policy = self._verdict(tool, prepared, hooked)
        answer = await self._answer(call, tool, prepared, policy)
        await self._write_approval(call, prepared, answer, policy.why, policy.verdict != "ask")
        self._spans[call.id] = (span, str(answer.decision))
        span.event(
            "agent_lsp.approval",
            {
                "agent_lsp.approval.decision": str(answer.decision),
                "agent_lsp.approval.by_policy": policy.verdict != "ask",
                # the kind always; the rule's text (a command, a path) is content: telemetry
                # exports it only with `logContent`
                "agent_lsp.approval.rule_kind": policy.kind,
                **({"agent_lsp.approval.rule": policy.why} if policy.why else {}),
            },
        )
        if answer.decision in ALLOWING:
            await self._granted(call, tool, prepared, answer, policy)
            return prepared, answer
        await self._deny(call, prepared, answer)
        return None

    async def _prepare(self, call: ToolCall) -> tuple[Tool, Prepared] | None:
        """The call checked and prepared (its detail escaped and redacted); None when it cannot
        be (the call's result then says why)."""
        try:
            tool, prepared = await self.tools.prepare(call)
        except (ToolError, PathRefused, ValueError) as exc:
            await self._finish(call, Outcome.ERROR, str(exc))
            return None
        except Exception as exc:
            # A tool (or the host behind it) failing unexpectedly is still a result.
            log.exception("preparing %s failed", call.name)
            await self._finish(
                call, Outcome.ERROR, f"internal error in {call.name}: {type(exc).__name__}: {exc}"
            )
            return None
        if self.redact.overwrites_secret(prepared.diff, prepared.new_text):
            await self._finish(
                call,
                Outcome.ERROR,
                "this edit would replace the model's API key, which you see as "
                "[redacted], with the text [redacted]; nothing was changed. Leave the lines "
                "holding it as they are (edit_file around them).",
            )
            return None
        prepared.detail = self.redact(escape_invisible(prepared.detail))
        return tool, prepared

    async def _apply_pre_hook(
        self, call: ToolCall, tool: Tool, prepared: Prepared, hooked: PreToolVerdict
    ) -> tuple[Tool, Prepared] | None:
        """A PreToolUse verdict applied: its replaced input prepared again, its deny made the
        call's result (None), its ask made a must-ask."""
        if hooked.updated_input is not None:
            again = await self._prepare_updated(call, hooked.updated_input)
            if again is None:
                return None
            tool, prepared = again
        if hooked.permission == "deny":
            why = f"a PreToolUse hook denied it: {hooked.reason or 'no reason given'}"
            self.asker.approval_event(call, prepared, ApprovalState.DENIED, "by a hook")
            await self._write_approval(call, prepared, Answer(Decision.DENY, why=why), why)
            await self._deny(call, prepared, Answer(Decision.DENY, why=why))
            return None
        if hooked.permission == "ask":  # above every allow, below a deny
            prepared.must_ask = prepared.must_ask or (
                f"a PreToolUse hook asks: {hooked.reason or 'no reason given'}"
            )
        return tool, prepared

    def _verdict(self, tool: Tool, prepared: Prepared, hooked: PreToolVerdict) -> PolicyVerdict:
        """The policy's verdict (a hook's allow skipping the prompt only), and why it asks
        said in the detail the user decides on."""
        policy = self.gate.decide(tool, prepared)
        if (
            hooked.permission == "allow"
            and policy.verdict == "ask"
            and not prepared.must_ask
            and not policy.must_ask
        ):
            # A hook's allow skips the prompt only: not a deny, a must-ask (an ask rule, a
            # hook's ask), the destructive list (Decision 26).
            policy = PolicyVerdict("allow", "a PreToolUse hook allows it", kind="hook")
        if policy.verdict == "ask" and policy.says_why and policy.why not in prepared.detail:
            # why a rule or the destructive list asks: said where the user decides
            prepared.detail += f"\n{policy.why}"
        if policy.verdict == "ask" and policy.always_withheld:
            prepared.detail += f"\n{policy.always_withheld}"  # Decision 66: the prompt says why
        return policy

    async def _answer(
        self, call: ToolCall, tool: Tool, prepared: Prepared, policy: PolicyVerdict
    ) -> Answer:
        if policy.verdict == "allow":
            return Answer(Decision.ALLOW)
        if policy.verdict == "deny":
            self.asker.approval_event(call, prepared, ApprovalState.DENIED, "by policy")
            return Answer(Decision.DENY, why="the policy denies it")
        return await self.asker.ask(call, tool, prepared, policy)

    async def _granted(
        self, call: ToolCall, tool: Tool, prepared: Prepared, answer: Answer, policy: PolicyVerdict
    ) -> None:
        """What an allowing answer keeps: a session grant, or the "Always allow" rule saved."""
        if answer.decision == Decision.ALLOW_SESSION:
            self.gate.remember(tool, prepared)
        if answer.decision == Decision.ALLOW_ALWAYS and (rule := policy.always) is not None:
            text, saved = await self.gate.always(tool, prepared, rule)
            self.emit(StatusEvent(text, self.turn, agent_id=self.agent_id))
            await self.transcript.write(
                self.agent_id, self.turn, "allowAlways", callId=call.id, rule=rule, saved=saved
            )

    async def _write_approval(
        self, call: ToolCall, prepared: Prepared, answer: Answer, rule: str, by_policy: bool = True
    ) -> None:
        await self.transcript.write(
            self.agent_id,
            self.turn,
            "approval",
            callId=call.id,
            tool=call.name,
            detail=prepared.detail,
            decision=str(answer.decision),
            byPolicy=by_policy,
            rule=rule,
            **({"reason": answer.reason} if answer.reason else {}),
        )

    async def _prepare_updated(
        self, call: ToolCall, updated: dict[str, Any]
    ) -> tuple[Tool, Prepared] | None:
        """A PreToolUse hook replaced the input: prepared, checked and shown again as if the model
        had sent it (Decision 31); None when it cannot be (the call's result says why)."""
        replaced, args = self.hooks.updated_call(call, updated)
        self.emit(
            ToolCallEvent(describe_call(replaced), call.id, call.name, args, agent_id=self.agent_id)
        )
        await self.transcript.write(
            self.agent_id,
            self.turn,
            "toolCall",
            callId=call.id,
            tool=call.name,
            arguments=replaced.arguments,
            updatedBy="PreToolUse hook",
        )
        try:
            tool, prepared = await self.tools.prepare(replaced)
        except (ToolError, PathRefused, ValueError) as exc:
            await self._finish(call, Outcome.ERROR, f"the input a PreToolUse hook gave: {exc}")
            return None
        prepared.detail = self.redact(escape_invisible(prepared.detail))
        self.hooks.replaced(call, tool, args)
        return tool, prepared

    async def _deny(self, call: ToolCall, prepared: Prepared, answer: Answer) -> None:
        self.stats.denied += 1
        key = (call.name, _digest(call.arguments))
        self._denials[key] += 1
        why = answer.why or (
            "the approval request went unanswered"
            if answer.decision == Decision.WITHDRAWN
            else "the user said no"
        )
        reason = f"; the user's reason: {answer.reason}" if answer.reason else ""
        again = (
            f" You have now proposed this exact call {self._denials[key]} times and it was "
            "denied each time."
            if self._denials[key] > 1
            else ""
        )
        first = prepared.detail.splitlines()[0] if prepared.detail else call.name
        await self._finish(
            call,
            Outcome.DENIED,
            f"{why}{reason}. The {call.name} call did not run ({first}).{again} "
            "Do not repeat it; take a safer route or ask the user.",
        )

    async def _execute(self, call: ToolCall, prepared: Prepared, answer: Answer) -> None:
        first = prepared.detail.splitlines()[0] if prepared.detail else call.name
        self.emit(StatusEvent(f"turn {self.turn}: {first}", self.turn, agent_id=self.agent_id))
        run = (
            prepared.preview
            if answer.decision == Decision.PREVIEW and prepared.preview
            else prepared.execute
        )
        if answer.hunks is not None and prepared.apply_hunks is not None:
            chosen = set(answer.hunks)
            if len(chosen) < sum(len(hunks) for _, hunks in prepared.hunks):
                # the user kept some hunks only (Decision 58)
                run = functools.partial(prepared.apply_hunks, chosen)
        if prepared.show_tail:
            self._show_tail.add(call.id)
        # TRACEPARENT, a sub-agent's parent
        traced = current_tool_span.set(self._spans.get(call.id, (NO_SPAN, None))[0])
        try:
            try:
                text = await run()
            finally:
                current_tool_span.reset(traced)
            await self._finish(
                call, Outcome.OK, await self._after_hooks(call, True, text, prepared)
            )
        except EditRejected as exc:
            await self._deny(
                call,
                prepared,
                Answer(Decision.DENY, why=str(exc) or "the user rejected the edit in the preview"),
            )
        except (ToolError, PathRefused) as exc:
            await self._finish(
                call, Outcome.ERROR, await self._after_hooks(call, False, str(exc), prepared)
            )
        except (asyncio.CancelledError, HookStopped):
            raise
        except Exception as exc:  # a failing tool is a result for the model, never fatal
            log.exception("tool %s failed", call.name)
            await self._finish(
                call, Outcome.ERROR, f"internal error in {call.name}: {type(exc).__name__}: {exc}"
            )
        if self.observe is not None and (done := self._finished.get(call.id)) is not None:
            self.observe(call, prepared, done)

    async def _after_hooks(self, call: ToolCall, ok: bool, text: str, prepared: Prepared) -> str:
        """PostToolUse: what the hooks say is added to the result the model reads."""
        if not self.hooks.any:
            return text
        span = self._spans.get(call.id, (NO_SPAN, None))[0]
        ended = prepared.command.ended if prepared.command is not None else None
        note = await self.hooks.after(call, ok, text, self.turn, span, ended)
        return f"{text}\n\n{note}" if note else text

    async def _finish(self, call: ToolCall, outcome: Outcome, text: str) -> None:
        # Every tool's result (a command's output, a file, a search, an MCP server's answer)
        # enters the history here: the model never reads the key, whatever printed it.
        # A failure or a refusal is told to the model as "error: …" / "denied: …"; the prefix is
        # added here only, so the event (which names the outcome itself) does not say it twice.
        shown = self.redact(text)
        text = f"{outcome}: {shown}" if outcome in (Outcome.ERROR, Outcome.DENIED) else shown
        if outcome == Outcome.ERROR:
            key = (call.name, _digest(call.arguments), _digest(text))
            self._failures[key] += 1
            if self._failures[key] >= REPEATED_FAILURE_NOTE:
                note = (
                    f"\n(this identical call has now failed {self._failures[key]} times with the "
                    "same result: change approach)"
                )
                text, shown = text + note, shown + note
        cut = await self.spill.fit(text, call.id, self.redact)
        result = ToolResult(
            call.id,
            outcome,
            cut.content,
            cut.truncated,
            str(cut.spill_path) if cut.spill_path else None,
        )
        self._finished[call.id] = result
        span, decision = self._spans.pop(call.id, (NO_SPAN, None))
        self.telemetry.tool_ended(span, str(outcome), decision)
        await self._report_result(call.name, result, shown)

    async def _report_result(self, tool: str, result: ToolResult, text: str) -> None:
        lines = text.splitlines()
        first = lines[0] if lines else ""
        tail = None
        if result.call_id in self._show_tail and len(lines) > 1:
            tail = "\n".join(clip(line, 300) for line in lines[1:][-TAIL_LINES:])
        event = ToolResultEvent(
            f"{tool} {'ok' if result.ok else str(result.outcome)}: {clip(first, 200)}",
            result.call_id,
            result.outcome,
            truncated=result.truncated,
            spill_path=result.spill_path,
            tail=tail,
            agent_id=self.agent_id,
        )
        self.emit(event)
        # The transcript's line holds the stream's fields (and the whole result).
        await self.transcript.write(
            self.agent_id, self.turn, "toolResult", **wire_fields(event), content=result.content
        )

    def spiral(self) -> str | None:
        for (name, _, _), count in self._failures.items():
            if count >= REPEATED_FAILURE_STOP:
                # Counted over the run, not consecutively (other calls may come in between).
                return (
                    f"the same {name} call failed {count} times in this run with the same result "
                    "(a spiral guard: the turn budget is not spent on it)"
                )
        return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]
