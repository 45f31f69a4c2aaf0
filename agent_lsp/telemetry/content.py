"""Prompts and replies in the GenAI conventions' message shape (`gen_ai.input.messages`,
`gen_ai.output.messages`, `gen_ai.system_instructions`), as JSON strings. Recorded only with
`telemetry.logContent`; the caller redacts the key out of them."""

from __future__ import annotations

import json
from typing import Any

from agent_lsp.agent.messages import Reply


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):  # OpenAI's content parts
        out: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                out.append({"type": "text", "content": str(part.get("text", ""))})
            else:
                out.append(
                    {
                        "type": str(part.get("type", "unknown"))
                        if isinstance(part, dict)
                        else "unknown"
                    }
                )
        return out
    return [{"type": "text", "content": str(content)}]


def _message(message: dict[str, Any]) -> dict[str, Any]:
    role = str(message.get("role", "user"))
    if role == "tool":
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.get("tool_call_id"),
                    "response": message.get("content"),
                }
            ],
        }
    parts = _text_parts(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": _arguments(function.get("arguments")),
            }
        )
    return {"role": role, "parts": parts}


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def input_messages(messages: list[dict[str, Any]]) -> tuple[str | None, str]:
    """(system instructions, the other messages), each as the conventions' JSON."""
    system = [
        p for m in messages if m.get("role") == "system" for p in _text_parts(m.get("content"))
    ]
    rest = [_message(m) for m in messages if m.get("role") != "system"]
    return (_dump(system) if system else None), _dump(rest)


def output_messages(reply: Reply) -> str:
    message = _message(reply.to_message())
    message["finish_reason"] = reply.finish_reason or "stop"
    return _dump([message])


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
