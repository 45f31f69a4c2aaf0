"""The values the loop passes around: tool calls, model replies, typed tool results, usage and
the run report (the stream events are in events.py)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from agent_lsp.agent.wellformed import malformed_at


class StopReason(enum.StrEnum):
    DONE = "done"
    MAX_TURNS = "max_turns"
    FATAL = "fatal"
    CANCELLED = "cancelled"


class StopCause(enum.StrEnum):
    """Why a run stopped, set where the stop is decided (CONTRACT Decision 24). Front ends map
    from this, never from the error's text: a message is for people and may change."""

    ANSWER = "answer"  # done: the model replied without calling a tool
    TURNS = "turns"  # max_turns: the maxTurns budget ran out
    SPIRAL = "spiral"  # max_turns: the same call kept failing the same way (the spiral guard)
    BUDGET = "budget"  # max_turns: a token or cost budget (not built yet)
    MODEL = "model"  # fatal: the model could not be asked or did not answer usably (an endpoint
    # error, a broken or timed-out stream, no key, a context that does not fit its window)
    OUTPUT_LIMIT = "output_limit"  # fatal: replies cut at the model's output limit, twice in a row
    CONTENT_FILTER = "content_filter"  # fatal: the endpoint's content filter stopped the reply
    # fatal: replies past our caps (1 MB a call, 4 MB a reply), twice in a row
    ARGUMENT_CAP = "argument_cap"
    # fatal: the answer still does not fit --output-schema after its one repair turn
    SCHEMA = "schema"
    HOOK = "hook"  # fatal: a hook refused the prompt or said stop (not built yet)
    INTERNAL = "internal"  # fatal: a bug of ours
    USER = "user"  # cancelled: the user cancelled (Ctrl-C, agentLsp.cancel, session/cancel)
    SIGNAL = "signal"  # cancelled: SIGTERM or SIGHUP, not the user
    SHUTDOWN = "shutdown"  # cancelled: the server shut down or the client went away

    @property
    def reason(self) -> StopReason:
        """The one stop reason this cause belongs to (exit codes follow the reason)."""
        return _REASON_OF[self]


_REASON_OF = {
    StopCause.ANSWER: StopReason.DONE,
    **dict.fromkeys((StopCause.TURNS, StopCause.SPIRAL, StopCause.BUDGET), StopReason.MAX_TURNS),
    **dict.fromkeys(
        (
            StopCause.MODEL,
            StopCause.OUTPUT_LIMIT,
            StopCause.CONTENT_FILTER,
            StopCause.ARGUMENT_CAP,
            StopCause.SCHEMA,
            StopCause.HOOK,
            StopCause.INTERNAL,
        ),
        StopReason.FATAL,
    ),
    **dict.fromkeys((StopCause.USER, StopCause.SIGNAL, StopCause.SHUTDOWN), StopReason.CANCELLED),
}


@dataclass(frozen=True)
class CancelCause:
    """Who cancelled a run that was not cancelled by the user: the typed cause, and a name for
    the summary only (e.g. "SIGTERM")."""

    cause: StopCause
    by: str | None = None


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model sent it
    model_id: str | None = None  # the id the model gave, when it had to be made unique
    # as received (Gemini 3's thought signature): sent back as is
    extra_content: dict[str, Any] | None = None

    def to_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": history_arguments(self.arguments)},
        }
        # only a server that sent it gets it back (strict servers refuse unknown keys)
        if self.extra_content is not None:
            message["extra_content"] = self.extra_content
        return message


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None  # what the endpoint reported for this call, when it did

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "cachedTokens": self.cached_tokens,
        }
        if self.cost_usd is not None:
            out["costUsd"] = round(self.cost_usd, 6)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(
            int(data.get("promptTokens", data.get("prompt_tokens", 0)) or 0),
            int(data.get("completionTokens", data.get("completion_tokens", 0)) or 0),
            int(data.get("cachedTokens", data.get("cached_tokens", 0)) or 0),
            data.get("costUsd", data.get("cost_usd")),
        )


class ReplyCut(enum.StrEnum):
    """Why a reply is not to be executed although it arrived."""

    OUTPUT_LIMIT = "output_limit"  # finish_reason "length"
    ARGUMENT_CAP = "argument_cap"  # one call's arguments past 1 MB
    REPLY_CAP = "reply_cap"  # the whole reply past 4 MB


@dataclass
class Reply:
    """One complete model reply: the output of node 2, the input of the fork."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    cut: ReplyCut | None = None
    reasoning: str = ""  # the model's reasoning deltas (shown as `thinking`, never answer text)
    # the endpoint streamed the `reasoning_content` field (DeepSeek)
    reasoning_content: bool = False
    # the model the endpoint says answered (telemetry; not in the transcript)
    model: str | None = None
    # the model declined (OpenAI's `refusal` deltas): the run stops with it, nothing is stored
    refusal: str = ""

    @property
    def empty(self) -> bool:
        """No answer at all (no text, no call, no refusal) although the stream ended: never a
        silent success (CONTRACT Decision 68). A reply cut at a limit is not empty, it is cut."""
        return (
            not self.text
            and not self.tool_calls
            and not self.refusal
            and self.cut is None
            and self.finish_reason not in ("length", "content_filter")
        )

    def to_message(self) -> dict[str, Any]:
        # `content` is a string even beside tool calls: llama-cpp-python answers HTTP 500 to a
        # null content, and LiteLLM's templates then send back an empty reply.
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [c.to_message() for c in self.tool_calls]
            if self.reasoning_content:
                # DeepSeek's thinking mode refuses the next request without it (400); a server
                # that never streamed the field never gets it (Groq refuses unknown properties).
                message["reasoning_content"] = self.reasoning
        return message

    def to_record(self) -> dict[str, Any]:
        calls = []
        for c in self.tool_calls:
            calls.append(
                {
                    "id": c.id,
                    "name": c.name,
                    "arguments": c.arguments,
                    **({"modelCallId": c.model_id} if c.model_id else {}),
                    **({"extraContent": c.extra_content} if c.extra_content is not None else {}),
                }
            )
        record: dict[str, Any] = {
            "text": self.text,
            "toolCalls": calls,
            "finishReason": self.finish_reason,
            "usage": self.usage.to_dict() if self.usage else None,
        }
        if self.reasoning or self.reasoning_content:
            record["reasoning"] = self.reasoning
            record["reasoningContent"] = self.reasoning_content
        if self.cut:
            record["cut"] = str(self.cut)
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Reply:
        calls = [
            ToolCall(c["id"], c["name"], c["arguments"], extra_content=c.get("extraContent"))
            for c in record.get("toolCalls", [])
        ]
        usage = Usage.from_dict(record["usage"]) if record.get("usage") else None
        cut = (
            ReplyCut(record["cut"]) if record.get("cut") in ReplyCut.__members__.values() else None
        )
        return cls(
            record.get("text", ""),
            calls,
            record.get("finishReason"),
            usage,
            cut,
            str(record.get("reasoning") or ""),
            bool(record.get("reasoningContent")),
        )


class Outcome(enum.StrEnum):
    """How a tool call ended: typed, never parsed back out of the result's text."""

    OK = "ok"
    ERROR = "error"  # the tool ran (or tried to) and failed
    DENIED = "denied"  # the user, the policy or nobody said no: it did not run
    CANCELLED = "cancelled"  # the run was cancelled before it finished
    NOT_RUN = "not_run"  # the reply was cut: nothing of it ran


@dataclass
class ToolResult:
    call_id: str
    outcome: Outcome
    content: str
    truncated: bool = False
    spill_path: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK

    def to_message(self) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.content}


@dataclass(frozen=True)
class Structured:
    """The answer's JSON, validated against the run's output schema (`structuredOutput`)."""

    value: Any


@dataclass
class RunReport:
    run_id: str
    session_id: str
    stop_reason: StopReason
    stop_cause: StopCause
    turns: int
    final_text: str
    summary: str
    edited_files: list[str]
    tool_calls: int
    denied: int
    usage: Usage
    transcript: str
    error: str | None = None
    context_tokens: int = 0
    context_window: int = 0
    rewindable: bool = False
    # only with an output schema, once the answer validated
    structured_output: Structured | None = None
    # `{status, checks, unverifiedFiles}`: what checked the edits (CONTRACT "Verified done")
    verification: dict[str, Any] = field(
        default_factory=lambda: {"status": "none", "checks": [], "unverifiedFiles": []}
    )
    # background processes (Decision 60): `{processId, command, state, exitCode}` each
    processes: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.stop_cause.reason != self.stop_reason:
            raise ValueError(
                f"stop cause {self.stop_cause} does not belong to stop reason {self.stop_reason}"
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "sessionId": self.session_id,
            "stopReason": str(self.stop_reason),
            "stopCause": str(self.stop_cause),
            "turns": self.turns,
            "finalText": self.final_text,
            "summary": self.summary,
            "editedFiles": list(self.edited_files),
            "toolCalls": self.tool_calls,
            "denied": self.denied,
            "usage": self.usage.to_dict(),
            "contextTokens": self.context_tokens,
            "contextWindow": self.context_window,
            "rewindable": self.rewindable,
            "transcript": self.transcript,
        }
        if self.error:
            out["error"] = self.error
        if self.structured_output is not None:
            out["structuredOutput"] = self.structured_output.value
        out["verification"] = self.verification
        if self.processes:
            out["processes"] = [dict(p) for p in self.processes]
        return out


def history_arguments(arguments: str) -> str:
    """A call's arguments as the history keeps them: a JSON object's text as sent, anything
    else `{}`. Echoing malformed JSON back made vLLM and Ollama refuse every later request of
    the session; the call's result tells the model what was wrong (parse_arguments)."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return "{}"
    return arguments if isinstance(value, dict) else "{}"


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as an object; ValueError with a message for the model."""
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the arguments of {call.name} were malformed, not valid JSON ({exc.msg} at char "
            f"{exc.pos}), so the call did not run (the conversation keeps them as {{}}); call it "
            "again with a JSON object"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(
            f"the arguments of {call.name} must be a JSON object, got {type(value).__name__}"
        )
    if (bad := malformed_at(value)) is not None:
        # valid JSON, but no file name, command or pattern can hold it (nor any UTF-8 writer)
        raise ValueError(
            f"invalid characters in argument `{bad[0]}` of {call.name}: it holds a lone "
            f"surrogate ({bad[1]}), which is not a Unicode character; send valid text"
        )
    return value
