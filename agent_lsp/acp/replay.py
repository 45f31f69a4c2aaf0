"""`session/load`: a session's conversation, rebuilt by the core from its transcripts, replayed to
the client as the session/update notifications a live turn would have sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp.schema import AgentMessageChunk, ToolCallStart, UserMessageChunk

from agent_lsp.acp.tools import CallIds, tool_kind, tool_locations, tool_title
from agent_lsp.acp.updates import RESULT_TEXT_CHARS, locations, text_block, text_content, thought
from agent_lsp.agent.messages import Outcome
from agent_lsp.agent.state.session import Entry


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _arguments(raw: Any) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def replay_updates(history: list[Entry], roots: list[Path], ids: CallIds) -> list[Any]:
    """In order: the user's prompts, the agent's text, and each tool call once, with its final
    status and result (a call left without a result counts as failed)."""
    results = {e.message.get("tool_call_id"): e for e in history if e.kind == "tool"}
    updates: list[Any] = []
    for entry in history:
        message = entry.message
        if entry.kind == "prompt":
            updates.append(
                UserMessageChunk(
                    session_update="user_message_chunk",
                    content=text_block(_text(message.get("content"))),
                )
            )
        elif entry.kind == "assistant":
            if text := _text(message.get("content")):
                updates.append(
                    AgentMessageChunk(
                        session_update="agent_message_chunk", content=text_block(text)
                    )
                )
            for call in message.get("tool_calls") or []:
                updates.append(
                    _tool_call(call, results.get(call.get("id")), entry.run_id, roots, ids)
                )
        elif entry.kind == "summary":
            updates.append(
                thought(
                    "[earlier conversation compacted]\n"
                    + _text(message.get("content"))[:RESULT_TEXT_CHARS]
                )
            )
        elif entry.kind == "note":
            updates.append(thought(_text(message.get("content"))[:RESULT_TEXT_CHARS]))
    return updates


def _tool_call(
    call: dict[str, Any], result: Entry | None, run_id: str, roots: list[Path], ids: CallIds
) -> ToolCallStart:
    function = call.get("function") or {}
    tool = str(function.get("name", ""))
    arguments = _arguments(function.get("arguments"))
    shown = _text(result.message.get("content")) if result is not None else ""
    if result is None:
        ok = False
    elif result.outcome is not None:
        ok = result.outcome == Outcome.OK
    else:  # a record from before outcomes were typed
        ok = not shown.startswith(("error:", "denied:", "cancelled:", "not run:"))
    content = [text_content(shown[:RESULT_TEXT_CHARS])] if result is not None else None
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=ids.start(str(call.get("id")), run_id),
        title=tool_title(tool, arguments),
        kind=tool_kind(tool),
        status="completed" if ok else "failed",
        content=content,
        locations=locations(tool_locations(tool, arguments, roots)),
        raw_input=arguments,
    )
