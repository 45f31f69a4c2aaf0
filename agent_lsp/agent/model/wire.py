"""The history as each endpoint takes it: what a server refuses is changed on the wire only,
never in the stored session (CONTRACT "Model endpoints", Decisions 45 and 89)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from agent_lsp.agent.model.openai_sdk import is_google

# Hosts that refuse a `user` message right after a `tool` message ("Unexpected role 'user'
# after role 'tool'"), which a run stopped right after its tools ran leaves in the session.
USER_AFTER_TOOL_REFUSED = frozenset({"api.mistral.ai"})
# The minimal assistant message put between them (one object: the request encoder caches it)
BRIDGE: dict[str, Any] = {"role": "assistant", "content": "Tool results received."}


def wire_messages(messages: list[dict[str, Any]], endpoint: str) -> list[dict[str, Any]]:
    """`messages` as `endpoint` takes them. An assistant message stored with `content: null`
    (by older versions) gets `""`: llama-cpp-python answers HTTP 500 to null. Gemini refuses a
    tool message without the function's `name`; xAI allows `name` only on user messages and
    Groq refuses unknown properties, so only Google's hosts get it (Decision 45). Mistral gets
    an assistant message between a tool result and a user message (Decision 89)."""
    google = is_google(endpoint)
    bridge = (urlparse(endpoint).hostname or "").lower() in USER_AFTER_TOOL_REFUSED
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    previous = None
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("content", "") is None:
            message = {**message, "content": ""}
        if google:
            message = _named(message, names)
        if bridge and role == "user" and previous == "tool":
            out.append(BRIDGE)
        out.append(message)
        previous = role
    return out


def _named(message: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    for call in message.get("tool_calls") or ():
        names[call.get("id", "")] = call.get("function", {}).get("name", "")
    if (
        message.get("role") == "tool"
        and "name" not in message
        and names.get(message.get("tool_call_id", ""))
    ):
        return {**message, "name": names[message["tool_call_id"]]}
    return message
