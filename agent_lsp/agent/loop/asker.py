"""Asking about one tool call: the approval request built from the prepared call, the approver
awaited (a failure, a timeout or a preview with nothing to preview is a no), and the approval's
events on the stream (ApprovalAsker, a part of ToolCallRunner)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from agent_lsp.agent.events import ApprovalEvent, ApprovalState
from agent_lsp.agent.loop.services import ApprovalGate
from agent_lsp.agent.loop.stops import cancel_if_asked
from agent_lsp.agent.messages import ToolCall
from agent_lsp.agent.policy.approval import PolicyVerdict
from agent_lsp.agent.ports import Answer, ApprovalRequest, Decision, EventSink
from agent_lsp.agent.state.transcript import Redactor
from agent_lsp.agent.tools.base import Prepared, Tool

log = logging.getLogger(__name__)


class ApprovalAsker:
    """One loop's approval requests and events; the runner decides by policy before asking."""

    def __init__(self, agent_id: str, gate: ApprovalGate, emit: EventSink, redact: Redactor):
        self.agent_id = agent_id
        self.gate = gate
        self.emit = emit
        self.redact = redact
        # An approval waits: the Notification hooks hear of it (`permission_prompt`).
        self.notify: Callable[[str], None] | None = None

    async def ask(
        self, call: ToolCall, tool: Tool, prepared: Prepared, policy: PolicyVerdict | None = None
    ) -> Answer:
        request = ApprovalRequest(
            call.id,
            call.name,
            prepared.detail,
            self.agent_id,
            prepared.uri,
            self.redact(prepared.diff) if prepared.diff is not None else None,
            bool(prepared.diff and len(prepared.diff) > 1_000_000),
            self.redact(prepared.new_text) if prepared.new_text is not None else None,
            can_preview=prepared.preview is not None,
            must_ask=(policy.must_ask if policy is not None else None) or prepared.must_ask,
            files=(
                [{k: self.redact(v) for k, v in f.items()} for f in prepared.files]
                if prepared.files
                else None
            ),
            file_texts=(
                [(u, self.redact(old), self.redact(new)) for u, old, new in prepared.file_texts]
                if prepared.file_texts
                else None
            ),
            # never after a hook's ask (Decision 27): that ask travels as prepared.must_ask
            always_rule=None
            if prepared.must_ask
            else self._savable(policy.always if policy is not None else None),
        )
        if request.diff and request.diff_truncated:
            request.diff = request.diff[:1_000_000]
        request.hunk_files = self._hunk_files(prepared, request)
        self.approval_event(call, prepared, ApprovalState.PENDING, request=request)
        if self.notify is not None:
            self.notify(f"agent-lsp needs your permission to use {call.name}")
        try:
            answer = await self.gate.ask(request)
            cancel_if_asked()
        except asyncio.CancelledError:
            self.approval_event(call, prepared, ApprovalState.WITHDRAWN)
            raise
        except Exception as exc:  # an approver that fails must not crash the run: it is a no
            log.warning("approval for %s failed: %s", call.id, exc)
            answer = Answer(Decision.WITHDRAWN, why="no one could be asked (the approval failed)")
        if answer.decision == Decision.ALLOW_ALWAYS and request.always_rule is None:
            answer = Answer(Decision.ALLOW)  # not offered for this call: an allow, once
        if answer.decision == Decision.PREVIEW and prepared.preview is None:
            answer = Answer(Decision.WITHDRAWN, why="no one could be asked")
        if answer.decision == Decision.WITHDRAWN and answer.why is None:
            answer.why = f"unanswered after {self.gate.timeout:g} s"
        state = {
            Decision.ALLOW: ApprovalState.ALLOWED,
            Decision.ALLOW_SESSION: ApprovalState.ALLOWED,
            Decision.ALLOW_ALWAYS: ApprovalState.ALLOWED,
            Decision.DENY: ApprovalState.DENIED,
            Decision.PREVIEW: ApprovalState.PREVIEW,
        }.get(answer.decision, ApprovalState.WITHDRAWN)
        self.approval_event(call, prepared, state)
        return answer

    def _hunk_files(
        self, prepared: Prepared, request: ApprovalRequest
    ) -> list[dict[str, Any]] | None:
        """Every file of an edit with its hunks (Decision 80); no hunk choice when the diff
        was cut or nothing applies only some hunks."""
        if not prepared.hunks:
            return None
        diffs = {f["uri"]: f["diff"] for f in request.files or []}
        if request.uri is not None:
            diffs[request.uri] = request.diff or ""
        choice = not request.diff_truncated and prepared.apply_hunks is not None
        return [
            {
                "uri": uri,
                "diff": diffs.get(uri, ""),
                "hunks": [h.wire() for h in hunks] if choice else [],
            }
            for uri, hunks in prepared.hunks
        ]

    def _savable(self, rule: str | None) -> str | None:
        """A rule holding the key is never shown nor saved: "Always allow" is not offered."""
        return rule if rule is not None and self.redact(rule) == rule else None

    def approval_event(
        self,
        call: ToolCall,
        prepared: Prepared,
        state: ApprovalState,
        note: str = "",
        request: ApprovalRequest | None = None,
    ) -> None:
        detail = prepared.detail
        # The state travels typed and every client labels the line with it
        # ("[approval: pending] …"): the text is what is being approved, not the state again.
        text = f"{detail.splitlines()[0] if detail else call.name}{f' ({note})' if note else ''}"
        extra: dict[str, Any] = {}
        if request is not None and request.uri is not None:  # an edit: what the editor shows
            extra = {
                "uri": request.uri,
                "diff": request.diff or "",
                "new_text": request.new_text or "",
                "diff_truncated": request.diff_truncated,
            }
        elif request is not None and request.files:  # a multi-file edit: every file's diff
            extra = {"files": tuple(request.files)}
        if request is not None and request.hunk_files:  # every edit: its files' hunks
            extra["files"] = tuple(request.hunk_files)
        self.emit(
            ApprovalEvent(text, call.id, call.name, detail, state, agent_id=self.agent_id, **extra)
        )
