"""The loop of shared/LOOP.md: build context -> LLM call -> fork on tool calls -> approve ->
execute -> append -> again, until one of the four explained stops."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_lsp.agent.context import (
    COMPACTION_PROMPT,
    compacted_note,
    open_problems,
    render_for_summary,
    split_for_compaction,
    truncate_tool_output,
)
from agent_lsp.agent.messages import Event, Reply, StopReason, ToolCall, ToolResult, parse_arguments
from agent_lsp.agent.model import ModelError
from agent_lsp.agent.ports import ApprovalRequest, Decision
from agent_lsp.agent.tools.base import Prepared, ToolBox, ToolError
from agent_lsp.agent.tools.command import RunCommand
from agent_lsp.agent.tools.paths import PathRefused

if TYPE_CHECKING:
    from agent_lsp.agent.run import RunContext

log = logging.getLogger(__name__)

MODEL_ATTEMPTS = 3  # a stream cut mid-reply is retried; the SDK retries 429/5xx itself
REPEATED_FAILURE_NOTE = 3
REPEATED_FAILURE_STOP = 5


class StopRun(Exception):
    """Typed loop control: the loop cannot go on (a fatal stop)."""

    def __init__(self, message: str):
        super().__init__(message)


@dataclass
class LoopOutcome:
    reason: StopReason
    final_text: str
    turns: int
    error: str | None = None


class AgentLoop:
    def __init__(self, run: RunContext, agent_id: str, tools: ToolBox, max_turns: int,
                 history: list[dict[str, Any]], system_prompt: str):
        self.run = run
        self.agent_id = agent_id
        self.tools = tools
        self.max_turns = max_turns
        self.history = history
        self.system_prompt = system_prompt
        self.turn = 0
        self.last_text = ""
        self._logged = 0  # history[:_logged] is already in the transcript
        self._finished: dict[str, ToolResult] = {}
        self._failures: Counter[tuple[str, str, str]] = Counter()
        self.schemas = tools.schemas()  # the same every turn: built once (and cache-friendly)
        self._schema_chars = len(json.dumps(self.schemas, ensure_ascii=False))

    @property
    def is_main(self) -> bool:
        return self.agent_id == "main"

    async def loop(self) -> LoopOutcome:
        """The whole design in one function."""
        self._logged = max(0, len(self.history) - 1)  # the new user message is this run's input
        try:
            while True:
                if self.turn >= self.max_turns:  # append, then check the turn budget
                    return LoopOutcome(StopReason.MAX_TURNS, self.last_text, self.turn)
                self.turn += 1
                messages = await self.build_context()  # node 1 (+ compaction)
                reply = await self.call_model(messages)  # node 2 (streamed)
                self.history.append(reply.to_message())
                if not reply.tool_calls:  # node 3: the only fork
                    return LoopOutcome(StopReason.DONE, reply.text, self.turn)  # node 4
                results = await self.execute_tools(reply.tool_calls)  # approve + execute
                self.history.extend(r.to_message() for r in results)  # append in order
                if self._stuck():
                    raise StopRun(f"the model repeated the same failing tool call {REPEATED_FAILURE_STOP} times")
        except StopRun as stop:
            return LoopOutcome(StopReason.FATAL, self.last_text, self.turn, str(stop))
        except asyncio.CancelledError:
            self.close_dangling_calls()
            raise
        except Exception:  # run_task reports it as fatal; the session stays valid for a follow-up
            self.close_dangling_calls("error: the run stopped on an internal error before this call finished")
            raise

    # -- node 1: build context -------------------------------------------------------------
    async def build_context(self) -> list[dict[str, Any]]:
        messages = self._messages()
        if self._tokens(messages) > self.run.compaction_threshold():
            await self.compact_history(self.run.context_budget())
            messages = self._messages()
            if self._tokens(messages) > self.run.context_budget():
                raise StopRun(f"the context does not fit in contextWindow ({self.run.settings.context_window} tokens) even after compaction")
        new = self.history[self._logged :]
        first = {"system": self.system_prompt, "tools": list(self.tools.tools)} if self.turn == 1 else {}
        await self.run.transcript.write(self.agent_id, self.turn, "request", messages=new, **first)
        self._logged = len(self.history)
        return messages

    def _tokens(self, messages: list[dict[str, Any]]) -> int:
        return self.run.estimator.estimate(messages, self._schema_chars)

    def _messages(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.system_prompt}, *self.history]

    async def compact_history(self, budget: int) -> None:
        """Side path: summarise the middle of the history; keep the goal and the recent tail."""
        goal_end, tail_start = split_for_compaction(self.history, budget // 3, self.run.estimator)
        middle = self.history[goal_end:tail_start]
        if not middle:
            return
        prompt = [{"role": "system", "content": COMPACTION_PROMPT}, {"role": "user", "content": render_for_summary(middle)}]
        try:
            reply = await self.run.model.complete(prompt, [], lambda _t: None, agent_id=self.agent_id, turn=self.turn, purpose="compaction")
            summary = reply.text.strip() or render_for_summary(middle, clip=200)
            await self.run.transcript.write(self.agent_id, self.turn, "reply", purpose="compaction", reply=reply.to_record())
        except ModelError as exc:
            summary = f"(the summariser failed: {exc}; a mechanical digest follows)\n{render_for_summary(middle, clip=200)[-4000:]}"
        # Earlier runs of the session and this run so far (the session list grows at the run's end).
        changed = dict.fromkeys([*self.run.session.edited, *self.run.tool_ctx.edited])
        edited = [self.run.paths.display(p) for p in changed]
        note = compacted_note(summary, edited, open_problems(middle), len(middle))
        before = self.run.estimator.estimate(self._messages())
        self.history[goal_end:tail_start] = [note]
        after = self.run.estimator.estimate(self._messages())
        self._logged = len(self.history)
        text = f"compacted {len(middle)} messages (~{before} -> ~{after} tokens); kept the goal and {len(self.history) - goal_end - 1} recent messages"
        self.run.emit(Event("compaction", text, {"turn": self.turn}, self.agent_id))
        await self.run.transcript.write(self.agent_id, self.turn, "compaction", summary=note["content"], dropped=len(middle), tokensBefore=before, tokensAfter=after)

    # -- node 2: the streamed LLM call -------------------------------------------------------
    async def call_model(self, messages: list[dict[str, Any]]) -> Reply:
        self.run.emit(Event("status", f"turn {self.turn}/{self.max_turns}: asking the model", {"turn": self.turn}, self.agent_id))
        on_text = (lambda delta: self.run.emit(Event("text", delta, {}, self.agent_id))) if self.is_main else (lambda _d: None)
        for attempt in range(1, MODEL_ATTEMPTS + 1):
            try:
                reply = await self.run.model.complete(messages, self.schemas, on_text, agent_id=self.agent_id, turn=self.turn)
                break
            except ModelError as exc:
                await self.run.transcript.write(self.agent_id, self.turn, "modelError", error=str(exc), attempt=attempt)
                if not exc.retryable or attempt == MODEL_ATTEMPTS:
                    raise StopRun(f"model request failed: {exc}") from None
                self.run.emit(Event("status", f"model stream failed ({exc}); retrying ({attempt}/{MODEL_ATTEMPTS - 1})", {"turn": self.turn}, self.agent_id))
        if reply.usage:
            self.run.usage.add(reply.usage)
            # prompt_tokens counts the tool schemas too: calibrate on what was actually sent.
            self.run.estimator.calibrate(messages, reply.usage.prompt_tokens, self._schema_chars)
        self.last_text = reply.text or self.last_text
        await self.run.transcript.write(self.agent_id, self.turn, "reply", reply=reply.to_record())
        return reply

    # -- tool layer: approve, execute (reads in parallel, side effects in order) ------------
    async def execute_tools(self, calls: list[ToolCall]) -> list[ToolResult]:
        self._finished = {}
        batch: list[tuple[ToolCall, Prepared]] = []
        for call in calls:
            tool = self.tools.tools.get(call.name)
            if tool is not None and not tool.read_only:
                await self._run_batch(batch)
                batch = []
                admitted = await self.admit(call)
                if isinstance(admitted, Prepared):
                    await self._execute(call, admitted)
            else:
                admitted = await self.admit(call)
                if isinstance(admitted, Prepared):
                    batch.append((call, admitted))
        await self._run_batch(batch)
        return [self._finished[c.id] for c in calls]

    async def _run_batch(self, batch: list[tuple[ToolCall, Prepared]]) -> None:
        if batch:
            await asyncio.gather(*(self._execute(call, prepared) for call, prepared in batch))

    async def admit(self, call: ToolCall) -> Prepared | None:
        """Validate and approve one call; a refusal becomes its result and None is returned."""
        self.run.tool_calls += 1
        self.run.emit(Event("toolCall", describe_call(call), {"callId": call.id, "tool": call.name, "arguments": _arguments(call)}, self.agent_id))
        await self.run.transcript.write(self.agent_id, self.turn, "toolCall", callId=call.id, tool=call.name, arguments=call.arguments)
        try:
            tool = self.tools.get(call.name)
            prepared = await tool.prepare(tool.parse(parse_arguments(call)), self.run.tool_ctx)
        except (ToolError, PathRefused, ValueError) as exc:
            await self._finish(call, False, f"error: {exc}")
            return None
        except Exception as exc:  # a tool (or the host behind it) failing unexpectedly is still a result
            log.exception("preparing %s failed", call.name)
            await self._finish(call, False, f"error: internal error in {call.name}: {type(exc).__name__}: {exc}")
            return None
        command = prepared.command if isinstance(tool, RunCommand) else None
        verdict = self.run.policy.decide(tool, command, prepared.remember)
        if verdict == "allow":
            return prepared
        if verdict == "ask":
            decision = await self._ask(call, prepared.detail)
        else:
            decision = Decision.DENY
            self._approval_event(call, prepared.detail, "denied", "by policy")
        await self.run.transcript.write(self.agent_id, self.turn, "approval", callId=call.id, tool=call.name, detail=prepared.detail, decision=str(decision), byPolicy=verdict == "deny")
        if decision in (Decision.ALLOW, Decision.ALLOW_SESSION):
            if decision == Decision.ALLOW_SESSION:
                self.run.session.approvals.remember(call.name, prepared.remember if command else None)
            return prepared
        self.run.denied += 1
        why = "the approval request went unanswered" if decision == Decision.WITHDRAWN else ("the configured policy denies it" if verdict == "deny" else "the user said no")
        await self._finish(call, False, f"denied: the user did not allow this {call.name} call ({why}): {prepared.detail.splitlines()[0]}. It did not run. Do not repeat it; take a safer route or ask the user.")
        return None

    async def _ask(self, call: ToolCall, detail: str) -> Decision:
        self._approval_event(call, detail, "pending")
        request = ApprovalRequest(call.id, call.name, detail)
        try:
            decision = await self.run.approver.ask(request)
        except asyncio.CancelledError:
            self._approval_event(call, detail, "withdrawn")
            raise
        except Exception as exc:  # an approver that fails must not crash the run: it is a no
            log.warning("approval for %s failed: %s", call.id, exc)
            decision = Decision.WITHDRAWN
        state = {Decision.ALLOW: "allowed", Decision.ALLOW_SESSION: "allowed", Decision.DENY: "denied"}.get(decision, "withdrawn")
        self._approval_event(call, detail, state)
        return decision

    def _approval_event(self, call: ToolCall, detail: str, state: str, note: str = "") -> None:
        text = f"approval {state}{' ' + note if note else ''}: {detail.splitlines()[0]}"
        self.run.emit(Event("approval", text, {"callId": call.id, "tool": call.name, "detail": detail, "state": state}, self.agent_id))

    async def _execute(self, call: ToolCall, prepared: Prepared) -> None:
        self.run.emit(Event("status", f"turn {self.turn}: {prepared.detail.splitlines()[0]}", {"turn": self.turn}, self.agent_id))
        try:
            await self._finish(call, True, await prepared.execute())
        except (ToolError, PathRefused) as exc:
            await self._finish(call, False, f"error: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing tool is a result for the model, never fatal
            log.exception("tool %s failed", call.name)
            await self._finish(call, False, f"error: internal error in {call.name}: {type(exc).__name__}: {exc}")

    async def _finish(self, call: ToolCall, ok: bool, text: str) -> None:
        if not ok:
            key = (call.name, call.arguments, text)
            self._failures[key] += 1
            if self._failures[key] >= REPEATED_FAILURE_NOTE:
                text += f"\n(this identical call has now failed {self._failures[key]} times: change approach)"
        cut = await truncate_tool_output(text, self.run.settings.tool_output_limit, self.run.spill_dir, call.id)
        if cut.spill_path is not None:
            self.run.paths.extra_readable.add(cut.spill_path.resolve())
        result = ToolResult(call.id, ok, cut.content, cut.truncated, str(cut.spill_path) if cut.spill_path else None)
        self._finished[call.id] = result
        data = {"callId": call.id, "ok": ok, "truncated": cut.truncated}
        if result.spill_path:
            data["spillPath"] = result.spill_path
        first = text.splitlines()[0] if text else ""
        self.run.emit(Event("toolResult", f"{call.name} {'ok' if ok else 'failed'}: {first[:200]}", data, self.agent_id))
        await self.run.transcript.write(self.agent_id, self.turn, "toolResult", **data, content=result.content)

    def _stuck(self) -> bool:
        return any(n >= REPEATED_FAILURE_STOP for n in self._failures.values())

    def close_dangling_calls(self, why: str = "cancelled: the user cancelled the run before this call finished") -> None:
        """After a cancel, give every tool call of the last reply a result (finished or
        "cancelled"), so a follow-up in this session never sends a dangling tool call."""
        for index in range(len(self.history) - 1, -1, -1):
            message = self.history[index]
            if message.get("role") == "assistant" and message.get("tool_calls"):
                answered = {m.get("tool_call_id") for m in self.history[index + 1 :] if m.get("role") == "tool"}
                for call in message["tool_calls"]:
                    if call["id"] not in answered:
                        done = self._finished.get(call["id"])
                        content = done.content if done else why
                        self.history.append({"role": "tool", "tool_call_id": call["id"], "content": content})
                return
            if message.get("role") == "user":
                return


def describe_call(call: ToolCall) -> str:
    """`edit_file calc.py`, `run_command pytest -x`: the call in a line (progress, terminal)."""
    args = _arguments(call)
    if isinstance(args, dict):
        main = next((args[k] for k in ("path", "command", "pattern", "task") if isinstance(args.get(k), str)), None)
        if main is not None:
            return f"{call.name} {' '.join(main.split())[:160]}"
    return f"{call.name} {call.arguments[:160]}"


def _arguments(call: ToolCall) -> Any:
    try:
        return parse_arguments(call)
    except ValueError:
        return call.arguments
