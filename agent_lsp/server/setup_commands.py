"""The setup family: `agentLsp.health` (doctor's checks), `agentLsp.mcpServers`,
`agentLsp.commands` (the user's prompt files) and `agentLsp.setup` (Decision 37)."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_lsp.server.agent_server import AgentServer

HEALTH_ENDPOINT_TIMEOUT = 6.0  # agentLsp.health answers within Emacs's 10 s command timeout


async def health(ls: AgentServer, *args: Any) -> dict[str, Any]:
    """CONTRACT Decision 47: the checks `doctor` prints, as JSON; starts no MCP server."""
    from agent_lsp import health
    from agent_lsp.server import commands
    from agent_lsp.server.folders import workspace_roots

    parsed = commands.parse_args(commands.HealthArgs, "agentLsp.health", args or ({},))
    await ls.settings_ready()
    config = ls.config
    settings = (
        config.settings
        if parsed.model is None
        else config.settings.model_copy(update={"model": parsed.model})
    )
    source = health.SettingsSource(
        config.user_path,
        await asyncio.to_thread(config.user_path.is_file),
        config.user_file_problems,
        config.standing_problems,
    )
    checks = source.checks() + await health.run_checks(
        settings,
        workspace_roots(ls),
        host=ls.runs.host,
        start_mcp=False,
        endpoint_timeout=HEALTH_ENDPOINT_TIMEOUT,
        editor_debug=ls.caps.debug,
    )
    return health.report(checks)


async def mcp_servers(ls: AgentServer, *args: Any) -> list[dict[str, Any]]:
    from agent_lsp.server import commands
    from agent_lsp.server.folders import workspace_roots

    commands.parse_args(commands.NoArgs, "agentLsp.mcpServers", args)
    await ls.settings_ready()
    return await ls.runs.host.mcp_status(workspace_roots(ls), ls.config.settings)


async def prompt_commands(ls: AgentServer, *args: Any) -> list[dict[str, Any]]:
    from agent_lsp.server import commands
    from agent_lsp.server.folders import workspace_roots
    from agent_lsp.server.prompt_files import list_commands

    commands.parse_args(commands.NoArgs, "agentLsp.commands", args)
    return await list_commands(workspace_roots(ls))


async def setup(ls: AgentServer, *args: Any) -> dict[str, Any]:
    from agent_lsp.server.prompt_files import setup_view

    return await setup_view(ls, args)


def register(server: AgentServer) -> None:
    server.command("agentLsp.health")(health)
    server.command("agentLsp.mcpServers")(mcp_servers)
    server.command("agentLsp.commands")(prompt_commands)
    server.command("agentLsp.setup")(setup)
