"""The run's code-intel sources, asked in order (Decision 39): the first that handles the file,
an empty or null answer falling through only to a next source that handles it too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.ports import CodeIntelSource


@dataclass
class CodeIntel:
    """What the code-intel tools ask: the sources, and the session's grant that makes a file
    outside the workspace (a library's source a result named) readable by read_file."""

    sources: list[CodeIntelSource]
    allow_read: Callable[[Path], None] = field(default=lambda path: None)

    def sources_for(self, path: Path) -> list[CodeIntelSource]:
        return [s for s in self.sources if _handles(s, path)]


def _handles(source: CodeIntelSource, path: Path) -> bool:
    try:
        return bool(source.handles(path))
    except Exception:
        return False
