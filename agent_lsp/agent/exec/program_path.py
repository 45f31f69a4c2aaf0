"""Where agent-lsp finds the programs it starts itself (git, rg, bwrap, the hook shell, language
and MCP servers, the commands it runs): on PATH, but only in its absolute entries (Decision 62).

An empty entry (`::`, a leading or trailing `:`), `.` or any relative entry means "the current
folder" to execvp and to `shutil.which`, and the current folder of a child is the workspace: a
repository's own `./git` or `./ty` would then run with no one asking. Standard library only: the
reaper (run with `python -I -S`) imports this file by its path.
"""

from __future__ import annotations

import os
import shutil


def safe_entries(path: str | None = None) -> list[str]:
    """PATH's absolute entries, in order (PATH from the environment when `path` is None)."""
    if path is None:
        path = os.environ.get("PATH", os.defpath)
    return [entry for entry in path.split(os.pathsep) if entry and os.path.isabs(entry)]


def safe_path(path: str | None = None) -> str:
    """PATH without its empty, `.` and relative entries: for the environment of agent-lsp's own
    helpers (git), which may look programs up again."""
    return os.pathsep.join(safe_entries(path))


def find_program(name: str, path: str | None = None) -> str | None:
    """The absolute path of `name` found in PATH's absolute entries, or None. A name holding a
    slash is a path someone wrote on purpose (a setting, `./tool`): returned as it is when it is
    executable."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    found = shutil.which(name, path=safe_path(path))
    return os.path.abspath(found) if found is not None else None
