"""A run's hooks (CONTRACT "Your existing setup", Decisions 31-32): the matching hooks of an event
run in parallel (identical commands once), each run shown as a `hook` event, written to the
transcript and to the telemetry span, and their answers read as Claude Code reads them."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_lsp.agent.display import clip
from agent_lsp.agent.events import Event, HookEvent, wire_fields
from agent_lsp.agent.messages import StopCause
from agent_lsp.agent.policy.hook_config import HookSpec, HookTable
from agent_lsp.agent.policy.hook_exec import Confine, HookProcess, run_hook
from agent_lsp.agent.ports import NO_SPAN, EventSink, TraceSpan
from agent_lsp.agent.state.transcript import Transcript
from agent_lsp.agent.wellformed import wellformed

log = logging.getLogger(__name__)
MESSAGE_CHARS = 500
# Events whose exit 2 blocks something (elsewhere it is only shown).
BLOCKING = frozenset({"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"})


class HookStopped(Exception):
    """A hook said `continue: false`, or refused the prompt: the run stops fatal / hook."""

    cause = StopCause.HOOK


@dataclass
class HookAnswer:
    """One hook's answer, read from its exit code and output."""

    spec: HookSpec
    proc: HookProcess
    blocked: bool = False
    reason: str | None = None
    permission: str | None = None  # PreToolUse: allow | deny | ask
    updated_input: dict[str, Any] | None = None
    context: str | None = None  # additionalContext, or plain stdout where it counts
    stop: str | None = None  # `continue: false`: the stopReason
    failed: bool = False  # a non-blocking error (shown, nothing decided)

    @property
    def message(self) -> str | None:
        if self.reason:
            return clip(self.reason, MESSAGE_CHARS)
        if self.proc.error:
            return self.proc.error
        if self.proc.timed_out:
            return f"timed out after {self.spec.timeout:g} s (killed)"
        err = self.proc.stderr.strip()
        return err[:MESSAGE_CHARS] if err else None


def interpret(spec: HookSpec, proc: HookProcess) -> HookAnswer:
    """Claude Code's reading: exit 2 blocks with stderr as the reason (stdout ignored); exit 0
    may print JSON; any other exit, a timeout or a failure to start is a non-blocking error."""
    answer = HookAnswer(spec, proc)
    if proc.error or proc.timed_out:
        answer.failed = True
        return answer
    if proc.code == 2:
        answer.blocked = spec.event in BLOCKING
        answer.reason = proc.stderr.strip() or f"a {spec.event} hook blocked it (exit 2)"
        if spec.event == "PreToolUse":
            answer.permission = "deny"
        return answer
    if proc.code != 0:
        answer.failed = True
        return answer
    text = proc.stdout.strip()
    data: Any = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, dict):
        if spec.event in ("UserPromptSubmit", "SessionStart") and text:
            answer.context = text
        return answer
    _read_json(answer, data)
    return answer


def _read_json(answer: HookAnswer, data: dict[str, Any]) -> None:
    event = answer.spec.event
    if data.get("continue") is False:
        answer.stop = str(data.get("stopReason") or f"a {event} hook stopped the run")
        answer.blocked = True
    decision = data.get("decision")
    reason = data.get("reason")
    if decision == "block":
        answer.blocked = event in BLOCKING
        answer.reason = str(reason or f"a {event} hook blocked it")
        if event == "PreToolUse":
            answer.permission = "deny"
    elif decision == "approve" and event == "PreToolUse":
        answer.permission = "allow"
        answer.reason = str(reason) if reason else None
    specific = data.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        return
    permission = specific.get("permissionDecision")
    if event == "PreToolUse" and permission in ("allow", "deny", "ask"):
        answer.permission = permission
        why = specific.get("permissionDecisionReason")
        answer.reason = str(why) if why else answer.reason
        answer.blocked = permission == "deny" or answer.stop is not None
    updated = specific.get("updatedInput")
    if event == "PreToolUse" and isinstance(updated, dict):
        answer.updated_input = updated
    extra = specific.get("additionalContext")
    if isinstance(extra, str) and extra.strip():
        answer.context = extra


@dataclass
class PreToolVerdict:
    """What the PreToolUse hooks said of one call: `permission` (deny > ask > allow) with its
    reason, and the input a hook replaced."""

    permission: str | None = None
    reason: str | None = None
    updated_input: dict[str, Any] | None = None


@dataclass
class RunHooks:
    """The hooks of one run. With none declared for an event, firing it costs a lookup."""

    table: HookTable
    session_id: str
    transcript_path: str
    root: Path
    env: dict[str, str]
    emit: EventSink
    transcript: Transcript | None
    confine_project: Confine | None = None  # the sandbox, for project hooks when it is on
    # What a hook prints may reach the model (context, a block's reason, a stop): the same
    # redaction as a tool's result (the key never reaches the model, whatever printed it).
    redact: Callable[[str], str] = field(default=lambda text: text)
    processes: set[asyncio.subprocess.Process] = field(default_factory=set)
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    def has(self, event: str) -> bool:
        return self.table.has(event)

    async def fire(
        self,
        event: str,
        names: tuple[str, ...],
        fields: dict[str, Any],
        *,
        agent_id: str = "main",
        turn: int = 0,
        span: TraceSpan = NO_SPAN,
    ) -> list[HookAnswer]:
        """Every active hook of `event` whose matcher matches one of `names`, in parallel."""
        specs: dict[str, HookSpec] = {}
        for spec in self.table.active(event):
            if spec.matches(names):
                specs.setdefault(spec.command, spec)  # identical commands run once
        if not specs:
            return []
        payload = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": str(self.root),
            "hook_event_name": event,
            **({"agent_id": agent_id} if agent_id != "main" else {}),
            **fields,
        }
        data = wellformed(json.dumps(payload, ensure_ascii=False)).encode()
        if self.transcript is not None:  # the hook may read it (transcript_path)
            await self.transcript.flush()
        procs = await asyncio.gather(*(self._run(spec, data) for spec in specs.values()))
        answers = [
            _redacted(interpret(spec, proc), self.redact)
            for spec, proc in zip(specs.values(), procs, strict=True)
        ]
        for answer in answers:
            await self._report(answer, agent_id, turn, span)
        stops = [a.stop for a in answers if a.stop]
        if stops:
            raise HookStopped(f"a {event} hook stopped the run: {stops[0]}")
        return answers

    async def _run(self, spec: HookSpec, payload: bytes) -> HookProcess:
        confine = self.confine_project if spec.scope == "project" else None
        return await run_hook(
            spec.command,
            payload,
            cwd=self.root,
            env=self.env,
            timeout=spec.timeout,
            processes=self.processes,
            confine=confine,
        )

    async def _report(self, answer: HookAnswer, agent_id: str, turn: int, span: TraceSpan) -> None:
        spec, proc = answer.spec, answer.proc
        if proc.error:
            status = f"could not run: {proc.error}"
        elif proc.timed_out:
            status = f"timed out after {spec.timeout:g} s (killed)"
        elif answer.blocked:
            status = f"blocked: {clip(answer.reason or answer.stop or '', 200)}"
        elif answer.failed:
            first = proc.stderr.strip().splitlines()
            status = f"failed (exit {proc.code}){': ' + clip(first[0], 200) if first else ''}"
        else:
            status = "ok"
        event = HookEvent(
            f"{spec.event} hook `{clip(' '.join(spec.command.split()), 80)}` {status}",
            spec.event,
            spec.command,
            proc.code,
            answer.blocked,
            message=answer.message,
            agent_id=agent_id,
        )
        self.emit(event)
        if self.transcript is None:
            return
        await self.transcript.write(
            agent_id,
            turn,
            "hook",
            **wire_fields(event),
            scope=spec.scope,
            seconds=round(proc.seconds, 3),
            stdout=clip(proc.stdout, 4000),
        )
        span.event(
            "agent_lsp.hook",
            {
                "agent_lsp.hook.event": spec.event,
                "agent_lsp.hook.exit_code": -1 if proc.code is None else proc.code,
                "agent_lsp.hook.blocked": answer.blocked,
                "agent_lsp.hook.scope": spec.scope,
            },
        )

    # -- the events ------------------------------------------------------------------------
    async def pre_tool_use(
        self,
        names: tuple[str, ...],
        fields: dict[str, Any],
        *,
        agent_id: str,
        turn: int,
        span: TraceSpan,
    ) -> PreToolVerdict:
        answers = await self.fire(
            "PreToolUse", names, fields, agent_id=agent_id, turn=turn, span=span
        )
        verdict = PreToolVerdict()
        for wanted in ("deny", "ask", "allow"):
            chosen = next((a for a in answers if a.permission == wanted), None)
            if chosen is not None:
                verdict.permission, verdict.reason = wanted, chosen.reason
                break
        if verdict.permission != "deny":
            verdict.updated_input = next(
                (a.updated_input for a in answers if a.updated_input is not None), None
            )
        return verdict

    async def post_tool_use(
        self,
        names: tuple[str, ...],
        fields: dict[str, Any],
        *,
        agent_id: str,
        turn: int,
        span: TraceSpan,
    ) -> str:
        """What the hooks tell the model after the call (a block's reason, added context)."""
        answers = await self.fire(
            "PostToolUse", names, fields, agent_id=agent_id, turn=turn, span=span
        )
        notes = [f"PostToolUse hook: {a.reason}" for a in answers if a.blocked and a.reason]
        notes += [f"PostToolUse hook context: {a.context}" for a in answers if a.context]
        return "\n".join(notes)

    async def user_prompt_submit(self, prompt: str) -> list[str]:
        """The context the hooks add; HookStopped when one refuses the prompt."""
        answers = await self.fire("UserPromptSubmit", (), {"prompt": prompt})
        refused = next((a for a in answers if a.blocked), None)
        if refused is not None:
            raise HookStopped(f"a UserPromptSubmit hook refused the prompt: {refused.reason}")
        return [a.context for a in answers if a.context]

    async def session_start(self, source: str) -> list[str]:
        answers = await self.fire("SessionStart", (source,), {"source": source})
        return [a.context for a in answers if a.context]

    async def stop(self, agent_id: str, turn: int, active: bool, span: TraceSpan) -> str | None:
        """The reason to go on (the next user message), when a Stop hook blocks the stop."""
        event = "Stop" if agent_id == "main" else "SubagentStop"
        answers = await self.fire(
            event, (), {"stop_hook_active": active}, agent_id=agent_id, turn=turn, span=span
        )
        reasons = [a.reason for a in answers if a.blocked and a.reason]
        return "\n".join(reasons) if reasons else None

    async def pre_compact(self, trigger: str, agent_id: str, turn: int) -> None:
        await self.fire(
            "PreCompact",
            (trigger,),
            {"trigger": trigger, "custom_instructions": ""},
            agent_id=agent_id,
            turn=turn,
        )

    def notification(self, message: str, agent_id: str, turn: int) -> None:
        """An approval waits: the Notification hooks run beside it (the request is not held)."""
        if not self.has("Notification"):
            return
        task = asyncio.ensure_future(
            self.fire(
                "Notification",
                ("permission_prompt",),
                {"message": message, "notification_type": "permission_prompt"},
                agent_id=agent_id,
                turn=turn,
            )
        )
        self.background.add(task)
        task.add_done_callback(_settled(self.background))

    async def session_end(self, reason: str, emit: EventSink | None = None) -> None:
        """At exit, after the session's last run: shown through `emit` (a log), not in a run's
        stream or transcript, which have ended."""
        ending = RunHooks(
            self.table,
            self.session_id,
            self.transcript_path,
            self.root,
            self.env,
            emit or _log_event,
            None,
            self.confine_project,
            self.redact,
            self.processes,
        )
        try:
            await ending.fire("SessionEnd", (reason,), {"reason": reason})
        except HookStopped:
            pass  # nothing is left to stop

    async def settle(self, grace: float = 5.0) -> None:
        """The run ends: background hooks (notifications) get `grace` seconds to finish, then
        are cancelled (and killed)."""
        if not self.background:
            return
        pending = list(self.background)
        try:
            await asyncio.wait(pending, timeout=grace)
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def hurry(self) -> None:
        """A second cancel while the run ends: the background hooks are cancelled (and killed)
        now instead of being given their grace."""
        for task in list(self.background):
            task.cancel()


def _redacted(answer: HookAnswer, redact: Callable[[str], str]) -> HookAnswer:
    """Every text of the answer that the model, the user or a log may read, redacted (the
    input a hook replaced runs as given: it is not read by the model)."""
    proc = answer.proc
    answer.proc = replace(
        proc,
        stdout=redact(proc.stdout),
        stderr=redact(proc.stderr),
        error=redact(proc.error) if proc.error else proc.error,
    )
    answer.reason = redact(answer.reason) if answer.reason else answer.reason
    answer.context = redact(answer.context) if answer.context else answer.context
    answer.stop = redact(answer.stop) if answer.stop else answer.stop
    return answer


def _log_event(event: Event) -> None:
    log.info("%s", event.text)


def _settled(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failing notification hook is shown by its event

    return done
