"""Which debug sources exist here: debugpy in agent-lsp's own environment (its adapter is started
by path, so the debugged interpreter need not have it installed)."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from pathlib import Path


@functools.cache
def debugpy_dir() -> Path | None:
    """The debugpy package folder, or None when it is not installed (no import: it is heavy)."""
    try:
        spec = importlib.util.find_spec("debugpy")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def debugpy_version() -> str | None:
    try:
        return importlib.metadata.version("debugpy")
    except importlib.metadata.PackageNotFoundError:
        return None
