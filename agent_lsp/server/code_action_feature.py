"""The code-action family: each pending approval's actions, a selection's prompts and "rewind
the last run" (code_actions.py builds them); a failure is logged, never fatal."""

from __future__ import annotations

import logging

from lsprotocol import types

from agent_lsp.server.agent_server import AgentServer

log = logging.getLogger(__name__)


async def code_action(ls: AgentServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    try:
        from agent_lsp.server.code_actions import code_actions
        from agent_lsp.server.folders import workspace_roots

        extra = []
        if (last := await ls.runs.host.last_rewindable(workspace_roots(ls))) is not None:
            run_id, count = last
            extra.append(
                types.CodeAction(
                    title=f"Agent: rewind last run ({count} file{'s' if count != 1 else ''})",
                    kind=types.CodeActionKind.Empty,
                    command=types.Command(
                        title="Rewind", command="agentLsp.rewind", arguments=[{"runId": run_id}]
                    ),
                )
            )
        return code_actions(ls, params, ls.runs.approvals, extra)
    except Exception:  # a code action request must never take the server down
        log.exception("code actions failed")
        return []


def register(server: AgentServer) -> None:
    server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.RefactorRewrite,
                types.CodeActionKind.Empty,
            ]
        ),
    )(code_action)
