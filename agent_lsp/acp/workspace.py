"""The Workspace port over ACP: reads and writes through the client's `fs/read_text_file` and
`fs/write_text_file` when it offers them (the editor's buffers, the editor in control), else the
disk; rewinds put text back the same way (binary files and deletions on disk)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_lsp.acp.capabilities import FsCaps
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace, apply_each, read_disk_document
from agent_lsp.agent.fs.merge import applied_outcome, conflict_outcome, resolve
from agent_lsp.agent.ports import Document, EditOutcome, FileChange

log = logging.getLogger(__name__)

FS_TIMEOUT = 60.0  # an editor that does not answer a read or a write within this is a refusal


@dataclass
class Edit:
    """One applied edit, for the tool call's `diff` content."""

    path: Path
    old_text: str | None
    new_text: str


class AcpWorkspace:
    def __init__(self, client: Any, session_id: str, roots: list[Path], caps: FsCaps):
        self.client = client  # the SDK's AgentSideConnection
        self.session_id = session_id
        self.roots = roots
        self.names = None
        self.caps = caps
        self.disk = DiskWorkspace(roots)
        self.edits: dict[Path, Edit] = {}  # applied, not yet reported

    async def read(self, path: Path) -> Document:
        if not self.caps.read:
            return await read_disk_document(path)
        try:
            response = await asyncio.wait_for(
                self.client.read_text_file(session_id=self.session_id, path=str(path)), FS_TIMEOUT
            )
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a file the editor cannot show as text (binary, gone): as on disk
            log.debug("fs/read_text_file %s failed (%s): reading the disk", path, exc)
            return await read_disk_document(path)
        text = response.content
        return Document(path, text, exact="\x00" not in text)

    async def apply(self, path: Path, before: Document | None, after: str, **_: Any) -> EditOutcome:
        """Written as it comes (the client reviews an ACP session's edits in its own way: no
        preview here, so nothing is ever applied late)."""
        if not self.caps.write:
            outcome = await self.disk.apply(path, before, after)
        else:
            outcome = await self._write(path, before, after)
        if outcome.applied:
            landed = outcome.landed.get(path, after)  # merged with the user's changes meanwhile
            self.edits[path] = Edit(path, before.text if before is not None else None, landed)
        return outcome

    async def apply_all(
        self,
        changes: list[FileChange],
        *,
        label: str,
        **_: Any,  # no preview (see `apply`)
    ) -> EditOutcome:
        """Each file written as an edit is (ACP has no one change for several files); the tool
        call's result lists the files (no per-file diff content is kept for it)."""
        outcome = await apply_each(self, changes)
        for change in changes:
            self.edits.pop(change.path, None)
        return outcome

    async def _write(self, path: Path, before: Document | None, after: str) -> EditOutcome:
        """Through the editor: its buffer as it is now, merged with the edit when it changed
        since the read (a conflict writes nothing)."""
        try:
            current = (
                (await self.read(path)).text if path.exists() or path.is_symlink() else None
            )
        except ValueError as exc:
            return EditOutcome(False, str(exc))
        resolution = resolve(before.text if before is not None else None, current, after)
        if resolution.text is None:
            return conflict_outcome(path, resolution)
        try:
            await asyncio.wait_for(
                self.client.write_text_file(
                    session_id=self.session_id, path=str(path), content=resolution.text
                ),
                FS_TIMEOUT,
            )
        except TimeoutError:
            return EditOutcome(
                False, f"the editor did not answer fs/write_text_file within {FS_TIMEOUT:g} s"
            )
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a JSON-RPC error: the editor refused (read-only buffer, ...)
            return EditOutcome(False, f"the editor refused the write: {_message(exc)}")
        return applied_outcome(path, resolution)

    def take_edit(self, path: Path | None) -> Edit | None:
        return self.edits.pop(path, None) if path is not None else None

    async def restore(self, restores: list[Any]) -> Any:
        """A rewind: text goes back through the editor when it writes files; binary files and
        deletions (ACP has no delete) on disk."""
        from agent_lsp.agent.ports import RestoreOutcome

        outcome = RestoreOutcome()
        on_disk = []
        for item in restores:
            text = _text(item.content)
            if not self.caps.write or text is None:
                on_disk.append(item)
                continue
            try:
                await asyncio.wait_for(
                    self.client.write_text_file(
                        session_id=self.session_id, path=str(item.path), content=text
                    ),
                    FS_TIMEOUT,
                )
                outcome.restored.append(item.path)
            except (asyncio.CancelledError, KeyboardInterrupt):
                raise
            except Exception as exc:
                outcome.failed.append((item.path, f"the editor refused the write: {_message(exc)}"))
        if on_disk:
            more = await self.disk.restore(on_disk)
            outcome.restored += more.restored
            outcome.failed += more.failed
        return outcome

    def open_texts(self) -> dict[Path, str]:
        return {}  # ACP does not say which buffers are open: search sees the disk

    async def unsaved(self, paths: list[Path]) -> list[Path]:
        return []


def _text(content: bytes | None) -> str | None:
    """The content as text the editor can hold; None for a deletion or a binary file."""
    if content is None or b"\x00" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _message(exc: BaseException) -> str:
    data = getattr(exc, "data", None)
    details = data.get("details") if isinstance(data, dict) else None
    return f"{exc}" + (f" ({details})" if details else "")
