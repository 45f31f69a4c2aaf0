"""The context side paths: result truncation with spill, and token estimates."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiofiles

from agent_lsp.agent.safeio import open_private

CHARS_PER_TOKEN = 4.0


@dataclass
class Truncated:
    content: str
    truncated: bool
    spill_path: Path | None


async def truncate_tool_output(text: str, limit: int, spill_dir: Path, call_id: str,
                               redact: Callable[[str], str] = lambda s: s) -> Truncated:
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
        where = f"The whole result ({len(text)} characters, {text.count(chr(10)) + 1} lines) is saved at {spill}; read_file it with offset/limit to see the rest."
    except OSError as exc:
        spill, where = None, f"(the whole result could not be saved: {exc.strerror})"
    head = text[: int(limit * 0.6)]
    tail = text[len(text) - int(limit * 0.3) :]
    omitted = len(text) - len(head) - len(tail)
    return Truncated(f"{head}\n\n[... {omitted} characters omitted. {where} ...]\n\n{tail}", True, spill)


class TokenEstimator:
    """Characters / 4, calibrated by the prompt tokens the API reports. Message sizes are
    cached (messages are never changed once in the history), so a turn costs O(new messages)."""

    def __init__(self) -> None:
        self.ratio = 1.0
        self._sizes: dict[int, tuple[Any, int]] = {}

    def _size(self, message: Any) -> int:
        hit = self._sizes.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        size = len(json.dumps(message, ensure_ascii=False))
        self._sizes[id(message)] = (message, size)
        return size

    def raw(self, payload: Any, extra_chars: int = 0) -> float:
        if isinstance(payload, list):
            if len(self._sizes) > 2 * len(payload) + 256:  # forget messages compaction dropped
                self._sizes = {id(m): self._sizes[id(m)] for m in payload if id(m) in self._sizes}
            chars = sum(self._size(m) for m in payload)
        else:
            chars = len(json.dumps(payload, ensure_ascii=False))
        return (chars + extra_chars) / CHARS_PER_TOKEN

    def estimate(self, payload: Any, extra_chars: int = 0) -> int:
        return int(self.raw(payload, extra_chars) * self.ratio)

    def calibrate(self, payload: Any, prompt_tokens: int, extra_chars: int = 0) -> None:
        raw = self.raw(payload, extra_chars)
        if raw > 200 and prompt_tokens > 0:
            self.ratio = min(4.0, max(0.25, prompt_tokens / raw))
