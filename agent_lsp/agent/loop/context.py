"""The context side paths: result truncation with spill, and token estimates."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiofiles

from agent_lsp.agent.fs.safeio import open_private


@dataclass
class Truncated:
    content: str
    truncated: bool
    spill_path: Path | None


async def truncate_tool_output(
    text: str, limit: int, spill_dir: Path, call_id: str, redact: Callable[[str], str] = lambda s: s
) -> Truncated:
    """Keep head + tail within `limit` characters; the whole text goes to a private spill file
    (secrets redacted) whose path the model gets."""
    if len(text) <= limit:
        return Truncated(text, False, None)
    safe_id = "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)[:80] or "call"
    spill: Path | None = spill_dir / f"{safe_id}.txt"
    assert spill is not None
    try:
        # O_NONBLOCK: a FIFO planted at the spill's path fails at once instead of blocking the
        # event loop until a reader comes; anything but a regular file is refused (Decision 45).
        fd = open_private(spill, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "the spill path is not a regular file")
        async with aiofiles.open(fd, "w", encoding="utf-8") as handle:
            await handle.write(redact(text))
        where = (
            f"The whole result ({len(text)} characters, {text.count(chr(10)) + 1} lines) "
            f"is saved at {spill}; read_file it with offset/limit to see the rest."
        )
    except OSError as exc:
        spill, where = None, f"(the whole result could not be saved: {exc.strerror})"
    head = text[: int(limit * 0.6)]
    tail = text[len(text) - int(limit * 0.3) :]
    omitted = len(text) - len(head) - len(tail)
    return Truncated(
        f"{head}\n\n[... {omitted} characters omitted. {where} ...]\n\n{tail}", True, spill
    )
