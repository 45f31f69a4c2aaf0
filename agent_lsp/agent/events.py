"""The stream events the core emits, one typed class per kind, and their one wire form.

Front ends read the typed fields (a result's outcome, an approval's state, a stop's report);
`to_wire` is the `agentLsp/stream` payload (CONTRACT) and, with `tag="type"`, a `stream-json`
line (Decision 40): the keys live here and nowhere else."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Literal

from agent_lsp.agent.messages import Outcome, RunReport, Usage


class ApprovalState(enum.StrEnum):
    """Where a tool call's approval stands (CONTRACT agentLsp/stream `approval`)."""

    PENDING = "pending"
    ALLOWED = "allowed"
    DENIED = "denied"
    WITHDRAWN = "withdrawn"
    PREVIEW = "preview"  # the editor's own preview asks (edit review)


@dataclass(frozen=True)
class TextDelta:
    """Model text as it streams (front ends coalesce the deltas)."""

    kind: ClassVar[Literal["text"]] = "text"
    text: str
    _: KW_ONLY
    agent_id: str = "main"


@dataclass(frozen=True)
class ThinkingDelta:
    """The model's reasoning as it streams: shown apart, never part of the answer."""

    kind: ClassVar[Literal["thinking"]] = "thinking"
    text: str
    _: KW_ONLY
    agent_id: str = "main"


@dataclass(frozen=True)
class ToolCallEvent:
    """The model asked for a tool call (before it is validated or approved)."""

    kind: ClassVar[Literal["toolCall"]] = "toolCall"
    text: str
    call_id: str
    tool: str
    arguments: Any  # the parsed JSON object, or the raw text when it is not one
    _: KW_ONLY
    agent_id: str = "main"


@dataclass(frozen=True)
class ApprovalEvent:
    """An approval asked or answered; `uri` and the diff only on a pending edit's request."""

    kind: ClassVar[Literal["approval"]] = "approval"
    text: str
    call_id: str
    tool: str
    detail: str
    state: ApprovalState
    _: KW_ONLY
    uri: str | None = None
    diff: str = ""
    new_text: str = ""
    diff_truncated: bool = False
    agent_id: str = "main"
    # A multi-file edit's files (rename_symbol), each `{uri, diff}` (CONTRACT Decision 39).
    # Every edit also lists its files' hunks there, `{uri, diff, hunks}` (Decision 80).
    files: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool call ended; `tail` is the last lines of a command's output, shown to the user."""

    kind: ClassVar[Literal["toolResult"]] = "toolResult"
    text: str
    call_id: str
    outcome: Outcome
    _: KW_ONLY
    truncated: bool = False
    spill_path: str | None = None
    tail: str | None = None
    agent_id: str = "main"

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK


@dataclass(frozen=True)
class StatusEvent:
    """What happens now; `waiting="model"` while the model is asked (a front end shows its
    waiting line from it, not from the text)."""

    kind: ClassVar[Literal["status"]] = "status"
    text: str
    # None: a front end's own line, outside the loop (waiting for the editor, an MCP server)
    turn: int | None
    _: KW_ONLY
    waiting: Literal["model"] | None = None
    mcp_server: str | None = None  # an MCP server's state changed: its name and new state
    mcp_state: str | None = None
    agent_id: str = "main"


@dataclass(frozen=True)
class CompactionEvent:
    """The history was squeezed or summarised to fit the context."""

    kind: ClassVar[Literal["compaction"]] = "compaction"
    text: str
    turn: int
    _: KW_ONLY
    agent_id: str = "main"


@dataclass(frozen=True)
class SteerEvent:
    """A user's steer (agentLsp.steer) landed: it is the user message right before this turn's
    model call."""

    kind: ClassVar[Literal["steer"]] = "steer"
    text: str
    turn: int
    _: KW_ONLY
    agent_id: str = "main"


@dataclass(frozen=True)
class UsageEvent:
    """The run's totals after a model call; `context_tokens` is the size of the last request."""

    kind: ClassVar[Literal["usage"]] = "usage"
    text: str
    usage: Usage  # a snapshot: the run's own counter goes on counting
    context_tokens: int
    context_window: int
    _: KW_ONLY
    agent_id: str = "main"
    budget_usd: float | None = None  # the run's budget.maxCostUsd, when it has one


@dataclass(frozen=True)
class HookEvent:
    """A hook ran (CONTRACT `hook`): its event, the command as declared, how it exited (None:
    it never started or was killed at its timeout), whether it blocked, and the reason or the
    start of its stderr."""

    kind: ClassVar[Literal["hook"]] = "hook"
    text: str
    event: str
    command: str
    exit_code: int | None
    blocked: bool
    _: KW_ONLY
    message: str | None = None
    agent_id: str = "main"


@dataclass(frozen=True)
class ProcessEvent:
    """A background process of the run (`run_command {background: true}`) started or ended
    (CONTRACT "Background processes"); `exit_code` once it is no longer running."""

    kind: ClassVar[Literal["process"]] = "process"
    text: str
    process_id: str
    command: str
    state: Literal["running", "exited", "stopped"]
    _: KW_ONLY
    exit_code: int | None = None
    agent_id: str = "main"


@dataclass(frozen=True)
class StopEvent:
    """The run stopped; the last event of every run."""

    kind: ClassVar[Literal["stop"]] = "stop"
    text: str
    report: RunReport
    _: KW_ONLY
    agent_id: str = "main"


Event = (
    TextDelta
    | ThinkingDelta
    | ToolCallEvent
    | ApprovalEvent
    | ToolResultEvent
    | StatusEvent
    | CompactionEvent
    | UsageEvent
    | HookEvent
    | SteerEvent
    | ProcessEvent
    | StopEvent
)
EVENT_TYPES: tuple[type[Event], ...] = (
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ApprovalEvent,
    ToolResultEvent,
    StatusEvent,
    CompactionEvent,
    UsageEvent,
    HookEvent,
    SteerEvent,
    ProcessEvent,
    StopEvent,
)


def wire_fields(event: Event) -> dict[str, Any]:
    """The keys a kind adds to the stream (CONTRACT agentLsp/stream), in their order; also the
    fields of the transcript's `toolResult` line."""
    match event:
        case TextDelta() | ThinkingDelta():
            return {}
        case ToolCallEvent():
            return {"callId": event.call_id, "tool": event.tool, "arguments": event.arguments}
        case ApprovalEvent():
            out: dict[str, Any] = {
                "callId": event.call_id,
                "tool": event.tool,
                "detail": event.detail,
                "state": str(event.state),
            }
            if event.uri is not None:
                out.update(uri=event.uri, diff=event.diff, newText=event.new_text)
                if event.diff_truncated:
                    out["diffTruncated"] = True
            if event.files:
                out["files"] = [dict(f) for f in event.files]
            return out
        case ToolResultEvent():
            out = {
                "callId": event.call_id,
                "ok": event.ok,
                "outcome": str(event.outcome),
                "truncated": event.truncated,
            }
            if event.spill_path:
                out["spillPath"] = event.spill_path
            if event.tail is not None:
                out["tail"] = event.tail
            return out
        case StatusEvent():
            out = {"turn": event.turn}
            if event.waiting is not None:
                out["waiting"] = event.waiting
            if event.mcp_server is not None:
                out.update(mcpServer=event.mcp_server, state=event.mcp_state)
            return out
        case CompactionEvent() | SteerEvent():
            return {"turn": event.turn}
        case UsageEvent():
            out = {
                **event.usage.to_dict(),
                "contextTokens": event.context_tokens,
                "contextWindow": event.context_window,
            }
            if event.budget_usd is not None:  # Decision 36
                out["budgetUsd"] = event.budget_usd
            return out
        case HookEvent():
            out = {
                "event": event.event,
                "command": event.command,
                "exitCode": event.exit_code,
                "blocked": event.blocked,
            }
            if event.message is not None:
                out["message"] = event.message
            return out
        case ProcessEvent():
            out = {"processId": event.process_id, "command": event.command, "state": event.state}
            if event.state != "running":
                out["exitCode"] = event.exit_code
            return out
        case StopEvent():
            return {"report": event.report.to_dict()}


def to_wire(
    event: Event, run_id: str, seq: int, *, tag: Literal["kind", "type"] = "kind"
) -> dict[str, Any]:
    """One stream event as it goes out: `agentLsp/stream`'s params (`tag="kind"`) or a
    `stream-json` line (`tag="type"`, Decision 40: every other field as over LSP)."""
    return {
        **wire_fields(event),
        "agentId": event.agent_id,
        "runId": run_id,
        "seq": seq,
        tag: event.kind,
        "text": event.text,
    }


def redacted(event: Event, redact: Callable[[str], str]) -> Event:
    """`event` with `redact` applied to every string it carries (a report's too); enums,
    numbers and flags as they are."""
    return _redact_value(event, redact)  # type: ignore[no-any-return]


def _redact_value(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, enum.Enum):
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v, redact) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: _redact_value(getattr(value, f.name), redact)
            for f in dataclasses.fields(value)
            if f.init
        }
        return dataclasses.replace(value, **changes)
    return value
