"""The ignore-rule walk of a folder when rg cannot run (list_files' fallback) and for snapshots
outside git: nested .gitignore/.ignore files with negations, .git/info/exclude, no .git/ and no
symlinks, in rg's order."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agent_lsp.agent.fs import ripgrep

if TYPE_CHECKING:  # imported by the walk itself: not on the start-up path (issue 33)
    import pathspec


def fallback_walk(base: Path, glob: str | None) -> list[str]:
    """list_files when rg cannot run: .gitignore and .ignore files (nested, negations, those of
    the parent folders too), .git/info/exclude; hidden files included; .git/ and symlinks
    skipped, as with rg. Sorted in rg's path order. (No global excludes file; the ignore files
    are the repository's own patterns, read with pathspec as before ripgrep.)"""
    import pathspec

    specs: dict[str, pathspec.GitIgnoreSpec] = {}  # folder -> its ignore rules

    def add(directory: str) -> None:
        lines: list[str] = []
        for name in (".gitignore", ".ignore", os.path.join(".git", "info", "exclude")):
            try:
                with open(
                    os.path.join(directory, name), encoding="utf-8", errors="replace"
                ) as handle:
                    lines += handle.read().splitlines()
            except OSError:
                pass
        if lines:
            specs[directory] = pathspec.GitIgnoreSpec.from_lines(lines)

    def ignored(path: str, is_dir: bool) -> bool:
        chain = []  # the folders above path that have rules, innermost first
        directory, parent = path, os.path.dirname(path)
        while parent != directory:
            directory, parent = parent, os.path.dirname(parent)
            if directory in specs:
                chain.append(directory)
        verdict = False
        for directory in reversed(chain):  # outer first: a nested file's rules win
            rel = os.path.relpath(path, directory).replace(os.sep, "/") + ("/" if is_dir else "")
            result = specs[directory].check_file(rel)
            if result.include is not None:
                verdict = result.include
        return verdict

    top = str(base)
    for parent in reversed(base.parents):
        add(str(parent))
    add(top)
    wanted = _fallback_glob(glob) if glob else None
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath != top:
            add(dirpath)
        keep = []
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if name != ".git" and not os.path.islink(full) and not ignored(full, True):
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            full = os.path.join(dirpath, name)
            if name == ".git" or os.path.islink(full) or ignored(full, False):
                continue
            if wanted is not None and not wanted(os.path.relpath(full, top).replace(os.sep, "/")):
                continue
            found.append(full)
    found.sort(key=ripgrep.sort_key)
    return found


def _fallback_glob(glob: str) -> Callable[[str], bool]:
    """The model's glob for the fallback walk, with fnmatch (whose translation cannot backtrack
    catastrophically, unlike pathspec's on a glob like '*a*a*a*a*a*a*a*b'): without a "/" it
    matches the file name, with one the path relative to the listed folder ("*" may then
    cross "/", a little looser than rg); a leading "!" excludes."""
    negated = glob.startswith("!")
    pattern = glob.removeprefix("!").removeprefix("/")
    by_name = "/" not in pattern

    def matches(rel: str) -> bool:
        found = fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1] if by_name else rel, pattern)
        return found != negated

    return matches
