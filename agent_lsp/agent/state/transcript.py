"""One JSONL transcript per run: every request (new messages only), reply, call, approval,
result, compaction and the stop. Secrets are redacted at write time."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import aiofiles

from agent_lsp.agent.fs.safeio import open_private
from agent_lsp.agent.wellformed import wellformed

log = logging.getLogger(__name__)


REDACTED = "[redacted]"


class Redactor:
    """Replaces every secret (the model's API key) with `[redacted]`, in strings and in any
    structure of them; what it gives is also well-formed (a lone surrogate, which no UTF-8
    writer can encode, becomes U+FFFD): it stands before every writer of a run."""

    def __init__(self, secrets: list[str]):
        self.secrets = [s for s in secrets if s and len(s) >= 6]

    def __call__(self, text: str) -> str:
        text = wellformed(text)
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def overwrites_secret(self, diff: str | None, new_text: str | None) -> bool:
        """An edit that would write `[redacted]` where the file held the key: the model saw the
        key only as `[redacted]` and is writing that back (the user's key would be lost)."""
        if not diff or not new_text or REDACTED not in new_text:
            return False
        removed = (
            line
            for line in diff.splitlines()
            if line.startswith("-") and not line.startswith("---")
        )
        return any(secret in line for line in removed for secret in self.secrets)

    def value(self, value: Any) -> Any:
        """`value` with every string inside it (dicts, lists) redacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def held_back(self, text: str) -> int:
        """How many trailing characters of a stream could be the start of a secret (and so
        must wait for the next delta before they are shown)."""
        for size in range(min(len(text), max(map(len, self.secrets), default=1) - 1), 0, -1):
            if any(secret.startswith(text[-size:]) for secret in self.secrets):
                return size
        return 0


class Transcript:
    """Records are queued in order and written by one writer task, all those queued meanwhile
    in one write (one thread hop): `write` never waits for the disk. A hop per record put the
    run behind everything else on a busy event loop each time (20 runs in one server). A hook,
    which may read the file, first waits for `flush()`."""

    def __init__(self, path: Path, run_id: str, redact: Redactor):
        self.path = path
        self.run_id = run_id
        self.redact = redact
        self._handle: Any = None
        self._failed = False
        self._pending: list[str] = []
        self._writer: asyncio.Task[None] | None = None
        self._closed = False  # its stop record is the last: nothing is written after close()

    async def write(self, agent_id: str, turn: int, type: str, **fields: Any) -> None:
        self.put(agent_id, turn, type, **fields)

    def put(self, agent_id: str, turn: int, type: str, **fields: Any) -> None:
        """`write` for a caller that cannot await (an event sink): queued the same way, in
        order with every other record."""
        if self._failed or self._closed:
            return
        record = {
            "ts": round(time.time(), 3),
            "runId": self.run_id,
            "agentId": agent_id,
            "turn": turn,
            "type": type,
            **fields,
        }
        self._pending.append(self.redact(json.dumps(record, ensure_ascii=False, default=str)))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending and not self._failed:
            batch = "\n".join(self._pending) + "\n"
            self._pending.clear()
            try:
                if self._handle is None:
                    fd = open_private(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                    # line-buffered: each batch reaches the file inside its own write
                    self._handle = await aiofiles.open(fd, "a", encoding="utf-8", buffering=1)
                await self._handle.write(batch)
            except OSError as exc:  # a transcript problem must never stop the run
                self._failed = True
                log.warning("transcript %s disabled: %s", self.path, exc)

    async def flush(self) -> None:
        """Every record written so far is in the file (a cancel of the caller leaves the
        writer going)."""
        writer = self._writer
        if writer is not None and not writer.done():
            await asyncio.shield(writer)

    async def close(self) -> None:
        self._closed = True
        await self.flush()
        if self._handle is not None:
            try:
                await self._handle.close()
            except OSError:
                pass
            self._handle = None
