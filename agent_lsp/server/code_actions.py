"""Code actions: ask/explain/fix on a selection, a quick fix per diagnostic, and the approve /
deny choices while an approval waits (the path for clients without showMessageRequest)."""

from __future__ import annotations

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.server.approvals import PendingApprovals

SELECTION_ACTIONS = [
    ("Ask agent about selection", "Answer my question about this code.", True),
    ("Agent: explain", "Explain what this code does, briefly and exactly.", False),
    ("Agent: fix", "Find and fix the bugs in this code. Keep the change minimal.", False),
]


def selected_text(ls: LanguageServer, uri: str, rng: types.Range) -> str:
    doc = ls.workspace.get_text_document(uri)
    lines = doc.lines
    codec = ls.workspace.position_codec
    start = codec.position_from_client_units(lines, rng.start)
    end = codec.position_from_client_units(lines, rng.end)
    if start.line == end.line:
        return lines[start.line][start.character : end.character] if start.line < len(lines) else ""
    head = lines[start.line][start.character :] if start.line < len(lines) else ""
    middle = "".join(lines[start.line + 1 : end.line])
    tail = lines[end.line][: end.character] if end.line < len(lines) else ""
    return head + middle + tail


def code_actions(ls: LanguageServer, params: types.CodeActionParams, approvals: PendingApprovals) -> list[types.CodeAction]:
    uri = params.text_document.uri
    rng = params.range
    actions: list[types.CodeAction] = []
    for pending in approvals.all():
        detail = pending.request.detail.splitlines()[0][:80]
        for title, decision in (("Allow", "allow"), ("Allow for session", "allowSession"), ("Deny", "deny")):
            args = {"runId": pending.run_id, "callId": pending.request.call_id, "decision": decision}
            actions.append(types.CodeAction(title=f"Agent approval: {title} — {detail}", kind=types.CodeActionKind.QuickFix,
                                            command=types.Command(title=title, command="agentLsp.approve", arguments=[args])))
    if rng.start != rng.end:
        text = selected_text(ls, uri, rng)
        if text.strip():
            for title, instruction, ask in SELECTION_ACTIONS:
                args = {"prompt": f"{instruction}\n\n```\n{text}\n```", "textDocument": {"uri": uri},
                        "range": _range_dict(rng)}
                if ask:
                    args["ask"] = True
                actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.RefactorRewrite if not ask else types.CodeActionKind.Empty,
                                                command=types.Command(title=title, command="agentLsp.run", arguments=[args])))
    for diagnostic in params.context.diagnostics or []:
        prompt = f"Fix this problem: {diagnostic.message}" + (f" ({diagnostic.source})" if diagnostic.source else "")
        args = {"prompt": prompt, "textDocument": {"uri": uri}, "range": _range_dict(diagnostic.range)}
        actions.append(types.CodeAction(title="Agent: fix this problem", kind=types.CodeActionKind.QuickFix,
                                        diagnostics=[diagnostic],
                                        command=types.Command(title="Agent: fix this problem", command="agentLsp.run", arguments=[args])))
    return actions


def _range_dict(rng: types.Range) -> dict:
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}
