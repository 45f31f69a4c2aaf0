"""Consent for a project's own allow rules over LSP (CONTRACT Decision 30): one
window/showMessageRequest listing the entries exactly, with Allow / Allow always for this
workspace / Deny; a client without message requests (Helix) or no answer: not used."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.events import StatusEvent
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import ClientRequestError, OutgoingRequest

log = logging.getLogger(__name__)

CHOICES = {"Allow": "allow", "Allow always for this workspace": "allowAlways", "Deny": "deny"}


class LspProjectConsent:
    def __init__(
        self, ls: LanguageServer, caps: ClientCaps, streams: dict[str, Any], timeout: float
    ):
        self.ls = ls
        self.caps = caps
        self.streams = streams  # the runs in flight: their streams say what is waited for
        self.timeout = timeout

    async def ask(
        self, prompt: str, entries: list[str], what: str = "project entries"
    ) -> str | None:
        """allow | allowAlways | deny; None when nobody can be asked or nobody answered."""
        return await ask_consent(self, prompt, f"waiting for consent to the {what}", what)


async def ask_consent(asker: Any, prompt: str, waiting: str, what: str) -> str | None:
    """One consent message request (Allow / Allow always for this workspace / Deny) from an
    object with `ls`, `caps`, `streams` and `timeout`: allow | allowAlways | deny; None when
    nobody can be asked (Helix) or nobody answered in time."""
    if not asker.caps.can_show_message_request:
        return None
    request = OutgoingRequest(
        asker.ls,
        types.WINDOW_SHOW_MESSAGE_REQUEST,
        {
            "type": types.MessageType.Warning.value,
            "message": f"agent-lsp: {prompt}",
            "actions": [{"title": title} for title in CHOICES],
        },
    )
    # a write right after the request (see PITFALLS: eglot)
    for stream in list(asker.streams.values()):
        stream.send(StatusEvent(waiting, None))
    try:
        result = await asyncio.wait_for(asyncio.shield(request.answer), asker.timeout)
    except (TimeoutError, ClientRequestError) as exc:
        log.info("consent for %s: %s", what, exc or "unanswered")
        return None
    finally:
        request.withdraw()
    title = result.get("title") if isinstance(result, dict) else None
    return CHOICES.get(str(title), "deny") if result is not None else "deny"


def plug_permissions(
    host: Any, ls: LanguageServer, caps: ClientCaps, streams: Any, timeout: float
) -> None:
    """The host's permission source over LSP: Claude Code's files, consent asked in the editor,
    "Always allow" saved in the user settings file."""
    from agent_lsp.permissions.source import ClaudePermissions

    host.permissions = ClaudePermissions(LspProjectConsent(ls, caps, streams, timeout).ask)
