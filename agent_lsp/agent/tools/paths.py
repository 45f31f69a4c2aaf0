"""Confinement: every path a tool gets is normalised, resolved and kept inside the workspace."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
MAX_PATH = 1024


class PathRefused(Exception):
    """A path the agent may not use; the message is for the model."""


class PathGuard:
    def __init__(self, roots: list[Path]):
        if not roots:
            raise ValueError("a workspace needs at least one folder")
        self.roots = [Path(r).resolve() for r in roots]
        self.extra_readable: set[Path] = set()  # spill files of this session

    def resolve(self, raw: object, *, for_read: bool = False) -> Path:
        if not isinstance(raw, str) or not raw.strip():
            raise PathRefused("a path must be a non-empty string")
        text = raw.strip()
        if "\x00" in text:
            raise PathRefused("a path may not contain a NUL byte")
        if len(text) > MAX_PATH:
            raise PathRefused(f"path too long ({len(text)} characters)")
        if text.startswith("file://"):
            text = unquote(urlparse(text).path)
        elif _PERCENT.search(text):
            raise PathRefused(f"percent-encoded path {raw!r} refused: give the plain file name")
        if text.startswith("~"):
            raise PathRefused(f"{raw!r}: `~` is outside the workspace; use a path relative to the workspace")
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self._root_for(candidate) / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # name too long, symlink loop
            raise PathRefused(f"{raw!r}: {exc}") from None
        if for_read and resolved in self.extra_readable:
            return resolved
        if not any(resolved == root or resolved.is_relative_to(root) for root in self.roots):
            raise PathRefused(f"{raw!r} is outside the workspace folders ({', '.join(map(str, self.roots))}); refused")
        return resolved

    def _root_for(self, relative: Path) -> Path:
        # Other folders by their folder name as prefix; everything else is in the first one.
        parts = relative.parts
        if parts:
            for root in self.roots[1:]:
                if parts[0] == root.name:
                    return root.parent
        return self.roots[0]

    def display(self, path: Path) -> str:
        """How the model and the user see a path: relative to its workspace folder."""
        for index, root in enumerate(self.roots):
            if path == root or path.is_relative_to(root):
                rel = path.relative_to(root).as_posix() or "."
                return rel if index == 0 else f"{root.name}/{rel}"
        return str(path)
