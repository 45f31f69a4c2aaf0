"""Rewind: put back every file a run changed, as it was before the run, in one edit the editor
can undo; a file changed since the run left it is a conflict, never overwritten without force;
the rewind is itself recorded, so it can be rewound (CONTRACT "Rewind")."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.fs.safeio import confinement_problem
from agent_lsp.agent.ports import Restore, RestoreOutcome, Restorer, Workspace
from agent_lsp.agent.state.checkpoints import (
    CheckpointStore,
    FileRecord,
    Manifest,
    RunCheckpoint,
    RunSummary,
    content_sha,
    current_content,
)
from agent_lsp.agent.state.session import new_id


class RewindError(ValueError):
    """An unknown or running run, an unreadable checkpoint store: the message is for the user."""


class RunNotFinished(RewindError):
    """A run of the session is still running in this process: said as is, whichever workspace
    is searched (a caller tells it from an unknown run by its type, never by its words)."""


class AlreadyRewound(RewindError):
    """The run was rewound before, and that rewind was not undone: rewinding it again would
    only report every file as a conflict."""


def rewound_by(manifests: Sequence[Manifest | RunSummary]) -> dict[str, str]:
    """Run (or rewind) id -> the rewind that put its files back and still stands (was not
    itself rewound). `manifests` oldest first, as CheckpointStore.all() gives them; walked
    newest first, since every rewind that could undo a manifest is newer than it."""
    undone: dict[str, str] = {}
    for manifest in reversed(manifests):
        if manifest.kind == "rewind" and manifest.run_id not in undone:
            for target in manifest.rewinds:
                undone.setdefault(target, manifest.run_id)
    return undone


@dataclass
class RewindResult:
    rewind_id: str
    restored: list[Path]
    conflicts: list[tuple[Path, str]]
    not_restorable: list[tuple[Path, str]]
    runs: list[str]
    # conflicting files that later runs of the session also changed
    later: set[Path] = field(default_factory=set)

    def conflict_hint(self, path: Path, force: str, include_later: str) -> str:
        """What would take a conflict anyway, in a front end's own words (its flag or argument
        names): the core's reason is neutral, each front end adds this."""
        hint = f"use {force} to overwrite it"
        return hint + (
            f", or {include_later} to rewind those runs too" if path in self.later else ""
        )

    def to_dict(self, force: str | None = None, include_later: str | None = None) -> dict[str, Any]:
        """With `force`/`include_later` (how the front end spells those options) each conflict's
        reason ends with the hint; without them it is the core's neutral reason."""

        def reason(path: Path, text: str) -> str:
            return (
                f"{text}; {self.conflict_hint(path, force, include_later or 'includeLater')}"
                if force
                else text
            )

        return {
            "rewindId": self.rewind_id,
            "restored": [p.as_uri() for p in self.restored],
            "conflicts": [{"uri": p.as_uri(), "reason": reason(p, r)} for p, r in self.conflicts],
            "notRestorable": [{"uri": p.as_uri(), "reason": r} for p, r in self.not_restorable],
        }


CHANGED_SINCE = "changed since the run left it (by you or by a later run)"


def later_touched(store: CheckpointStore, run_id: str) -> set[str]:
    """The files of run_id that later runs of its session changed too (what include_later would
    rewind first)."""
    target = store.load(run_id)
    if target is None:
        return set()
    return {
        path
        for m in store.all()
        if m.created > target.created and m.session_id == target.session_id and m.kind == "run"
        for path in m.files
        if path in target.files
    }


def runs_to_rewind(store: CheckpointStore, run_id: str, include_later: bool) -> list[Manifest]:
    """The run's manifest, and with include_later the session's later runs that touched the
    same files, newest first."""
    target = store.load(run_id)
    if target is None:
        raise RewindError(f"unknown runId {run_id!r}: no checkpoint of that run in this workspace")
    if not target.finished:
        raise RewindError(
            f"run {run_id} has not finished; cancel it or wait for it before rewinding it"
        )
    manifests = store.all()
    undone = rewound_by(manifests)
    if run_id in undone:
        what = "run" if target.kind == "run" else "rewind"
        raise AlreadyRewound(
            f"{what} {run_id} was already rewound (by {undone[run_id]}): its files are as they "
            f"were before it; rewind {undone[run_id]} to undo that"
        )
    chosen = [target]
    if include_later:
        touched = set(target.files)
        for later in reversed(
            [
                m
                for m in manifests
                if m.created > target.created
                and m.session_id == target.session_id
                and m.kind == "run"
                and m.run_id not in undone  # already put back: nothing of it to rewind
            ]
        ):
            if touched & set(later.files):
                chosen.insert(0, later)
    return chosen


async def rewind(
    store: CheckpointStore,
    workspace: Workspace,
    restorer: Restorer,
    run_id: str,
    *,
    force: bool = False,
    include_later: bool = False,
    binary_ok: bool = True,
) -> RewindResult:
    manifests = await asyncio.to_thread(runs_to_rewind, store, run_id, include_later)
    plan, conflicts, not_restorable = await _plan(store, workspace, manifests, force, binary_ok)
    conflicted = {p for p, _ in conflicts}
    restores = [r for p, r in plan.items() if p not in conflicted and r.content != r.current]
    rewind_id = new_id("w")
    undo = RunCheckpoint(store, workspace, rewind_id, manifests[0].session_id, kind="rewind")
    undo.manifest.rewinds = [m.run_id for m in manifests]
    for item in restores:  # the rewind's own checkpoint: what it overwrote, so it can be undone
        sha = (
            await asyncio.to_thread(store.blobs.put, item.current)
            if item.current is not None
            else None
        )
        undo.manifest.files[str(item.path)] = FileRecord(str(item.path), sha, via="rewind")
    outcome = await restorer.restore(restores) if restores else RestoreOutcome()
    for path, reason in outcome.failed:
        undo.manifest.files.pop(str(path), None)
        _once(not_restorable, path, reason)
    restored = outcome.restored + [
        p for p, r in plan.items() if p not in conflicted and r.content == r.current
    ]
    await undo.close()
    later = (
        set()
        if include_later or not conflicts
        else {Path(p) for p in await asyncio.to_thread(later_touched, store, run_id)}
    )
    return RewindResult(
        rewind_id,
        restored,
        conflicts,
        not_restorable,
        [m.run_id for m in manifests],
        later & {p for p, _ in conflicts},
    )


async def _plan(
    store: CheckpointStore,
    workspace: Workspace,
    manifests: list[Manifest],
    force: bool,
    binary_ok: bool,
) -> tuple[dict[Path, Restore], list[tuple[Path, str]], list[tuple[Path, str]]]:
    """What each file of the rewound runs goes back to (the oldest run's "before"), and the
    files that conflict (changed since) or cannot be restored, with why."""
    plan: dict[Path, Restore] = {}
    conflicts: list[tuple[Path, str]] = []
    not_restorable: list[tuple[Path, str]] = []
    later_files: dict[str, str] = {}  # path -> the after-state the newest rewound run left
    for manifest in manifests:  # newest first: the oldest run's "before" is what is restored
        for record in manifest.files.values():
            later_files.setdefault(record.path, record.after or "")
    for manifest in manifests:
        for record in manifest.files.values():
            path = Path(record.path)
            # Confined like an edit: a manifest edited by hand, or a folder replaced by a link
            # since the run, never makes a rewind write or delete outside the workspace.
            problem = confinement_problem(path, store.roots)
            if problem is not None:
                _once(not_restorable, path, problem)
                plan.pop(path, None)
                continue
            if not record.restorable:
                _once(not_restorable, path, record.reason or "not restorable")
                plan.pop(path, None)
                continue
            current = await current_content(workspace, path)
            expected = later_files.get(record.path) or None
            if content_sha(current) != expected and not force:
                _once(conflicts, path, CHANGED_SINCE)
                continue
            try:
                content = (
                    await asyncio.to_thread(store.blobs.get, record.before)
                    if record.before
                    else None
                )
            except (OSError, ValueError) as exc:
                _once(not_restorable, path, f"its checkpoint cannot be read ({exc})")
                continue
            if content is not None and not binary_ok and (b"\x00" in content or not _utf8(content)):
                _once(
                    not_restorable,
                    path,
                    "binary: the editor cannot restore it (agent-lsp rewind restores it on disk)",
                )
                continue
            plan[path] = Restore(path, content, current)
    return plan, conflicts, not_restorable


def _once(items: list[tuple[Path, str]], path: Path, reason: str) -> None:
    if all(p != path for p, _ in items):
        items.append((path, reason))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
