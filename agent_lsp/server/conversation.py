"""`agentLsp.fork` and `agentLsp.history` (CONTRACT "Conversation (turn 4)"): thin handlers over
agent/state/fork.py and agent/state/history.py."""

from __future__ import annotations

from typing import Any

from pygls.lsp.server import LanguageServer


def register(server: LanguageServer) -> None:
    """Register the two commands on the server."""

    @server.command("agentLsp.fork")
    async def fork(client: LanguageServer, *args: Any) -> dict[str, str]:
        from agent_lsp.agent.state.fork import fork_session
        from agent_lsp.agent.state.sessions import SessionError
        from agent_lsp.server import commands
        from agent_lsp.server.conversation_args import ForkArgs
        from agent_lsp.server.folders import workspace_roots

        ls: Any = client  # the AgentServer (server.py imports this module)
        parsed = commands.parse_args(ForkArgs, "agentLsp.fork", args)
        await ls.settings_ready()  # its base record goes where the runs' transcripts go
        try:
            parent, store = await ls.runs.host.session_to_read(
                workspace_roots(ls), parsed.session_id
            )
            forked = await fork_session(
                store, parent, parsed.run_id, ls.config.settings.transcript_path()
            )
        except SessionError as exc:
            raise commands.JsonRpcInvalidParams(f"agentLsp.fork: {exc}") from None
        return {"sessionId": forked.id}

    @server.command("agentLsp.history")
    async def history(client: LanguageServer, *args: Any) -> dict[str, Any]:
        from agent_lsp.agent.state.history import session_history
        from agent_lsp.agent.state.sessions import SessionError
        from agent_lsp.server import commands
        from agent_lsp.server.conversation_args import HistoryArgs
        from agent_lsp.server.folders import workspace_roots

        ls: Any = client
        parsed = commands.parse_args(HistoryArgs, "agentLsp.history", args)
        try:
            session, _ = await ls.runs.host.session_to_read(workspace_roots(ls), parsed.session_id)
        except SessionError as exc:
            raise commands.JsonRpcInvalidParams(f"agentLsp.history: {exc}") from None
        return await session_history(session)
