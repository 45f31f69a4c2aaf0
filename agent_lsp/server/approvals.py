"""Approvals over LSP: window/showMessageRequest (every client but Helix), always also
answerable by `agentLsp.approve` or a code action; unanswered after approval.timeout = no.
Edits go to the editor's own preview when the client asked for that."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.ports import Answer, ApprovalRequest, Decision
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import ClientRequestError, OutgoingRequest

log = logging.getLogger(__name__)

ACTIONS = {
    "Allow": Decision.ALLOW,
    "Allow for session": Decision.ALLOW_SESSION,
    "Always allow": Decision.ALLOW_ALWAYS,  # offered only with a rule to save (Decision 27)
    "Deny": Decision.DENY,
}
BY_NAME = {
    "allow": Decision.ALLOW,
    "allowSession": Decision.ALLOW_SESSION,
    "allowAlways": Decision.ALLOW_ALWAYS,
    "deny": Decision.DENY,
}
SAID_NO = "the user said no"


@dataclass
class PendingApproval:
    run_id: str
    request: ApprovalRequest
    answer: asyncio.Future[Answer]


class PendingApprovals:
    """Every approval still waiting, server-wide (for agentLsp.approve and code actions)."""

    def __init__(self) -> None:
        self.waiting: dict[tuple[str, str], PendingApproval] = {}

    def answer(
        self,
        run_id: str,
        call_id: str,
        decision: str,
        reason: str | None = None,
        hunks: list[int] | None = None,
    ) -> bool:
        """Answer a waiting approval; False when there is none (or the choice was not offered).
        `hunks`: an allow of those hunks only; bad hunks raise ValueError (a -32602)."""
        pending = self.waiting.get((run_id, call_id))
        if pending is None or pending.answer.done() or decision not in BY_NAME:
            return False
        if decision == "allowAlways" and pending.request.always_rule is None:
            return False  # not offered for this call
        if hunks is not None:
            pending.answer.set_result(hunk_answer(pending.request, hunks))
            return True
        pending.answer.set_result(
            Answer(BY_NAME[decision], reason or None, SAID_NO if decision == "deny" else None)
        )
        return True

    def get(self, run_id: str, call_id: str) -> PendingApproval | None:
        return self.waiting.get((run_id, call_id))

    def all(self) -> list[PendingApproval]:
        return list(self.waiting.values())


class LspApprover:
    def __init__(
        self,
        ls: LanguageServer,
        caps: ClientCaps,
        registry: PendingApprovals,
        run_id: str,
        timeout: float,
        on_waiting: Any = None,
    ):
        self.ls = ls
        self.caps = caps
        self.registry = registry
        self.run_id = run_id
        self.timeout = timeout
        self.on_waiting = on_waiting  # called right after a request goes out (see PITFALLS: eglot)

    async def ask(self, request: ApprovalRequest) -> Answer:
        if request.can_preview and self.caps.edit_preview:
            return Answer(Decision.PREVIEW)  # the editor's preview asks, when the edit is sent
        loop = asyncio.get_running_loop()
        pending = PendingApproval(self.run_id, request, loop.create_future())
        key = (self.run_id, request.call_id)
        self.registry.waiting[key] = pending
        outgoing: OutgoingRequest | None = None
        try:
            if self.caps.can_show_message_request:
                outgoing = OutgoingRequest(
                    self.ls,
                    types.WINDOW_SHOW_MESSAGE_REQUEST,
                    {
                        "type": types.MessageType.Warning.value,
                        "message": f"agent-lsp wants to {describe(request)}",
                        "actions": [
                            {"title": title, "runId": self.run_id, "callId": request.call_id}
                            for title in choices(request)
                        ],
                    },
                )
                outgoing.answer.add_done_callback(lambda done: _from_message(done, pending))
            if self.on_waiting:
                self.on_waiting(request)
            try:
                return await asyncio.wait_for(asyncio.shield(pending.answer), self.timeout)
            except TimeoutError:
                log.info("approval %s unanswered after %ss: denied", request.call_id, self.timeout)
                return Answer(Decision.WITHDRAWN, why=f"unanswered after {self.timeout:g} s")
        finally:
            self.registry.waiting.pop(key, None)
            if outgoing is not None:
                outgoing.withdraw()


def hunk_answer(request: ApprovalRequest, hunks: list[int]) -> Answer:
    """An allow of some hunks (Decision 58): none is a denial; an index the approval did not
    offer is a ValueError."""
    count = request.hunk_count
    if not count:
        raise ValueError("this approval offers no hunk choice (not an edit, or its diff was cut)")
    wrong = [i for i in hunks if type(i) is not int or not 0 <= i < count]
    if wrong:
        raise ValueError(f"hunk {wrong[0]} is not one of this approval's hunks 0-{count - 1}")
    if not hunks:
        return Answer(Decision.DENY, why="the user rejected every hunk of the edit")
    return Answer(Decision.ALLOW, hunks=tuple(sorted(set(hunks))))


def choices(request: ApprovalRequest) -> list[str]:
    """The action titles: "Always allow" only when there is a rule it would save."""
    return [t for t in ACTIONS if request.always_rule or ACTIONS[t] != Decision.ALLOW_ALWAYS]


def describe(request: ApprovalRequest) -> str:
    always = (
        f"\n(Always allow saves the rule {request.always_rule} in your user settings file)"
        if request.always_rule
        else ""
    )
    if request.tool == "run_command":
        return f"run a command:\n{request.detail}{always}"
    return f"use {request.tool}:\n{request.detail}{always}"


def _from_message(done: asyncio.Future[Any], pending: PendingApproval) -> None:
    answer = pending.answer
    if answer.done() or done.cancelled():
        return
    exc = done.exception()
    if isinstance(exc, ClientRequestError):
        answer.set_result(
            Answer(Decision.DENY, why="the editor could not show the approval request")
        )
        return
    result = done.result()
    item = (
        result
        if isinstance(result, dict)
        else {"title": getattr(result, "title", None)}
        if result is not None
        else {}
    )
    decision = ACTIONS.get(str(item.get("title") or ""))
    if decision is None:  # dismissed (null) or an unknown title: a no
        answer.set_result(Answer(Decision.DENY, why="the user dismissed the approval request"))
        return
    hunks = item.get("hunks")
    if decision == Decision.ALLOW and isinstance(hunks, list):
        # an Allow of some hunks, as `agentLsp.approve {hunks}` (our Emacs client's diff buffer)
        try:
            answer.set_result(hunk_answer(pending.request, hunks))
        except ValueError as bad:  # not the approval's hunks: nothing is applied
            why = f"the editor's hunk choice was wrong: {bad}"
            answer.set_result(Answer(Decision.DENY, why=why))
        return
    reason = (
        item.get("reason")
        if decision == Decision.DENY and isinstance(item.get("reason"), str)
        else None
    )
    answer.set_result(
        Answer(
            decision,
            reason.strip() or None if reason else None,
            SAID_NO if decision == Decision.DENY else None,
        )
    )
