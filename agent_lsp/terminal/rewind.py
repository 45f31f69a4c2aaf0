"""`agent-lsp rewind RUN_ID`: a run's files put back on disk, as they were before it (exit 0
restored without conflicts, 4 with conflicts, 2 for an unknown or ambiguous run). RUN_ID may be
a unique prefix of at least 4 characters (Decision 46)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from agent_lsp.agent.display import for_terminal
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost
from agent_lsp.agent.state.checkpoints import CheckpointStore
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.frontend import shut_down, user_settings
from agent_lsp.terminal.ids import expand_prefix
from agent_lsp.terminal.style import Style

EXIT_CONFLICTS = 4
EXIT_USAGE = 2
FORCE, INCLUDE_LATER = "--force", "--include-later"  # the hints name this command's own flags


def resolve_run_id(store: CheckpointStore, given: str) -> str:
    """The whole id of the run (or rewind) that `given` names (a unique prefix works)."""
    return expand_prefix(given, (m.run_id for m in store.summaries()), "run")


async def rewind_cli(args: argparse.Namespace) -> int:
    roots = [args.workspace.resolve()]
    host = AgentHost()
    try:
        run_id = await asyncio.to_thread(resolve_run_id, host.checkpoint_store(roots), args.run_id)
        # for the transcript dir: the rewind's record goes with the runs'
        settings = user_settings(log_problems=False)[0]
        result = await host.rewind(
            roots,
            DiskWorkspace(roots),
            run_id,
            force=args.force,
            include_later=args.include_later,
            settings=settings,
        )
    except (ValueError, OSError) as exc:
        print(f"agent-lsp rewind: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        await shut_down(host, deadline=None)
    if args.json:
        print(json.dumps(result.to_dict(force=FORCE, include_later=INCLUDE_LATER)))
    else:
        s = Style.for_stream(sys.stdout)
        paths = PathGuard(roots)

        def shown(path: Path) -> str:  # a file name the model chose may hold an escape sequence
            return for_terminal(paths.display(path))

        for path in result.restored:
            print(f"{s.ok()} restored {shown(path)}")
        for path, reason in result.conflicts:
            hint = result.conflict_hint(path, FORCE, INCLUDE_LATER)
            print(f"{s.bad()} conflict {shown(path)}: {for_terminal(reason)}; {hint}")
        for path, reason in result.not_restorable:
            print(f"{s.bad()} not restorable {shown(path)}: {for_terminal(reason)}")
        if result.restored:  # only then is there something to undo
            print(
                s.dim(
                    f"rewind {result.rewind_id} "
                    f"(undo it with `agent-lsp rewind {result.rewind_id}`)"
                )
            )
        else:
            print(s.dim("nothing was restored"))
    return EXIT_CONFLICTS if result.conflicts else 0
