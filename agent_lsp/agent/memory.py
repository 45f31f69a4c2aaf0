"""Memory recall: project conventions from AGENTS.md and friends, few and exact."""

from __future__ import annotations

from pathlib import Path

import aiofiles

MAX_MEMORY_CHARS = 8000


async def recall_memory(roots: list[Path], names: list[str]) -> list[tuple[str, str]]:
    """(label, text) of each memory file present, in settings order, each capped."""
    found: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for name in names:
        candidates = [Path(name).expanduser()] if Path(name).expanduser().is_absolute() else [r / name for r in roots]
        for path in candidates:
            try:
                resolved = path.resolve()
                if resolved in seen or not resolved.is_file():
                    continue
                async with aiofiles.open(resolved, encoding="utf-8", errors="replace") as handle:
                    text = await handle.read(MAX_MEMORY_CHARS + 1)
            except OSError:
                continue
            seen.add(resolved)
            if len(text) > MAX_MEMORY_CHARS:
                text = text[:MAX_MEMORY_CHARS] + "\n[memory file truncated]"
            found.append((str(path), text.strip()))
    return found
