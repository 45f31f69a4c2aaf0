"""The scripted server's strict mode: what Groq, xAI and other strict OpenAI-compatible
servers refuse with HTTP 400 (any message property outside the OpenAI schema; `name` anywhere
but on system and user messages; optionally `stream_options`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# xAI accepts `name` only on user (and system) messages; Groq refuses every unknown property
# ("property 'reasoning_content' is unsupported").
_MESSAGE_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "tool_calls", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}
_CALL_KEYS = {"id", "type", "function"}
_FUNCTION_KEYS = {"name", "arguments"}


def strict_problem(
    body: Mapping[str, Any], *, messages: bool = True, stream_options: bool = False
) -> str | None:
    """Why a strict server refuses this request body, or None: `messages` checks every
    message's properties, `stream_options` refuses that field."""
    if stream_options and "stream_options" in body:
        return "property 'stream_options' is unsupported"
    if not messages:
        return None
    for index, message in enumerate(body.get("messages") or ()):
        if not isinstance(message, Mapping):
            return f"messages[{index}] is not an object"
        allowed = _MESSAGE_KEYS.get(str(message.get("role")))
        if allowed is None:
            return f"messages[{index}].role {message.get('role')!r} is unsupported"
        for key in message:
            if key not in allowed:
                return (
                    f"'messages.{index}' : for 'role:{message.get('role')}' "
                    "the following must be satisfied"
                    f"[('messages.{index}' : property '{key}' is unsupported)]"
                )
        for n, call in enumerate(message.get("tool_calls") or ()):
            extra = set(call) - _CALL_KEYS if isinstance(call, Mapping) else {"?"}
            extra |= (
                set(call.get("function") or {}) - _FUNCTION_KEYS
                if isinstance(call, Mapping)
                else set()
            )
            if extra:
                return (
                    f"'messages.{index}.tool_calls.{n}' : "
                    f"property '{sorted(extra)[0]}' is unsupported"
                )
    return None


# What Mistral's API answers a `user` message right after a `tool` message (its message-order
# rule; reported in issue 32 of this project after a run stopped right after its tools ran).
MISTRAL_HOSTS = frozenset({"api.mistral.ai"})


def mistral_order_problem(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """Mistral's error body when a `user` message follows a `tool` message, or None."""
    previous = None
    for message in body.get("messages") or ():
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "user" and previous == "tool":
            return {
                "object": "error",
                "message": "Unexpected role 'user' after role 'tool'",
                "type": "invalid_request_message_order",
                "param": None,
                "code": "3230",
            }
        previous = role
    return None


def has_null_content(body: Mapping[str, Any]) -> bool:
    """An assistant message with `content: null` (llama-cpp-python's pydantic model refuses it
    with HTTP 500; LiteLLM's templates then yield an empty reply)."""
    return any(
        isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("content", "") is None
        for m in body.get("messages") or ()
    )
