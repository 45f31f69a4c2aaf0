"""The core's stream events as ACP `session/update` notifications: one ordered outbox per
session (model text coalesced, never lost), and the mapping of each event kind."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, assert_never

from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentToolCallContent,
    Cost,
    FileEditToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
)

from agent_lsp.acp.tools import (
    EDIT_TOOLS,
    CallIds,
    resolve_path,
    tool_kind,
    tool_locations,
    tool_title,
)
from agent_lsp.agent.coalesce import TextCoalescer
from agent_lsp.agent.events import (
    ApprovalEvent,
    ApprovalState,
    CompactionEvent,
    Event,
    HookEvent,
    ProcessEvent,
    StatusEvent,
    SteerEvent,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    wire_fields,
)

log = logging.getLogger(__name__)

RESULT_TEXT_CHARS = 4000  # of a tool's result line(s) shown in the client


class Outbox:
    """A session's notifications, sent in order by one task; `drain()` waits until everything
    queued so far is written (before a permission request, before a prompt's answer)."""

    def __init__(self, client: Any, session_id: str):
        self.client = client
        self.session_id = session_id
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.text = TextCoalescer(
            lambda text: self._put(
                AgentMessageChunk(session_update="agent_message_chunk", content=text_block(text))
            )
        )
        self.thought = TextCoalescer(lambda text: self._put(thought(text)))
        self.task: asyncio.Task[None] | None = None
        self.broken = False
        self.thought_seen = False  # the model streamed reasoning in this session

    def send(self, update: Any) -> None:
        self.flush_text()
        self._put(update)

    def send_text(self, text: str) -> None:
        self.thought.flush()
        self.text.add(text)

    def send_thought(self, text: str) -> None:
        """The model's reasoning (a `thinking` event) as `agent_thought_chunk` (Decision 40)."""
        self.text.flush()
        self.thought_seen = True
        self.thought.add(text)

    def flush_text(self) -> None:
        self.thought.flush()
        self.text.flush()

    def _put(self, update: Any) -> None:
        if self.broken:
            return
        self.queue.put_nowait(update)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._pump())

    async def drain(self) -> None:
        self.flush_text()
        if not self.broken:
            await self.queue.join()

    async def _pump(self) -> None:
        while not self.queue.empty():
            update = self.queue.get_nowait()
            try:
                await self.client.session_update(session_id=self.session_id, update=update)
            except ConnectionError:  # the client went away: nothing more can reach it
                self.broken = True
            except Exception:
                log.exception("a session/update could not be sent")
            finally:
                self.queue.task_done()
        if self.broken:
            while not self.queue.empty():
                self.queue.get_nowait()
                self.queue.task_done()


def text_block(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def text_content(text: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=text_block(text))


def diff_content(path: Path, old_text: str | None, new_text: str) -> FileEditToolCallContent:
    return FileEditToolCallContent(
        type="diff", path=str(path), old_text=old_text, new_text=new_text
    )


def thought(text: str) -> AgentThoughtChunk:
    return AgentThoughtChunk(session_update="agent_thought_chunk", content=text_block(text))


def locations(items: list[dict[str, Any]]) -> list[ToolCallLocation] | None:
    return [ToolCallLocation(**item) for item in items] or None


@dataclass
class CallInfo:
    tool: str
    arguments: Any
    agent_id: str
    acp_id: str


@dataclass
class RunEvents:
    """The event sink of one run: maps each core event to its session/update."""

    outbox: Outbox
    roots: list[Path]
    ids: CallIds
    run_id: str
    workspace: Any = None  # the AcpWorkspace: applied edits become `diff` content
    cost_before: float = 0.0  # the session's cost of earlier runs (ACP's cost is per session)
    redact: Callable[[str], str] = str  # shown diffs, like every event, never carry the API key
    calls: dict[str, CallInfo] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    cost: float | None = None  # this run's, as the core reports it

    def __call__(self, event: Event) -> None:
        try:
            self._map(event)
        except Exception:  # a mapping problem must never break the run
            log.exception("could not map the %s event to ACP", event.kind)

    def _map(self, event: Event) -> None:
        """Every kind is decided here: mypy checks that none is missing, and so does a unit test."""
        match event:
            case TextDelta():
                if event.agent_id == "main" and event.text:
                    self.outbox.send_text(event.text)
            case ThinkingDelta():
                if event.agent_id == "main" and event.text:
                    self.outbox.send_thought(event.text)
            case ToolCallEvent():
                self._on_tool_call(event)
            case ApprovalEvent():
                if event.state in (ApprovalState.ALLOWED, ApprovalState.PREVIEW):
                    self.outbox.send(
                        ToolCallProgress(
                            session_update="tool_call_update",
                            tool_call_id=self.acp_id(event.call_id),
                            status="in_progress",
                        )
                    )
            case ToolResultEvent():
                self._on_tool_result(event)
            case UsageEvent():
                self._on_usage(event)
            case CompactionEvent():
                self.outbox.send(thought(f"[context compacted] {event.text}"))
            case HookEvent():  # ACP has no hook update: a hook that blocked or failed is a thought
                if event.blocked or event.exit_code != 0:
                    self.outbox.send(thought(f"[hook] {event.text}"))
            case StatusEvent():  # not shown: the tool calls' own updates say what happens
                pass
            case ProcessEvent():  # ACP has no process update: its start and end are thoughts
                self.outbox.send(thought(f"[process] {event.text}"))
            case SteerEvent():  # ACP has no steering (its prompts queue): never sent here
                pass
            case StopEvent():
                self._on_stop()
            case _:
                assert_never(event)

    def _on_tool_call(self, event: ToolCallEvent) -> None:
        call_id, tool, arguments = event.call_id, event.tool, event.arguments
        info = CallInfo(tool, arguments, event.agent_id, self.ids.start(call_id, self.run_id))
        self.calls[call_id] = info
        self.outbox.send(
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=info.acp_id,
                title=tool_title(tool, arguments, event.agent_id),
                kind=tool_kind(tool),
                status="pending",
                locations=locations(tool_locations(tool, arguments, self.roots)),
                raw_input=arguments,
                field_meta={
                    "agentLsp": {"runId": self.run_id, "callId": call_id, "agentId": event.agent_id}
                },
            )
        )

    def _on_tool_result(self, event: ToolResultEvent) -> None:
        info = self.calls.get(event.call_id)
        self.finished.add(event.call_id)
        text = event.text
        if event.tail:
            text += "\n" + event.tail
        if event.truncated:
            where = f" (the whole output is in {event.spill_path})" if event.spill_path else ""
            text += f"\n[truncated for the model{where}]"
        content: list[Any] = [text_content(text[:RESULT_TEXT_CHARS])]
        if info is not None and info.tool in EDIT_TOOLS and event.ok and self.workspace is not None:
            edit = self.workspace.take_edit(self.path_of(info))
            if edit is not None:
                old_text = self.redact(edit.old_text) if edit.old_text is not None else None
                content.insert(0, diff_content(edit.path, old_text, self.redact(edit.new_text)))
        # The raw output is the result's fields as the LSP stream has them (its call is the
        # update's own).
        raw_output = {k: v for k, v in wire_fields(event).items() if k != "callId"}
        self.outbox.send(
            ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=self.acp_id(event.call_id),
                status="completed" if event.ok else "failed",
                content=content,
                raw_output=raw_output,
            )
        )

    def path_of(self, info: CallInfo) -> Path | None:
        args = info.arguments if isinstance(info.arguments, dict) else {}
        return resolve_path(args.get("path"), self.roots)  # resolved, as the tool resolved it

    def _on_usage(self, event: UsageEvent) -> None:
        if event.usage.cost_usd is not None:
            self.cost = round(event.usage.cost_usd, 6)  # the figure the stream shows
        cost = (
            Cost(amount=round(self.cost_before + self.cost, 6), currency="USD")
            if self.cost is not None
            else None
        )
        self.outbox.send(
            UsageUpdate(
                session_update="usage_update",
                used=max(0, event.context_tokens),
                size=max(0, event.context_window),
                cost=cost,
            )
        )

    def _on_stop(self) -> None:
        """A call the run left without a result (a cancel) is shown as ended, not pending."""
        for call_id, info in self.calls.items():
            if call_id not in self.finished:
                self.outbox.send(
                    ToolCallProgress(
                        session_update="tool_call_update",
                        tool_call_id=info.acp_id,
                        status="failed",
                        content=[
                            text_content("cancelled: the turn ended before this call finished")
                        ],
                    )
                )
        self.finished.update(self.calls)

    def acp_id(self, call_id: str) -> str:
        info = self.calls.get(call_id)
        return info.acp_id if info is not None else self.ids.of(call_id)
