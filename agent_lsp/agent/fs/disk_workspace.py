"""A Workspace on plain files, for the headless runner and tests: reads and writes disk,
regular files only, edits as an atomic replace that keeps the file's mode and never follows a
planted link."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent_lsp.agent.fs.merge import applied_outcome, conflict_outcome, resolve
from agent_lsp.agent.fs.safeio import (
    MAX_READ_BYTES,
    NotReadable,
    confinement_problem,
    is_exact_text,
    looks_binary,
    read_regular,
    write_file_atomic,
)
from agent_lsp.agent.ports import Document, EditOutcome, FileChange


async def read_disk_text(path: Path, max_bytes: int = MAX_READ_BYTES) -> tuple[str, bool]:
    """(text, exact) of a regular file; NotReadable (a ValueError) for binary, huge or special
    files. `exact`: valid UTF-8 without NUL, so an edit round-trips every other byte."""
    data = await read_regular(path, max_bytes)
    if looks_binary(data):
        raise NotReadable(f"{path.name} is a binary file ({len(data)} bytes); not shown")
    return data.decode("utf-8", errors="replace"), is_exact_text(data)


async def read_disk_document(path: Path) -> Document:
    """The file's text as a Document; ValueError with a message for the model."""
    text, exact = await read_disk_text(path)
    return Document(path, text, exact=exact)


class DiskWorkspace:
    def __init__(self, roots: list[Path], names: list[str] | None = None):
        self.roots = [Path(r).resolve() for r in roots]
        self.names = names

    async def read(self, path: Path) -> Document:
        return await read_disk_document(path)

    async def apply(
        self,
        path: Path,
        before: Document | None,
        after: str,
        *,
        preview: str | None = None,
        late: Any = None,
    ) -> EditOutcome:
        try:
            current = (
                (await read_disk_document(path)) if path.exists() or path.is_symlink() else None
            )
        except ValueError as exc:
            return EditOutcome(False, str(exc))
        if current is not None and not current.exact:
            return EditOutcome(
                False,
                f"{path.name} is not valid UTF-8 text (or holds NUL bytes): it is not edited, "
                "so no byte of it is lost",
            )
        # the file as it is now, merged with the edit when it changed since it was read
        resolution = resolve(
            before.text if before else None, current.text if current else None, after
        )
        if resolution.text is None:
            return conflict_outcome(path, resolution)
        if (
            not any(path.parent == r or path.parent.is_relative_to(r) for r in self.roots)
            or path.parent.resolve() != path.parent
        ):
            return EditOutcome(
                False,
                f"{path.name}: its folder moved or became a link since the path was checked; "
                "refused",
            )
        try:
            await asyncio.to_thread(_write, path, resolution.text.encode("utf-8"))
        except OSError as exc:
            return EditOutcome(False, f"cannot write: {exc.strerror or exc}")
        return applied_outcome(path, resolution)

    async def apply_all(
        self,
        changes: list[FileChange],
        *,
        label: str,
        preview: str | None = None,
        late: Any = None,
    ) -> EditOutcome:
        return await apply_each(self, changes)

    async def restore(self, restores: list[Any]) -> Any:
        """A rewind on disk: each file written back (binary ones too) or deleted."""
        from agent_lsp.agent.ports import RestoreOutcome

        outcome = RestoreOutcome()
        for item in restores:
            problem = confinement_problem(item.path, self.roots)  # again, just before the write
            if problem is not None:
                outcome.failed.append((item.path, problem))
                continue
            try:
                if item.content is None:
                    await asyncio.to_thread(item.path.unlink, missing_ok=True)
                else:
                    await asyncio.to_thread(_write, item.path, item.content)
                outcome.restored.append(item.path)
            except OSError as exc:
                outcome.failed.append((item.path, f"cannot write it: {exc.strerror or exc}"))
        return outcome

    def open_texts(self) -> dict[Path, str]:
        return {}

    async def unsaved(self, paths: list[Path]) -> list[Path]:
        return []


async def apply_each(workspace: Any, changes: list[FileChange]) -> EditOutcome:
    """A multi-file edit where there is no one change for all files: every file is checked
    against the text it was computed on first (a file changed since merges; a conflict writes
    nothing), then each is applied in order through the workspace's own `apply`; a failure stops
    there, and the message names what was written."""
    for change in changes:
        try:
            now = await workspace.read(change.path)
        except ValueError as exc:
            return EditOutcome(False, f"{change.path.name}: {exc}")
        resolution = resolve(change.before.text, now.text, change.after)
        if resolution.text is None:
            outcome = conflict_outcome(change.path, resolution)
            outcome.message += "; nothing was written"
            return outcome
    written: list[str] = []
    merged = EditOutcome(True)
    for change in changes:
        outcome = await workspace.apply(change.path, change.before, change.after)
        if not outcome.applied:
            done = f"already written: {', '.join(written)}" if written else "nothing was written"
            return EditOutcome(
                False,
                f"{change.path.name}: {outcome.message} ({done})",
                landed=merged.landed,
                merged_onto=merged.merged_onto,
                conflict=outcome.conflict,
            )
        written.append(change.path.name)
        merged.landed.update(outcome.landed)
        merged.merged_onto.update(outcome.merged_onto)
        if outcome.message:
            merged.message += f"{change.path.name}: {outcome.message}\n"
    merged.message = merged.message.rstrip("\n")
    return merged


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(path, data)
