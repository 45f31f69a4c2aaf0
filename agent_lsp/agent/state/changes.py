"""The one record of the files a run changed. Its run's record (RunRecord) owns it: the tools
write into it (as `ctx.changes`), and the report's editedFiles, the session index's `edited`,
the session's edited files and compaction's "Files changed so far" are all read from it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.fs.uris import path_of_uri


@dataclass
class RunChanges:
    """The files one run changed, in the order it first changed them."""

    files: dict[Path, None] = field(default_factory=dict)
    # every change told, a file changed again included (the last edit, Decision 84)
    touched: int = field(default=0, compare=False)

    def add(self, path: Path) -> None:
        self.files.setdefault(path, None)
        self.touched += 1

    def __iter__(self) -> Iterator[Path]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def uris(self) -> list[str]:
        """As the wire and the session index spell them (the report's editedFiles)."""
        return [path.as_uri() for path in self.files]

    @classmethod
    def of(cls, paths: Iterable[Path]) -> RunChanges:
        return cls(dict.fromkeys(paths))

    @classmethod
    def from_uris(cls, uris: Iterable[object]) -> RunChanges:
        """Read back from a session index: file URIs only (an index is a file on disk; anything
        else in it names no file the run changed)."""
        found = (path_of_uri(uri) for uri in uris if isinstance(uri, str))
        return cls.of(path for path in found if path is not None)
