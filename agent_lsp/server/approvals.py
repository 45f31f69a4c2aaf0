"""Approvals over LSP: window/showMessageRequest when the client has it, always also
answerable by `agentLsp.approve` or a code action; unanswered after approval.timeout = no."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.ports import ApprovalRequest, Decision
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import ClientRequestError, OutgoingRequest

log = logging.getLogger(__name__)

ACTIONS = {"Allow": Decision.ALLOW, "Allow for session": Decision.ALLOW_SESSION, "Deny": Decision.DENY}
BY_NAME = {"allow": Decision.ALLOW, "allowSession": Decision.ALLOW_SESSION, "deny": Decision.DENY}


@dataclass
class PendingApproval:
    run_id: str
    request: ApprovalRequest
    decision: asyncio.Future[Decision]


class PendingApprovals:
    """Every approval still waiting, server-wide (for agentLsp.approve and code actions)."""

    def __init__(self) -> None:
        self.waiting: dict[tuple[str, str], PendingApproval] = {}

    def answer(self, run_id: str, call_id: str, decision: str) -> bool:
        pending = self.waiting.get((run_id, call_id))
        if pending is None or pending.decision.done() or decision not in BY_NAME:
            return False
        pending.decision.set_result(BY_NAME[decision])
        return True

    def all(self) -> list[PendingApproval]:
        return list(self.waiting.values())


class LspApprover:
    def __init__(self, ls: LanguageServer, caps: ClientCaps, registry: PendingApprovals, run_id: str,
                 timeout: float, on_waiting: Any = None):
        self.ls = ls
        self.caps = caps
        self.registry = registry
        self.run_id = run_id
        self.timeout = timeout
        self.on_waiting = on_waiting  # called right after a request goes out (see PITFALLS: eglot)

    async def ask(self, request: ApprovalRequest) -> Decision:
        loop = asyncio.get_running_loop()
        pending = PendingApproval(self.run_id, request, loop.create_future())
        key = (self.run_id, request.call_id)
        self.registry.waiting[key] = pending
        outgoing: OutgoingRequest | None = None
        try:
            if self.caps.can_show_message_request:
                outgoing = OutgoingRequest(self.ls, types.WINDOW_SHOW_MESSAGE_REQUEST, types.ShowMessageRequestParams(
                    type=types.MessageType.Warning,
                    message=f"agent-lsp wants to {describe(request)}",
                    actions=[types.MessageActionItem(title=t) for t in ACTIONS],
                ))
                outgoing.answer.add_done_callback(lambda done: _from_message(done, pending.decision))
            if self.on_waiting:
                self.on_waiting(request)
            try:
                return await asyncio.wait_for(asyncio.shield(pending.decision), self.timeout)
            except TimeoutError:
                log.info("approval %s unanswered after %ss: denied", request.call_id, self.timeout)
                return Decision.WITHDRAWN
        finally:
            self.registry.waiting.pop(key, None)
            if outgoing is not None:
                outgoing.withdraw()


def describe(request: ApprovalRequest) -> str:
    if request.tool == "run_command":
        return f"run a command:\n{request.detail}"
    return f"use {request.tool}:\n{request.detail}"


def _from_message(done: asyncio.Future[Any], decision: asyncio.Future[Decision]) -> None:
    if decision.done() or done.cancelled():
        return
    exc = done.exception()
    if isinstance(exc, ClientRequestError):
        decision.set_result(Decision.DENY)  # a client error answer counts as dismissed
        return
    result = done.result()
    title = getattr(result, "title", None) if result is not None else None
    if isinstance(result, dict):
        title = result.get("title")
    decision.set_result(ACTIONS.get(title or "", Decision.DENY))  # dismissed (null) is a no
