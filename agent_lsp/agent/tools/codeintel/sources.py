"""The run's code-intel sources (CodeIntel, on the tools' context) and what is asked of each
before a request: whether it handles a file, its position encoding."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.ports import CodeIntelSource
from agent_lsp.agent.tools.errors import ToolError

log = logging.getLogger(__name__)


@dataclass
class CodeIntel:
    """What the code-intel tools ask: the sources, and the session's grant that makes a file
    outside the workspace (a library's source a result named) readable by read_file."""

    sources: list[CodeIntelSource]
    allow_read: Callable[[Path], None] = field(default=lambda path: None)

    def sources_for(self, path: Path) -> list[CodeIntelSource]:
        return [s for s in self.sources if handles(s, path)]


def handles(source: CodeIntelSource, path: Path) -> bool:
    try:
        return bool(source.handles(path))
    except Exception:
        log.warning("code-intel source %s failed to say what it handles", source.name)
        return False


def no_source(path: Path) -> ToolError:
    kind = f"{path.suffix} files" if path.suffix else f"{path.name}"
    return ToolError(f"no language server answers for {kind}; use search")


def encoding_of(source: CodeIntelSource, path: Path) -> str:
    try:
        enc = str(source.position_encoding(path)).lower()
    except Exception:
        return "utf-16"
    return enc if enc in ("utf-8", "utf-16", "utf-32") else "utf-16"


def caveat_of(source: CodeIntelSource, method: str, path: Path) -> str | None:
    """Why the source's last answer to `method` about `path` may be incomplete (a started
    server still reading the workspace after its wait), from the port's optional `caveat`."""
    caveat = getattr(source, "caveat", None)
    if caveat is None:
        return None
    try:
        note = caveat(method, path)
    except Exception:
        return None
    return str(note) if note else None


def with_notes(text: str, notes: list[str]) -> str:
    """A tool's text with the sources' caveats after it, each once."""
    return text + "".join(f"\n(note: {n})" for n in dict.fromkeys(notes))
