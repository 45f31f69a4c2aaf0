"""Approvals over ACP: `session/request_permission` with Allow / Allow for session / Deny; a
`cancelled` outcome or no answer within approval.timeout is a withdrawal. MCP consent for a
workspace-declared server asks the same way (kind `other`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from acp.schema import PermissionOption, ToolCallUpdate

from agent_lsp.acp.tools import EDIT_TOOLS, tool_kind, tool_locations, tool_title
from agent_lsp.acp.updates import Outbox, RunEvents, diff_content, locations, text_content
from agent_lsp.agent.ports import Answer, ApprovalRequest, Decision
from agent_lsp.agent.tools.paths import path_of_uri

log = logging.getLogger(__name__)

SAID_NO = "the user said no"
CHOICES = {
    "allow": ("Allow", "allow_once", Decision.ALLOW),
    "allowSession": ("Allow for session", "allow_always", Decision.ALLOW_SESSION),
    "deny": ("Deny", "reject_once", Decision.DENY),
}
# Offered beside "Allow for session" when there is a rule to save (Decision 27).
ALWAYS = ("Always allow", "allow_always", Decision.ALLOW_ALWAYS)
CONSENT = {
    "allow": ("Allow", "allow_once"),
    "allowAlways": ("Allow always for this workspace", "allow_always"),
    "deny": ("Deny", "reject_once"),
}


def options(choices: dict[str, tuple[Any, ...]]) -> list[PermissionOption]:
    return [
        PermissionOption(option_id=key, name=value[0], kind=value[1])
        for key, value in choices.items()
    ]


async def ask_client(
    client: Any,
    outbox: Outbox,
    tool_call: ToolCallUpdate,
    choices: dict[str, tuple[Any, ...]],
    timeout: float,
) -> str | None:
    """The chosen option id; None when the client answered `cancelled`. TimeoutError when it did
    not answer in time (the request is abandoned: a late answer is ignored); errors propagate."""
    await outbox.drain()  # the tool call's own update goes out first
    request = client.request_permission(
        session_id=outbox.session_id, tool_call=tool_call, options=options(choices)
    )
    response = await asyncio.wait_for(request, timeout)
    outcome = response.outcome
    chosen = (
        getattr(outcome, "option_id", None)
        if getattr(outcome, "outcome", None) == "selected"
        else None
    )
    return chosen if chosen in choices else None if chosen is None else "deny"


class AcpApprover:
    def __init__(self, client: Any, events: RunEvents, timeout: float):
        self.client = client
        self.events = events
        self.timeout = timeout
        self.cancelling = False  # set by session/cancel: a `cancelled` outcome then needs no reason

    async def ask(self, request: ApprovalRequest) -> Answer:
        info = self.events.calls.get(request.call_id)
        tool, arguments = (info.tool, info.arguments) if info else (request.tool, None)
        content: list[Any] = [text_content(request.detail)]
        choices = CHOICES
        if request.always_rule:
            choices = {**CHOICES, "allowAlways": ALWAYS}
            choices = {k: choices[k] for k in ("allow", "allowSession", "allowAlways", "deny")}
            content.append(
                text_content(
                    f"Always allow saves the rule {request.always_rule} in your user settings file"
                )
            )
        if tool in EDIT_TOOLS and request.new_text is not None:
            path = self.events.path_of(info) if info else None
            if path is not None:
                content.insert(0, diff_content(path, await self._old_text(path), request.new_text))
        elif request.file_texts:  # a multi-file edit (rename_symbol): one diff per file
            content[:0] = [
                diff_content(path, old, new)
                for uri, old, new in request.file_texts
                if (path := path_of_uri(uri)) is not None
            ]
        tool_call = ToolCallUpdate(
            tool_call_id=self.events.ids.of(request.call_id),
            title=tool_title(tool, arguments, request.agent_id),
            kind=tool_kind(tool),
            status="pending",
            content=content,
            locations=locations(tool_locations(tool, arguments, self.events.roots)),
            field_meta={"agentLsp": {"runId": self.events.run_id, "callId": request.call_id}},
        )
        try:
            chosen = await ask_client(
                self.client, self.events.outbox, tool_call, choices, self.timeout
            )
        except TimeoutError:
            return Answer(Decision.WITHDRAWN, why=f"unanswered after {self.timeout:g} s")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client failed to show it: nobody said yes
            log.warning("session/request_permission for %s failed: %s", request.call_id, exc)
            return Answer(Decision.DENY, why="the editor could not show the permission request")
        if chosen is None:
            why = (
                "the user cancelled the turn"
                if self.cancelling
                else "the user dismissed the permission request"
            )
            return Answer(Decision.WITHDRAWN, why=why)
        decision = choices[chosen][2]
        return Answer(decision, why=SAID_NO if decision == Decision.DENY else None)

    async def _old_text(self, path: Any) -> str | None:
        if not (path.exists() or path.is_symlink()):
            return None
        try:
            return self.events.redact((await self.events.workspace.read(path)).text)
        except (ValueError, OSError):
            return None


class _Consent:
    """A yes/no question to the user as a permission of kind `other`, in the session whose
    run needs the answer; None when no session can ask, the client fails, or time runs out."""

    def __init__(self, client: Any, outbox_of: Any, timeout: float):
        self.client = client
        self.outbox_of = outbox_of  # () -> the Outbox of the session asking, or None
        self.timeout = timeout

    async def _ask(self, call_id: str, title: str, prompt: str, what: str) -> str | None:
        outbox = self.outbox_of()
        if outbox is None:
            return None
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title=title,
            kind="other",
            status="pending",
            content=[text_content(prompt)],
        )
        try:
            return await ask_client(self.client, outbox, tool_call, CONSENT, self.timeout)
        except TimeoutError:
            return None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("asking consent for %s failed: %s", what, exc)
            return None


class ProjectConsent(_Consent):
    """Consent for a project's own allow rules, hooks or a command file's `allowed-tools`
    (Decision 30); the title is the prompt's own question (`Run these hooks?`)."""

    async def ask(
        self, prompt: str, entries: list[str], what: str = "project settings"
    ) -> str | None:
        question = prompt.strip().splitlines()[-1] if prompt.strip() else ""
        head, mark, _ = question.partition("?")
        title = head + mark if mark else "Use the project's settings?"
        return await self._ask("project-rules-consent", title, prompt, what)


class McpConsent(_Consent):
    """`McpHooks.ask_consent` over ACP."""

    async def ask(self, decl: Any, prompt: str) -> str | None:
        return await self._ask(
            f"mcp-consent-{decl.name}",
            f"Start MCP server `{decl.name}`?",
            prompt,
            f"MCP server {decl.name}",
        )
