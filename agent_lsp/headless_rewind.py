"""`agent-lsp rewind RUN_ID`: a run's files put back on disk, as they were before it (exit 0
restored without conflicts, 4 with conflicts, 2 for an unknown run)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent_lsp.agent.disk_workspace import DiskWorkspace
from agent_lsp.agent.display import for_terminal
from agent_lsp.agent.host import AgentHost
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.terminal import Style

EXIT_CONFLICTS = 4
EXIT_USAGE = 2


async def rewind_cli(args: argparse.Namespace) -> int:
    roots = [args.workspace.resolve()]
    host = AgentHost()
    try:
        result = await host.rewind(roots, DiskWorkspace(roots), args.run_id, force=args.force, include_later=args.include_later)
    except ValueError as exc:
        print(f"agent-lsp rewind: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        await host.aclose()
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        s = Style.for_stream(sys.stdout)
        paths = PathGuard(roots)

        def shown(path: Path) -> str:  # a file name the model chose may hold an escape sequence
            return for_terminal(paths.display(path))

        for path in result.restored:
            print(f"{s.ok()} restored {shown(path)}")
        for path, reason in result.conflicts:
            print(f"{s.bad()} conflict {shown(path)}: {for_terminal(reason)}")
        for path, reason in result.not_restorable:
            print(f"{s.bad()} not restorable {shown(path)}: {for_terminal(reason)}")
        print(s.dim(f"rewind {result.rewind_id} (undo it with `agent-lsp rewind {result.rewind_id}`)"))
    return EXIT_CONFLICTS if result.conflicts else 0
