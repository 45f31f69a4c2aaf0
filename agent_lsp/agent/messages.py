"""The values the loop passes around: tool calls, model replies, stream events, the report."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any


class StopReason(enum.StrEnum):
    DONE = "done"
    MAX_TURNS = "max_turns"
    FATAL = "fatal"
    CANCELLED = "cancelled"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model sent it

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


@dataclass
class Reply:
    """One complete model reply: the output of node 2, the input of the fork."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None

    def to_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return message

    def to_record(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "toolCalls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "finishReason": self.finish_reason,
            "usage": vars(self.usage) if self.usage else None,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Reply:
        calls = [ToolCall(c["id"], c["name"], c["arguments"]) for c in record.get("toolCalls", [])]
        usage = Usage(**record["usage"]) if record.get("usage") else None
        return cls(record.get("text", ""), calls, record.get("finishReason"), usage)


@dataclass
class ToolResult:
    call_id: str
    ok: bool
    content: str
    truncated: bool = False
    spill_path: str | None = None

    def to_message(self) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.content}


@dataclass
class Event:
    """A readable line for the user; the LSP layer adds runId and seq."""

    kind: str  # text | toolCall | toolResult | approval | status | compaction | stop
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    agent_id: str = "main"


@dataclass
class RunReport:
    run_id: str
    session_id: str
    stop_reason: StopReason
    turns: int
    final_text: str
    summary: str
    edited_files: list[str]
    tool_calls: int
    denied: int
    usage: Usage
    transcript: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "sessionId": self.session_id,
            "stopReason": str(self.stop_reason),
            "turns": self.turns,
            "finalText": self.final_text,
            "summary": self.summary,
            "editedFiles": list(self.edited_files),
            "toolCalls": self.tool_calls,
            "denied": self.denied,
            "usage": {"promptTokens": self.usage.prompt_tokens, "completionTokens": self.usage.completion_tokens},
            "transcript": self.transcript,
        }
        if self.error:
            out["error"] = self.error
        return out


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as an object; ValueError with a message for the model."""
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments of {call.name} are not valid JSON ({exc.msg} at char {exc.pos}); send a JSON object") from None
    if not isinstance(value, dict):
        raise ValueError(f"the arguments of {call.name} must be a JSON object, got {type(value).__name__}")
    return value
