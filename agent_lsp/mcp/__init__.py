"""MCP servers' tools for the agent, through the official `mcp` SDK (imported only when a server starts)."""

from agent_lsp.mcp.config import McpDeclaration, from_acp, from_user_settings, from_workspace
from agent_lsp.mcp.consent import Answer, AskConsent, ConsentStore, WorkspacePolicy, consent_prompt
from agent_lsp.mcp.display import failure_message
from agent_lsp.mcp.manager import McpManager, OnStatus, State
from agent_lsp.mcp.tools import McpTool, tool_aliases

__all__ = [
    "Answer",
    "AskConsent",
    "ConsentStore",
    "McpDeclaration",
    "McpManager",
    "McpTool",
    "OnStatus",
    "State",
    "WorkspacePolicy",
    "consent_prompt",
    "failure_message",
    "from_acp",
    "from_user_settings",
    "from_workspace",
    "tool_aliases",
]
