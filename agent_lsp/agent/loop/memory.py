"""Memory recall: project conventions from AGENTS.md and friends, few and exact. A memory file
found in a workspace folder must resolve inside that folder and be a regular file: a link to
~/.ssh/id_rsa never reaches the system prompt."""

from __future__ import annotations

import logging
from pathlib import Path

import aiofiles

from agent_lsp.agent.fs.safeio import NotReadable, open_regular

log = logging.getLogger(__name__)

MAX_MEMORY_CHARS = 8000


async def recall_memory(roots: list[Path], names: list[str]) -> list[tuple[str, str]]:
    """(label, text) of each memory file present, in settings order, each capped. Absolute
    names come from the user's own settings only (memoryFiles is a trusted key)."""
    found: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for name in names:
        given = Path(name).expanduser()
        candidates = (
            [(given, None)] if given.is_absolute() else [(root / name, root) for root in roots]
        )
        for path, root in candidates:
            try:
                resolved = path.resolve()
            except (OSError, RuntimeError):
                continue
            if resolved in seen or not resolved.exists():
                continue
            if root is not None and not resolved.is_relative_to(root.resolve()):
                log.warning(
                    "memory file %s resolves outside its workspace folder (%s): not recalled",
                    path,
                    resolved,
                )
                continue
            try:
                text = await _head(resolved)
            except NotReadable as exc:
                log.warning("memory file %s not recalled: %s", path, exc)
                continue
            seen.add(resolved)
            if len(text) > MAX_MEMORY_CHARS:
                text = text[:MAX_MEMORY_CHARS] + "\n[memory file truncated]"
            found.append((str(path), text.strip()))
    return found


async def _head(path: Path) -> str:
    """The start of a memory file (it is capped anyway); a regular file only."""
    fd, _ = open_regular(path, max_bytes=1 << 62)
    async with aiofiles.open(fd, "rb") as handle:
        data: bytes = await handle.read(4 * MAX_MEMORY_CHARS)
    return data.decode("utf-8", errors="replace")
