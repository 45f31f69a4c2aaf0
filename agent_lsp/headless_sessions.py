"""`agent-lsp sessions delete ID… | --older-than 30d` (Decision 46): exit 0, or 2 for an unknown
id or a bad age (then nothing is deleted)."""

from __future__ import annotations

import argparse
import re
import sys

from agent_lsp.agent.display import for_terminal
from agent_lsp.agent.sessions import SessionStore
from agent_lsp.settings import state_dir

EXIT_USAGE = 2
UNITS = {"d": 86400, "h": 3600}


def parse_age(text: str) -> float | None:
    """Seconds in `30d` / `12h` (a whole or decimal number and a unit); None if it is not one."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dh])\s*", text)
    return float(match.group(1)) * UNITS[match.group(2)] if match else None


def delete_sessions(args: argparse.Namespace) -> int:
    store = SessionStore(state_dir(), args.workspace.resolve())
    if bool(args.ids) == bool(args.older_than):
        print("agent-lsp sessions delete: give session ids or --older-than AGE (e.g. 30d, 12h), not both", file=sys.stderr)
        return EXIT_USAGE
    if args.older_than:
        seconds = parse_age(args.older_than)
        if seconds is None:
            print(f"agent-lsp sessions delete: --older-than {for_terminal(args.older_than)!r} is not an age: "
                  "a number and d (days) or h (hours), e.g. 30d", file=sys.stderr)
            return EXIT_USAGE
        ids = store.older_than(seconds)
    else:
        ids = list(dict.fromkeys(args.ids))
        unknown = [i for i in ids if not store.exists(i)]
        if unknown:  # checked first: a typo deletes nothing
            print(f"agent-lsp sessions delete: no such session in {for_terminal(str(store.root))}: "
                  f"{for_terminal(', '.join(unknown))} (see `agent-lsp sessions`); nothing was deleted", file=sys.stderr)
            return EXIT_USAGE
    for session_id in ids:
        if store.remove(session_id):
            print(f"deleted {for_terminal(session_id)}")
    if not ids:
        print("no session to delete")
    return 0
