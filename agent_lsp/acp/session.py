"""One ACP session: its core session and workspace, its mode, and its turns (a prompt is one run
of the shared core; its report becomes the stop reason)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    PromptResponse,
    SessionInfoUpdate,
    SessionMode,
    SessionModeState,
)

from agent_lsp.acp.approver import AcpApprover
from agent_lsp.acp.capabilities import FsCaps
from agent_lsp.acp.config_options import THOUGHT_LEVELS, checked_value, config_options
from agent_lsp.acp.content import (
    available_commands,
    plan_entries,
    prompt_images,
    prompt_text,
    slash_command,
)
from agent_lsp.acp.tools import CallIds
from agent_lsp.acp.updates import Outbox, RunEvents, text_block, thought
from agent_lsp.acp.workspace import AcpWorkspace
from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.fs.prompt_files import PromptFiles
from agent_lsp.agent.host import RunHandle, RunPorts, RunRequest
from agent_lsp.agent.images import ImagePart
from agent_lsp.agent.loop.budget import BudgetRefused
from agent_lsp.agent.loop.prompt_plan import PromptPlan, plan_prompt
from agent_lsp.agent.loop.verify import verification_line
from agent_lsp.agent.messages import CancelCause, RunReport, StopCause, StopReason
from agent_lsp.agent.state.session import new_id
from agent_lsp.agent.state.sessions import iso, title_of
from agent_lsp.agent.state.transcript import Redactor
from agent_lsp.frontend import allowed_tools_consent, model_lister
from agent_lsp.langservers.hub import with_diagnostics

if TYPE_CHECKING:
    from agent_lsp.agent.host import AgentHost
    from agent_lsp.agent.state.session import Session
    from agent_lsp.agent.state.sessions import SessionStore
    from agent_lsp.settings import Settings

log = logging.getLogger(__name__)

MODES = {
    "default": ("Default", "Every tool; side effects are asked for as your approval settings say"),
    "plan": (
        "Plan",
        "Read-only tools: the agent looks around and answers with a numbered plan, "
        "changing nothing",
    ),
}
CANCEL_WAIT = 1.0  # a turn whose request is dropped (the client went away) gets this long to stop
# The ACP session whose turn is starting: the MCP consent hook asks in that session.
CURRENT: contextvars.ContextVar[AcpSession | None] = contextvars.ContextVar(
    "agent_lsp_acp_session", default=None
)


def modes_state(current: str) -> SessionModeState:
    return SessionModeState(
        current_mode_id=current,
        available_modes=[
            SessionMode(id=mode, name=name, description=description)
            for mode, (name, description) in MODES.items()
        ],
    )


# ACP's stop reason, from the typed cause (Decision 24; never from the error's text): done ->
# end_turn, max_turns -> max_turn_requests, cancelled -> cancelled; of the fatal stops, a reply
# cut at the output limit is max_tokens and the endpoint's content filter is refusal.
ACP_STOP = {StopCause.OUTPUT_LIMIT: "max_tokens", StopCause.CONTENT_FILTER: "refusal"}
ACP_STOP_BY_REASON = {
    StopReason.DONE: "end_turn",
    StopReason.MAX_TURNS: "max_turn_requests",
    StopReason.CANCELLED: "cancelled",
}


def stop_response(report: RunReport) -> PromptResponse:
    """The turn's ACP stop reason; any other fatal stop is a JSON-RPC error with the readable
    message (the report, with its stopCause, in the error's data)."""
    meta = {"agentLsp": {"report": report.to_dict()}}
    reason = ACP_STOP.get(report.stop_cause) or ACP_STOP_BY_REASON.get(report.stop_reason)
    if reason is None:
        raise RequestError(-32603, report.summary, meta["agentLsp"])
    return PromptResponse(stop_reason=reason, field_meta=meta)


@dataclass
class AcpSession:
    id: str
    host: AgentHost
    client: Any
    caps: FsCaps
    core: Session
    store: SessionStore
    roots: list[Path]
    settings: Settings
    mcp: list[Any]  # the declarations of the client's mcpServers
    until_warm: Any = None  # awaited before a run's first model call (the SDK import)
    mode: str = "default"
    outbox: Outbox = field(init=False)
    ids: CallIds = field(default_factory=CallIds)
    run: RunHandle | None = None
    approver: AcpApprover | None = None
    cost: float = 0.0  # of this process's finished runs; ACP's usage cost is per session
    files: PromptFiles | None = None  # the user's prompt files, as last announced
    used: float = field(default_factory=time.monotonic)  # last prompt's start or end
    # A prompt sent while a turn runs waits here, oldest first, for its turn (Decision 49): True
    # when it may start, False when session/cancel removed it.
    busy: bool = False
    waiting: list[asyncio.Future[bool]] = field(default_factory=list)
    # the reasoning level offered once the model was seen reasoning (None: not offered)
    thought_level: str | None = None
    models: list[str] = field(default_factory=list)  # the endpoint's list, as last offered

    def __post_init__(self) -> None:
        self.outbox = Outbox(self.client, self.id)

    def workspace(self) -> AcpWorkspace:
        return AcpWorkspace(self.client, self.id, self.roots, self.caps)

    def announce(self, problems: Sequence[str] = ()) -> None:
        """What a client shows once the session exists: the slash commands, settings problems."""
        self.outbox.send(
            AvailableCommandsUpdate(
                session_update="available_commands_update",
                available_commands=available_commands(self.files),
            )
        )
        for problem in problems:
            self.outbox.send(thought(f"[agent-lsp settings] {problem}"))

    def set_mode(self, mode: str) -> None:
        """session/set_mode (older clients): also announced to the config option pickers."""
        if mode not in MODES:
            raise RequestError(
                -32602, f"session/set_mode: unknown modeId {mode!r}; available: {', '.join(MODES)}"
            )
        self.mode = mode
        self.outbox.send(
            CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode)
        )
        self.announce_options()

    @property
    def model_name(self) -> str:
        return self.core.model or self.settings.model

    def options(self) -> list[Any]:
        return config_options(MODES, self.mode, self.model_name, self.models, self.thought_level)

    def set_option(self, config_id: str, value: Any) -> list[Any]:
        """session/set_config_option: applies from the next turn; the full updated list."""
        value = checked_value(self.options(), config_id, value)
        if config_id == "mode":
            self.mode = value
            self.outbox.send(
                CurrentModeUpdate(session_update="current_mode_update", current_mode_id=value)
            )
        elif config_id == "model":
            self.core.model = value
        else:
            self.thought_level = value
            self.core.reasoning_effort = THOUGHT_LEVELS[value][1]
        return self.options()

    def models_listed(self, listing: asyncio.Task[list[str]]) -> None:
        """The endpoint's models arrived after session/new answered: the picker gets them."""
        if listing.cancelled() or listing.exception() is not None:
            return
        self.models = listing.result()
        self.announce_options()

    def announce_options(self) -> None:
        self.outbox.send(
            ConfigOptionUpdate(session_update="config_option_update", config_options=self.options())
        )

    def after_turn(self, model_before: str) -> None:
        """A model chosen by the turn itself (a prompt file's `model`), or reasoning seen for
        the first time, changes the options: announced."""
        reasons = self.thought_level is None and self.outbox.thought_seen
        if reasons:
            self.thought_level = "medium"  # the model's own default until one is chosen
        if reasons or self.model_name != model_before:
            self.announce_options()

    @property
    def idle(self) -> bool:
        return not self.busy and not self.waiting

    async def prompt(self, blocks: list[Any]) -> PromptResponse:
        """One turn. A prompt sent while another turn runs (or waits) is queued behind it and
        runs when the earlier ones have ended; session/cancel ends the queued ones too."""
        if self.busy and not await self._wait_turn():
            return PromptResponse(stop_reason="cancelled")
        self.busy = True
        self.used = time.monotonic()
        try:
            return await self._prompt(blocks)
        finally:
            self.used = time.monotonic()
            self._next_turn()

    async def _wait_turn(self) -> bool:
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:  # the client dropped this request while it waited
            if waiter in self.waiting:
                self.waiting.remove(waiter)
            elif waiter.done() and not waiter.cancelled() and waiter.result():
                self._next_turn()  # it had been handed the turn: pass it on
            raise

    def _next_turn(self) -> None:
        """The turn passes to the oldest waiting prompt (the session stays busy), or ends."""
        while self.waiting:
            waiter = self.waiting.pop(0)
            if not waiter.done():
                waiter.set_result(True)
                return
        self.busy = False

    async def _prompt(self, blocks: list[Any]) -> PromptResponse:
        images = prompt_images(blocks)
        text = prompt_text(blocks, self.roots)
        command = slash_command(text)
        if command is not None and command.name == "rewind":
            return await self._rewind_command(command.argument)
        mode = (
            "plan"
            if self.mode == "plan" or (command is not None and command.name == "plan")
            else None
        )
        if command is not None:
            text = command.argument
        # a `/name args` prompt runs the user's prompt file (Decision 34); found again per turn
        token = CURRENT.set(self)  # a project command's consent asks in this session
        try:
            plan = await plan_prompt(
                text,
                self.roots,
                self.settings,
                lister=model_lister(self.host, self.settings),
                consent=allowed_tools_consent(self.host, self.roots),
            )
        finally:
            CURRENT.reset(token)
        if self.files is not None and _names(plan.files) != _names(self.files):
            self.files = plan.files  # the client's command list follows the files
            self.announce()
        if not text.strip() and not images:
            self.outbox.send(
                AgentMessageChunk(
                    session_update="agent_message_chunk",
                    content=text_block("Nothing to do: the prompt is empty."),
                )
            )
            await self.outbox.drain()
            return PromptResponse(stop_reason="end_turn")
        if (unknown := plan.unknown_note()) is not None:  # ACP shows no status line: a thought
            self.outbox.send(thought(unknown))
        model_before = self.model_name
        report = await self._run(text, mode, plan, images)
        self.after_turn(model_before)
        if (
            mode == "plan"
            and report.stop_reason == StopReason.DONE
            and (entries := plan_entries(report.final_text))
        ):
            self.outbox.send(AgentPlanUpdate(session_update="plan", entries=entries))
        if (
            report.stop_reason == StopReason.DONE
            and (verified := verification_line(report.verification))
        ):  # the turn's last words say what checked its edits, or which edited files nothing did
            self.outbox.send(
                AgentMessageChunk(
                    session_update="agent_message_chunk", content=text_block(f"\n\n({verified})")
                )
            )
        self.outbox.send(
            SessionInfoUpdate(
                session_update="session_info_update",
                title=title_of(self.core.title),
                updated_at=iso(self.core.updated),
            )
        )
        await self.outbox.drain()
        return stop_response(report)

    async def _run(
        self,
        text: str,
        mode: str | None,
        plan: PromptPlan | None = None,
        images: list[ImagePart] | None = None,
    ) -> RunReport:
        run_id = new_id("r")
        self.ids.new_run()
        workspace = self.workspace()
        events = RunEvents(
            self.outbox,
            self.roots,
            self.ids,
            run_id,
            workspace,
            cost_before=self.cost,
            redact=Redactor(keyguard.secrets(None, [self.settings.api_key_env])),
        )
        self.approver = AcpApprover(self.client, events, self.settings.approval.timeout)
        token = CURRENT.set(self)  # copied into the run's task: MCP consent asks here
        try:
            hosted = self.host.start(
                RunRequest(
                    plan.prompt if plan is not None else text,
                    self.core,
                    self.store,
                    self.settings,
                    RunPorts(with_diagnostics(self.host, workspace), self.approver, events),
                    run_id=run_id,
                    mode=mode,
                    continue_hint="a follow-up prompt in this session continues from here",
                    before=self.until_warm,
                    mcp_servers=self.mcp,
                    title=text,
                    plan=plan,
                    images=images,
                )
            )
        except BudgetRefused as exc:  # Decision 36: an error answer, as for a bad prompt
            raise RequestError(-32602, f"session/prompt: {exc}") from None
        finally:
            CURRENT.reset(token)
        self.run = hosted
        assert hosted.task is not None
        try:
            await asyncio.shield(hosted.task)
        except asyncio.CancelledError:  # our request was dropped (the connection closes)
            self.host.cancel(run_id, CancelCause(StopCause.SHUTDOWN))
            await asyncio.wait([hosted.task], timeout=CANCEL_WAIT)
            raise
        finally:
            self.run = None
            self.approver = None
        if hosted.report is None:  # pragma: no cover - run_task always reports
            raise RequestError(-32603, f"run {run_id} ended without a report")
        self.cost += hosted.report.usage.cost_usd or 0.0
        return hosted.report

    def cancel(self) -> bool:
        """session/cancel: the turn ends `cancelled`; a pending permission request is withdrawn
        with it (the run's task is cancelled while it waits), whether or not the client answers.
        Every queued prompt of the session is answered `cancelled` too (Decision 49)."""
        queued, self.waiting = self.waiting, []
        for waiter in queued:
            if not waiter.done():
                waiter.set_result(False)
        if self.run is None:
            return bool(queued)
        if self.approver is not None:
            self.approver.cancelling = True
        return self.host.cancel(self.run.id)

    async def rewind(
        self,
        run_id: str | None,
        force: bool = False,
        include_later: bool = False,
        hints: tuple[str, str] = ("`force: true`", "`includeLater: true`"),
    ) -> dict[str, Any]:
        """The rewind's result; each conflict's reason ends with how to take it anyway, in the
        caller's words (`_agentLsp/rewind`'s arguments, or the /rewind command's flags)."""
        if self.run is not None:
            raise RequestError(
                -32602,
                f"session {self.id} is running a turn; cancel it or wait for it before rewinding",
            )
        last = None if run_id else await self.host.last_rewindable(self.roots, session_id=self.id)
        target = run_id or (last[0] if last else None)
        if target is None:
            raise RequestError(
                -32602,
                "nothing to rewind: no run of this session changed files "
                "(or they were rewound already)",
            )
        try:
            result = await self.host.rewind(
                self.roots,
                self.workspace(),
                target,
                force=force,
                include_later=include_later,
                binary_ok=True,
                settings=self.settings,  # its transcript goes where this session's runs' go
            )
        except ValueError as exc:
            raise RequestError(-32602, f"rewind: {exc}") from None
        return result.to_dict(force=hints[0], include_later=hints[1])

    async def _rewind_command(self, argument: str) -> PromptResponse:
        words = argument.split()
        force = "--force" in words
        later = "--include-later" in words
        run_id = next((w for w in words if not w.startswith("--")), None)
        try:
            result = await self.rewind(
                run_id,
                force=force,
                include_later=later,
                hints=("`/rewind --force`", "`/rewind --include-later`"),
            )
            message = describe_rewind(result, self.roots)
        except RequestError as exc:
            message = str(exc)
        self.outbox.send(
            AgentMessageChunk(session_update="agent_message_chunk", content=text_block(message))
        )
        await self.outbox.drain()
        return PromptResponse(stop_reason="end_turn")


def describe_rewind(result: dict[str, Any], roots: list[Path]) -> str:
    from agent_lsp.acp.content import shown

    lines = []
    # an undo is offered only when something was restored (nothing else to undo)
    if result["restored"]:
        lines.append(
            f"Rewound ({result['rewindId']}; `/rewind {result['rewindId']}` puts the files back)."
        )
        lines.append("Restored: " + ", ".join(shown(u, roots) for u in result["restored"]))
    else:
        lines.append("Nothing was restored.")
    for key, title in (("conflicts", "Not touched"), ("notRestorable", "Not restorable")):
        if result[key]:
            lines.append(
                f"{title}: "
                + "; ".join(f"{shown(i['uri'], roots)} ({i['reason']})" for i in result[key])
            )
    return "\n".join(lines)


def _names(files: PromptFiles) -> list[tuple[str, str, str | None]]:
    """What the client's command list shows of the prompt files."""
    return [
        (name, entry.description, entry.argument_hint)
        for entries in (files.commands, files.skills)
        for name, entry in sorted(entries.items())
    ]
