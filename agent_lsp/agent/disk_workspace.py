"""A Workspace on plain files, for the headless runner and tests: reads and writes disk."""

from __future__ import annotations

import os
from pathlib import Path

import aiofiles

from agent_lsp.agent.ports import Document, EditOutcome

MAX_READ_BYTES = 10_000_000


async def read_disk_text(path: Path) -> str:
    """UTF-8 text of a file; ToolError-friendly ValueError for binary or huge files."""
    size = path.stat().st_size
    if size > MAX_READ_BYTES:
        raise ValueError(f"{path.name} is too large to read as text ({size} bytes)")
    async with aiofiles.open(path, "rb") as handle:
        data = await handle.read()
    if b"\x00" in data[:8192]:
        raise ValueError(f"{path.name} is a binary file ({len(data)} bytes); not shown")
    return data.decode("utf-8", errors="replace")


async def read_disk_document(path: Path) -> Document:
    """The file's text as a Document; ValueError with a message for the model."""
    try:
        return Document(path, await read_disk_text(path))
    except FileNotFoundError:
        raise ValueError(f"{path.name} does not exist") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path.name}: {exc.strerror}") from None


class DiskWorkspace:
    def __init__(self, roots: list[Path]):
        self.roots = [Path(r).resolve() for r in roots]
        self.written: list[Path] = []

    async def read(self, path: Path) -> Document:
        return await read_disk_document(path)

    async def apply(self, path: Path, before: Document | None, after: str) -> EditOutcome:
        try:
            current = await read_disk_text(path) if path.exists() else None
        except (OSError, ValueError) as exc:
            return EditOutcome(False, str(exc))
        if (before.text if before else None) != current:
            return EditOutcome(False, "the file changed on disk since it was read")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.agent-lsp.tmp")
            async with aiofiles.open(tmp, "w", encoding="utf-8", newline="") as handle:
                await handle.write(after)
            os.replace(tmp, path)
        except OSError as exc:
            return EditOutcome(False, f"cannot write: {exc.strerror}")
        self.written.append(path)
        return EditOutcome(True)

    def open_texts(self) -> dict[Path, str]:
        return {}

    def unsaved(self) -> list[Path]:
        return []
