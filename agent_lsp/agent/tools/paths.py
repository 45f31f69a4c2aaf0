"""Confinement: every path a tool gets is normalised, resolved and kept inside the workspace
folders. Folders after the first are addressed by their name: `<folder>/<path>`."""

from __future__ import annotations

import os
import re
from collections.abc import Container
from pathlib import Path

from agent_lsp.agent.fs.uris import path_of_uri as path_of_uri  # the tools' name for it

_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
MAX_PATH = 1024


class PathRefused(Exception):
    """A path the agent may not use; the message is for the model."""


def folder_names(roots: list[Path], names: list[str] | None = None) -> list[str]:
    """Each folder's name (the editor's, else its directory name); a name two folders share
    falls back to the directory name, and a still-clashing one gets a number."""
    wanted = [
        (names[i] if names and i < len(names) and names[i] else root.name) or str(i)
        for i, root in enumerate(roots)
    ]
    out: list[str] = []
    for index, name in enumerate(wanted):
        if wanted.count(name) > 1:
            name = roots[index].name or name
        base, n = name, 2
        while name in out:
            name, n = f"{base}-{n}", n + 1
        out.append(name.replace("/", "_"))
    return out


def in_git_dir(path: Path, roots: list[Path]) -> bool:
    """True for `.git` itself or anything under a `.git` folder of any repository (nested ones
    too), any letter case, counted from the workspace folder holding path (Decision 62)."""
    base = max(
        (r for r in roots if path == r or path.is_relative_to(r)),
        key=lambda r: len(r.parts),
        default=None,
    )
    parts = path.relative_to(base).parts if base is not None else path.parts
    return any(part.lower() == ".git" for part in parts)


class PathGuard:
    def __init__(
        self,
        roots: list[Path],
        names: list[str] | None = None,
        *,
        extra_readable: Container[Path] = frozenset(),
    ):
        if not roots:
            raise ValueError("a workspace needs at least one folder")
        self.roots = [Path(r).resolve() for r in roots]
        self.labels = folder_names(self.roots, names)
        # Readable outside the folders (the session's spill files); the guard only looks.
        self.extra_readable = extra_readable

    def names(self) -> list[str]:
        """How the roots are shown: the first by its path, the others by their names."""
        return [
            str(self.roots[0]),
            *(
                f"{label} ({root})"
                for label, root in zip(self.labels[1:], self.roots[1:], strict=False)
            ),
        ]

    def resolve(self, raw: object, *, for_read: bool = False) -> Path:
        if not isinstance(raw, str) or not raw.strip():
            raise PathRefused("a path must be a non-empty string")
        text = raw.strip()
        if "\x00" in text:
            raise PathRefused("a path may not contain a NUL byte")
        if len(text) > MAX_PATH:
            raise PathRefused(f"path too long ({len(text)} characters)")
        if text.startswith("file://"):
            text = str(path_of_uri(text))
        elif _PERCENT.search(text):
            raise PathRefused(f"percent-encoded path {raw!r} refused: give the plain file name")
        if text.startswith("~"):
            raise PathRefused(
                f"{raw!r}: `~` is outside the workspace; use a path relative to the workspace"
            )
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self._under_root(candidate)
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # name too long, symlink loop
            raise PathRefused(f"{raw!r}: {exc}") from None
        if for_read and resolved in self.extra_readable:
            return resolved
        if self.root_of(resolved) is None:
            raise PathRefused(
                f"{raw!r} is outside the workspace folders "
                f"({', '.join(map(str, self.roots))}); refused"
            )
        return resolved

    def in_git_dir(self, path: Path) -> bool:
        return in_git_dir(path, self.roots)

    def given(self, raw: str) -> Path:
        """The path as the model gave it, made absolute and normalised but not resolved (a
        symlink keeps its own name): path rules test it beside the resolved one."""
        text = raw.strip()
        if text.startswith("file://"):
            text = str(path_of_uri(text))
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self._under_root(candidate)
        return Path(os.path.normpath(candidate))

    def locate(self, raw: object) -> Path | None:
        """The file a path or a `file:` URI names, resolved as a tool resolves it; None when a
        tool would refuse it."""
        try:
            return self.resolve(raw)
        except (PathRefused, ValueError):
            return None

    def display_uri(self, uri: str) -> str:
        """How the model sees the file a client's URI names: display() of the file the tools
        would reach (the URI's path resolved, so a workspace opened through a symlink is still
        the workspace); a path the tools refuse stays absolute, another scheme stays the URI."""
        path = path_of_uri(uri)
        if path is None:
            return uri
        return self.display(self.locate(uri) or path)

    def _under_root(self, relative: Path) -> Path:
        # Other folders by their name as prefix; everything else is in the first one.
        parts = relative.parts
        if parts and len(self.roots) > 1:
            for label, root in zip(self.labels[1:], self.roots[1:], strict=False):
                if parts[0] == label:
                    return root.joinpath(*parts[1:])
        return self.roots[0] / relative

    def root_of(self, path: Path) -> Path | None:
        """The workspace folder holding path (the deepest, for nested folders)."""
        best = None
        for root in self.roots:
            if (path == root or path.is_relative_to(root)) and (
                best is None or len(root.parts) > len(best.parts)
            ):
                best = root
        return best

    def display(self, path: Path) -> str:
        """How the model and the user see a path: relative to its workspace folder, prefixed
        with the folder's name for folders after the first."""
        root = self.root_of(path)
        if root is None:
            return str(path)
        index = self.roots.index(root)
        rel = path.relative_to(root).as_posix()
        if index == 0:
            return rel or "."
        return f"{self.labels[index]}/{rel}" if rel and rel != "." else self.labels[index]
