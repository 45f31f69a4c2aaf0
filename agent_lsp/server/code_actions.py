"""Code actions: ask/explain/fix on a selection, a quick fix per diagnostic, and the approve /
deny choices while an approval waits (the path for clients without showMessageRequest)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.display import fits_title
from agent_lsp.server.approvals import PendingApproval, PendingApprovals
from agent_lsp.server.run_prompt import range_text, shown_name
from agent_lsp.server.wording import selection_prompt

SELECTION_ACTIONS = [
    ("Ask agent about selection", "Answer my question about this code.", True),
    ("Agent: explain", "Explain what this code does, briefly and exactly.", False),
    ("Agent: fix", "Find and fix the bugs in this code. Keep the change minimal.", False),
]


def approval_actions(pending: PendingApproval) -> list[types.CodeAction]:
    """Allow only when the whole command fits in one title line (CONTRACT Decision 12); else
    Deny and "show full command" (Allow stays available through agentLsp.approve). The
    command is on the detail's first line, its invisible characters escaped."""
    request = pending.request
    head = (request.detail.splitlines() or [request.tool])[0]
    # an edit's title: path and size
    allow = fits_title(head) if request.tool == "run_command" else True
    shown = head if allow else f"{head[:60]}… (too long for one line: see the full command)"
    always = [("Always allow", "allowAlways")] if request.always_rule else []
    choices = (
        [("Allow", "allow"), ("Allow for session", "allowSession"), *always, ("Deny", "deny")]
        if allow
        else [("Deny", "deny")]
    )
    base = {"runId": pending.run_id, "callId": request.call_id}
    actions = [
        types.CodeAction(
            title=f"Agent approval: {title} — {shown}",
            kind=types.CodeActionKind.QuickFix,
            command=types.Command(
                title=title, command="agentLsp.approve", arguments=[{**base, "decision": decision}]
            ),
        )
        for title, decision in choices
    ]
    what = "command" if request.tool == "run_command" else "change"
    actions.append(
        types.CodeAction(
            title=f"Agent approval: show the full {what}",
            kind=types.CodeActionKind.QuickFix,
            command=types.Command(title="Show", command="agentLsp.showApproval", arguments=[base]),
        )
    )
    return actions


def code_actions(
    ls: LanguageServer,
    params: types.CodeActionParams,
    approvals: PendingApprovals,
    extra: list[types.CodeAction] | None = None,
) -> list[types.CodeAction]:
    uri = params.text_document.uri
    rng = params.range
    actions: list[types.CodeAction] = []
    for pending in approvals.all():
        actions += approval_actions(pending)
    actions += extra or []
    if rng.start != rng.end:
        doc = ls.workspace.text_documents.get(uri)
        text = range_text(ls, doc.source, rng) if doc is not None else ""
        if doc is not None and text.strip():
            where = shown_name(ls, uri)
            for title, instruction, ask in SELECTION_ACTIONS:
                # Worded as a `question` run is (one builder); our clients turn the "Ask" action
                # into `{question, textDocument, range}`, a stock client runs this prompt.
                prompt = selection_prompt(instruction, where, rng, text, doc.language_id or "")
                args: dict[str, Any] = {
                    "prompt": prompt,
                    "textDocument": {"uri": uri},
                    "range": _range_dict(rng),
                    "selectionInPrompt": True,
                }
                if ask:
                    args["ask"] = True
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.RefactorRewrite
                        if not ask
                        else types.CodeActionKind.Empty,
                        command=types.Command(
                            title=title, command="agentLsp.run", arguments=[args]
                        ),
                    )
                )
    for diagnostic in params.context.diagnostics or []:
        prompt = f"Fix this problem: {diagnostic.message}" + (
            f" ({diagnostic.source})" if diagnostic.source else ""
        )
        args = {
            "prompt": prompt,
            "textDocument": {"uri": uri},
            "range": _range_dict(diagnostic.range),
        }
        actions.append(
            types.CodeAction(
                title="Agent: fix this problem",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                command=types.Command(
                    title="Agent: fix this problem", command="agentLsp.run", arguments=[args]
                ),
            )
        )
    return actions


def _range_dict(rng: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": rng.start.line, "character": rng.start.character},
        "end": {"line": rng.end.line, "character": rng.end.character},
    }
