"""The user's prompt files over LSP: `agentLsp.commands` (the `/name` commands a client's
picker offers) and an `agentLsp.run` prompt planned (a `/name args` prompt expanded) before
the server adds its file and selection."""

from __future__ import annotations

from typing import Any

from agent_lsp.agent.fs.prompt_files import PromptFiles, discover_shared
from agent_lsp.agent.host import AgentHost
from agent_lsp.agent.loop.prompt_plan import PromptPlan, plan_prompt
from agent_lsp.frontend import allowed_tools_consent, model_lister
from agent_lsp.server.commands import RunArgs
from agent_lsp.settings import Settings


async def plan_run(
    host: AgentHost, roots: Any, parsed: RunArgs, settings: Settings
) -> tuple[RunArgs, PromptPlan]:
    """The run's arguments with a `/name args` prompt expanded, and its plan."""
    plan = await plan_prompt(
        parsed.prompt or "",
        roots,
        settings,
        lister=model_lister(host, settings),
        consent=allowed_tools_consent(host, list(roots)),
    )
    if plan.invocation is not None:
        parsed = parsed.model_copy(update={"prompt": plan.prompt})
    return parsed, plan


def command_items(files: PromptFiles) -> list[dict[str, Any]]:
    """`agentLsp.commands` (Decision 34): the commands, then the skills a `/name` also runs
    (those no command name hides), each `{name, description, argumentHint, source, path,
    kind}`, sorted by name within each kind."""
    items = []
    for kind, entries in (("command", files.commands), ("skill", files.skills)):
        for name in sorted(entries):
            if kind == "skill" and name in files.commands:
                continue
            entry = entries[name]
            items.append(
                {
                    "name": name,
                    "description": entry.description,
                    "argumentHint": entry.argument_hint,
                    "source": entry.scope,
                    "path": str(entry.path),
                    "kind": kind,
                }
            )
    return items


async def list_commands(roots: Any) -> list[dict[str, Any]]:
    return command_items(await discover_shared(roots))


async def setup_view(ls: Any, args: Any) -> dict[str, Any]:
    """`agentLsp.setup {}` (Decision 37): what was found of the user's setup; starts nothing."""
    from agent_lsp.server import commands
    from agent_lsp.server.folders import workspace_roots
    from agent_lsp.setup_view import gather_setup

    commands.parse_args(commands.NoArgs, "agentLsp.setup", args)
    await ls.settings_ready()
    return await gather_setup(
        ls.config.settings,
        workspace_roots(ls),
        host=ls.runs.host,
        editor=bool(getattr(ls.caps, "code_intel", False)),
    )
