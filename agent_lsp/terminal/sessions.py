"""`agent-lsp sessions`: this workspace's sessions and their runs, newest first (or as JSON);
`agent-lsp sessions delete ID… | --older-than 30d` (Decision 46): exit 0, or 2 for an unknown
or ambiguous id or a bad age (then nothing is deleted). An ID may be a unique prefix."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, TextIO

from agent_lsp.agent.display import for_terminal
from agent_lsp.agent.state.sessions import InvalidSessionId, SessionStore, check_session_id
from agent_lsp.settings import state_dir
from agent_lsp.terminal.ids import Ambiguous, expand_prefix
from agent_lsp.terminal.style import Style

EXIT_USAGE = 2
UNITS = {"d": 86400, "h": 3600}


def sessions_cli(args: argparse.Namespace) -> int:
    if args.action == "delete":
        return delete_sessions(args)
    items = SessionStore(state_dir(), args.workspace.resolve()).list()
    if args.json:
        print(json.dumps(items))
    else:
        print_sessions(items, sys.stdout)
    return 0


def print_sessions(items: list[dict[str, Any]], out: TextIO) -> None:
    s = Style.for_stream(out)
    if not items:
        out.write("no sessions in this workspace yet\n")
        return
    for item in items:
        # Every field comes from an index file in the state dir: shown, never obeyed.
        stop = for_terminal(str(item["lastStop"] or "running"))
        title = for_terminal(" ".join(str(item["title"]).split()))
        runs = int(item["runs"])
        out.write(
            f"{s.bold(for_terminal(str(item['sessionId'])))}  "
            f"{for_terminal(str(item['updated']))}  "
            f"{runs} run{'' if runs == 1 else 's'}, last: {stop}\n    {title}\n"
        )
        for run in item.get("runList", []):  # the ids `agent-lsp rewind` takes
            files = len(run.get("editedFiles") or [])
            edited = f", edited {files} file{'' if files == 1 else 's'}" if files else ""
            out.write(
                s.dim(
                    for_terminal(
                        f"    run {run['runId']}  {run['started']}  "
                        f"{run['stopReason'] or 'running'}{edited}"
                    )
                )
                + "\n"
            )


def parse_age(text: str) -> float | None:
    """Seconds in `30d` / `12h` (a whole or decimal number and a unit); None if it is not one."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dh])\s*", text)
    return float(match.group(1)) * UNITS[match.group(2)] if match else None


def delete_sessions(args: argparse.Namespace) -> int:
    store = SessionStore(state_dir(), args.workspace.resolve())
    if bool(args.ids) == bool(args.older_than):
        print(
            "agent-lsp sessions delete: "
            "give session ids or --older-than AGE (e.g. 30d, 12h), not both",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.older_than:
        seconds = parse_age(args.older_than)
        if seconds is None:
            print(
                f"agent-lsp sessions delete: --older-than {for_terminal(args.older_than)!r} "
                "is not an age: "
                "a number and d (days) or h (hours), e.g. 30d",
                file=sys.stderr,
            )
            return EXIT_USAGE
        ids = store.older_than(seconds)
    else:
        for session_id in args.ids:  # an id, or a unique prefix of one: the same characters
            try:
                check_session_id(session_id)
            except InvalidSessionId as exc:
                print(f"agent-lsp sessions delete: {for_terminal(str(exc))}", file=sys.stderr)
                return EXIT_USAGE
        known = store.ids()
        try:  # a unique prefix names its session, as `rewind` takes a run's (Decision 46)
            ids = list(dict.fromkeys(expand_prefix(i, known, "session") for i in args.ids))
        except Ambiguous as exc:
            print(
                f"agent-lsp sessions delete: {for_terminal(str(exc))}; nothing was deleted",
                file=sys.stderr,
            )
            return EXIT_USAGE
        unknown = [i for i in ids if not store.exists(i)]
        if unknown:  # checked first: a typo deletes nothing
            print(
                f"agent-lsp sessions delete: no such session in {for_terminal(str(store.root))}: "
                f"{for_terminal(', '.join(unknown))} (see `agent-lsp sessions`); "
                "nothing was deleted",
                file=sys.stderr,
            )
            return EXIT_USAGE
    for session_id in ids:
        if store.remove(session_id):
            print(f"deleted {for_terminal(session_id)}")
    if not ids:
        print("no session to delete")
    return 0
