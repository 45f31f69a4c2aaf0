"""`agent-lsp doctor`: prints the health checks (agent_lsp.health, shared with the LSP command
`agentLsp.health`) one a line, then what was found of the user's setup, grouped (agent_lsp.
setup_view, shared with `agentLsp.setup`), and exits 1 when a check fails or a file of the setup
is malformed (Decision 37)."""

from __future__ import annotations

import argparse
import json
import sys

from agent_lsp.agent.display import for_terminal
from agent_lsp.health import Check, SettingsSource, report, run_checks
from agent_lsp.settings import Settings
from agent_lsp.setup_view import gather_setup, setup_lines
from agent_lsp.terminal.style import Style

__all__ = ["Check", "SettingsSource", "doctor_cli", "run_checks"]


async def doctor_cli(
    args: argparse.Namespace, settings: Settings, source: SettingsSource | None = None
) -> int:
    roots = [args.workspace.resolve()]
    checks = (source.checks() if source else []) + await run_checks(settings, roots)
    setup = await gather_setup(settings, roots)  # starts nothing
    if args.json:
        print(json.dumps({**report(checks), "setup": setup}))
    else:
        s = Style.for_stream(sys.stdout)
        for check in checks:
            # Names and details quote the endpoint and MCP servers: no control character passes.
            print(
                f"{s.ok() if check.ok else s.bad()} {s.bold(for_terminal(check.name))}: "
                f"{for_terminal(check.detail)}"
            )
        print(f"\n{s.bold('Your setup')} (what agent-lsp found, and from where):")
        for kind, text in setup_lines(setup):
            if kind == "head":
                print(f"  {s.bold(for_terminal(text))}:")
            elif kind == "bad":
                print(f"    {s.bad()} {for_terminal(text)}")
            else:
                print(f"    {s.dim(for_terminal(text)) if kind == 'none' else for_terminal(text)}")
    return 0 if all(c.ok for c in checks) and not setup["problems"] else 1
