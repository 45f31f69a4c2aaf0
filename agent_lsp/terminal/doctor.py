"""`agent-lsp doctor`: prints the health checks (agent_lsp.health, shared with the LSP command
`agentLsp.health`) one a line, and exits 1 when one fails."""

from __future__ import annotations

import argparse
import json
import sys

from agent_lsp.agent.display import for_terminal
from agent_lsp.health import Check, SettingsSource, report, run_checks
from agent_lsp.settings import Settings
from agent_lsp.terminal.style import Style

__all__ = ["Check", "SettingsSource", "doctor_cli", "run_checks"]


async def doctor_cli(
    args: argparse.Namespace, settings: Settings, source: SettingsSource | None = None
) -> int:
    checks = (source.checks() if source else []) + await run_checks(
        settings, [args.workspace.resolve()]
    )
    if args.json:
        print(json.dumps(report(checks)))
    else:
        s = Style.for_stream(sys.stdout)
        for check in checks:
            # Names and details quote the endpoint and MCP servers: no control character passes.
            print(
                f"{s.ok() if check.ok else s.bad()} {s.bold(for_terminal(check.name))}: "
                f"{for_terminal(check.detail)}"
            )
    return 0 if all(c.ok for c in checks) else 1
