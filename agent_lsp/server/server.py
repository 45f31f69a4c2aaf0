"""The LSP server: the server object (agent_server.py) with the handlers of each method family,
one module each (as ruff's server does): lifecycle, runs, the conversation, setup, code
actions."""

from __future__ import annotations

from agent_lsp.server import (
    code_action_feature,
    conversation,
    lifecycle,
    run_commands,
    setup_commands,
)
from agent_lsp.server.agent_server import AgentServer as AgentServer


def create_server() -> AgentServer:
    server = AgentServer()
    lifecycle.register(server)
    run_commands.register(server)
    conversation.register(server)  # agentLsp.fork, agentLsp.history
    setup_commands.register(server)
    code_action_feature.register(server)
    return server
