"""Checkpoints: every file a run changes, kept as it was before the run's first change to it
(edit tools, and files a command changed, found by snapshots), in the state dir; they survive
restarts and are pruned (CONTRACT "Rewind", Decision 17)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.fs.safeio import open_regular, private_dir, read_regular_sync, write_private
from agent_lsp.agent.ports import Document, Workspace
from agent_lsp.agent.state.sessions import workspace_state
from agent_lsp.agent.state.snapshots import BlobStore, Snapshot, Snapshotter

log = logging.getLogger(__name__)

KEEP_RUNS = 100
MAX_MANIFEST = 50_000_000
KEEP_DAYS = 30
Stamp = tuple[int, int, int]  # a file's size, mtime (ns) and inode
RACY_NS = 100_000_000  # coarser than any filesystem's mtime granularity (ext4: a jiffy)


@dataclass
class FileRecord:
    path: str
    before: str | None  # blob sha of the content before the run; None: the run created it
    after: str | None = None  # sha of what the run left (None: absent), for drift detection
    restorable: bool = True
    reason: str = ""
    via: str = "edit"  # edit | command

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "before": self.before,
            "after": self.after,
            "restorable": self.restorable,
            "reason": self.reason,
            "via": self.via,
        }


@dataclass
class Manifest:
    run_id: str
    session_id: str
    created: float
    files: dict[str, FileRecord] = field(default_factory=dict)
    finished: bool = False
    kind: str = "run"  # run | rewind
    rewinds: list[str] = field(default_factory=list)  # for a rewind: the runs it rewound

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "runId": self.run_id,
                "sessionId": self.session_id,
                "created": self.created,
                "finished": self.finished,
                "kind": self.kind,
                "rewinds": self.rewinds,
                # before `files` (always last): a summary is read from the file's head
                "restorableFiles": sum(1 for f in self.files.values() if f.restorable),
                "files": [f.to_dict() for f in self.files.values()],
            },
            ensure_ascii=False,
        ).encode()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        files = {
            f["path"]: FileRecord(
                f["path"],
                f.get("before"),
                f.get("after"),
                bool(f.get("restorable", True)),
                str(f.get("reason", "")),
                str(f.get("via", "edit")),
            )
            for f in data.get("files", [])
        }
        return cls(
            str(data["runId"]),
            str(data.get("sessionId", "")),
            float(data.get("created", 0)),
            files,
            bool(data.get("finished")),
            str(data.get("kind", "run")),
            list(data.get("rewinds") or []),
        )

    @property
    def rewindable(self) -> bool:
        return any(f.restorable for f in self.files.values())


@dataclass(frozen=True)
class RunSummary:
    """A manifest without its files: what picks the last rewindable run, read from the head
    of the file (a run that changed 6,000 files has a manifest of a megabyte)."""

    run_id: str
    session_id: str
    created: float
    finished: bool
    kind: str
    rewinds: tuple[str, ...]
    restorable: int  # the files it can restore

    @classmethod
    def of(cls, manifest: Manifest) -> RunSummary:
        return cls(
            manifest.run_id,
            manifest.session_id,
            manifest.created,
            manifest.finished,
            manifest.kind,
            tuple(manifest.rewinds),
            sum(1 for f in manifest.files.values() if f.restorable),
        )


SUMMARY_HEAD = 8192  # bytes read first: the header of any manifest whose `rewinds` list is short
FILES_KEY = b', "files": ['


def read_summary(path: Path) -> RunSummary:
    """The manifest's summary from its head when it carries `restorableFiles` (written so since
    issue 32), else from the whole manifest. OSError, ValueError or KeyError when unreadable."""
    fd, _ = open_regular(path, MAX_MANIFEST)
    with os.fdopen(fd, "rb") as handle:
        head = handle.read(SUMMARY_HEAD)
        cut = head.find(FILES_KEY)
        if cut >= 0:
            data = json.loads(head[:cut] + b"}")
            if isinstance(data, dict) and isinstance(data.get("restorableFiles"), int):
                return RunSummary(
                    str(data["runId"]),
                    str(data.get("sessionId", "")),
                    float(data.get("created", 0)),
                    bool(data.get("finished")),
                    str(data.get("kind", "run")),
                    tuple(str(r) for r in data.get("rewinds") or []),
                    int(data["restorableFiles"]),
                )
    return RunSummary.of(Manifest.from_json(json.loads(read_regular_sync(path, MAX_MANIFEST))))


def _read_manifest(path: Path) -> Manifest:
    return Manifest.from_json(json.loads(read_regular_sync(path, MAX_MANIFEST)))


def content_sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


async def current_content(workspace: Workspace, path: Path) -> bytes | None:
    """What the file holds now as the agent sees it: the editor's buffer if open, else disk."""
    if path in workspace.open_texts():
        return (await workspace.read(path)).text.encode("utf-8")
    try:
        return await asyncio.to_thread(read_regular_sync, path, 1 << 40)
    except (OSError, ValueError):
        return None


class CheckpointStore:
    """The checkpoints of one workspace (its first folder)."""

    def __init__(self, state: Path, roots: list[Path]):
        self.roots = [root.resolve() for root in roots]
        self.dir = workspace_state(state, roots[0]) / "checkpoints"
        self.blobs = BlobStore(self.dir / "blobs")
        # The state dir may sit inside a workspace (XDG_STATE_HOME under the project): its own
        # files are never a command's changes.
        self.snapshotter = Snapshotter(
            workspace_state(state, roots[0]), roots, self.blobs, exclude=(state,)
        )
        # What each file last held after an edit tool wrote it, and which run wrote it: a file a
        # command of one run "changed" that holds exactly another run's edit is that run's
        # change (concurrent runs in one workspace; an editor saving a buffer late).
        self.edit_marks: dict[str, tuple[str | None, str]] = {}
        # Per reader (whole manifests, summaries): each file's stat and what was read from it,
        # and the last listing with the runs folder's stat when it was made: while the folder
        # is unchanged (no manifest added, replaced or removed) the listing stands, with no stat
        # per manifest (code actions ask on every cursor move, beside streaming runs).
        self._cache: dict[Callable[[Path], Any], dict[Path, tuple[Stamp, Any]]] = {}
        self._listing: dict[Callable[[Path], Any], tuple[Stamp, list[Any]]] = {}
        self._cache_lock = threading.Lock()
        self.saves = 0  # manifests saved or removed by this process (a key for a shared read)

    def path(self, run_id: str) -> Path:
        safe = "".join(c for c in run_id if c.isalnum() or c in "-_")
        if safe != run_id or not safe:
            raise KeyError(run_id)
        return self.dir / "runs" / f"{safe}.json"

    def save(self, manifest: Manifest) -> None:
        target = self.path(manifest.run_id)
        private_dir(target.parent)
        write_private(target, manifest.to_json())
        self.saves += 1

    def load(self, run_id: str) -> Manifest | None:
        try:
            target = self.path(run_id)
            if not os.path.lexists(target):
                return None
            # a regular file only
            return Manifest.from_json(json.loads(read_regular_sync(target, MAX_MANIFEST)))
        except KeyError:
            return None
        except (OSError, ValueError) as exc:
            raise OSError(
                0,
                f"the checkpoint of {run_id} cannot be read ({exc}); "
                f"it is kept at {self.path(run_id)}",
            ) from None

    def all(self) -> list[Manifest]:
        """Every manifest, oldest first. Blocking I/O: call it off the event loop."""
        return self._listed(_read_manifest)

    def summaries(self) -> list[RunSummary]:
        """Every manifest's summary, oldest first: asked on every code-action request, so a
        manifest is read again only when its file changed (size, mtime, inode: saves are atomic
        renames, so a rewrite by another process is seen too), only its head when it can be,
        and the folder is listed again only when it changed. Blocking I/O: off the event loop."""
        return self._listed(read_summary)

    def _listed(self, read: Callable[[Path], Any]) -> list[Any]:
        folder = self.dir / "runs"
        try:
            info = os.stat(folder)
        except OSError:
            return []
        stamp = (info.st_size, info.st_mtime_ns, info.st_ino)
        with self._cache_lock:
            listing = self._listing.get(read)
            if listing is not None and listing[0] == stamp:
                return list(listing[1])
        # A change within the filesystem's timestamp granularity of the listing could keep the
        # folder's stamp: a listing made that soon after the last change is not kept (racy).
        racy = time.time_ns() - info.st_mtime_ns < RACY_NS
        try:
            files = [p for p in folder.iterdir() if p.suffix == ".json"]
        except OSError:
            return []
        out = self._read_each(files, read)
        with self._cache_lock:
            if racy:
                self._listing.pop(read, None)
            else:
                self._listing[read] = (stamp, out)
        return list(out)

    def _read_each(self, files: list[Path], read: Callable[[Path], Any]) -> list[Any]:
        """What `read` gives for each of `files`, oldest first, each file read again only when
        it changed."""
        out = []
        with self._cache_lock:
            cache = self._cache.get(read, {})
            seen: dict[Path, tuple[Stamp, Any]] = {}
            for file in files:
                try:
                    info = os.lstat(file)
                except OSError:
                    continue
                key = (info.st_size, info.st_mtime_ns, info.st_ino)
                cached = cache.get(file)
                if cached is not None and cached[0] == key:
                    item = cached[1]
                else:
                    try:
                        item = read(file)
                    except (OSError, ValueError, KeyError, TypeError):
                        log.warning("checkpoint %s is unreadable: skipped (kept on disk)", file)
                        item = None
                seen[file] = (key, item)
                if item is not None:
                    out.append(item)
            self._cache[read] = seen
        return sorted(out, key=lambda m: m.created)

    def prune(self, keep: int = KEEP_RUNS, days: float = KEEP_DAYS) -> int:
        """Keep the newest `keep` runs younger than `days`; then drop blobs nobody uses."""
        manifests = self.summaries()
        now = time.time()
        dropped = 0
        for index, manifest in enumerate(reversed(manifests)):
            if index >= keep or now - manifest.created > days * 86400:
                self.path(manifest.run_id).unlink(missing_ok=True)
                self.saves += 1
                dropped += 1
        if dropped:
            used = {
                sha
                for m in self.all()
                for f in m.files.values()
                for sha in (f.before, f.after)
                if sha
            }
            for folder in self.blobs.folder.iterdir() if self.blobs.folder.is_dir() else []:
                for blob in folder.iterdir():
                    if blob.name not in used:
                        blob.unlink(missing_ok=True)
        return dropped


class RunCheckpoint:
    """The checkpoint of one run (the tools' `ctx.checkpoint`). A failure to keep a checkpoint
    never stops an edit: the file is then listed as not restorable, never silently skipped."""

    def __init__(
        self,
        store: CheckpointStore,
        workspace: Workspace,
        run_id: str,
        session_id: str,
        kind: str = "run",
    ):
        self.store = store
        self.workspace = workspace
        self.manifest = Manifest(run_id, session_id, time.time(), kind=kind)
        self._lock = asyncio.Lock()
        # What the run's own edits left in each file: an editor may send its didChange for the
        # last edit after the run ends (Neovim debounces it, eglot waits for idle), so the
        # server's copy of the buffer is not yet the truth when the run closes.
        self._left: dict[str, str | None] = {}

    def _record(
        self, path: Path, before: str | None, via: str, restorable: bool = True, reason: str = ""
    ) -> None:
        self.manifest.files.setdefault(
            str(path), FileRecord(str(path), before, None, restorable, reason, via)
        )

    async def before_change(self, path: Path, before: Document | None) -> bool:
        """Keep the file as it is before the run's first change to it (edit tools); whether
        this was that first change."""
        if str(path) in self.manifest.files:
            return False
        async with self._lock:
            if before is None:
                self._record(path, None, "edit")
                return True
            try:
                sha = await asyncio.to_thread(self.store.blobs.put, before.text.encode("utf-8"))
                self._record(path, sha, "edit")
            except OSError as exc:
                self._record(
                    path,
                    None,
                    "edit",
                    False,
                    f"its checkpoint could not be written ({exc.strerror or exc})",
                )
            await asyncio.to_thread(self.store.save, self.manifest)
            return True

    async def merged_onto(self, path: Path, text: str) -> None:
        """The run's first edit of `path` was merged onto `text` (changes made while it waited):
        that, not the text the edit was computed on, is the file before the run, so a rewind
        keeps those changes."""
        record = self.manifest.files.get(str(path))
        if record is None or not record.restorable:
            return
        async with self._lock:
            try:
                record.before = await asyncio.to_thread(self.store.blobs.put, text.encode("utf-8"))
            except OSError as exc:
                record.restorable = False
                record.reason = f"its checkpoint could not be written ({exc.strerror or exc})"
            await asyncio.to_thread(self.store.save, self.manifest)

    def edited(self, path: Path, text: str) -> None:
        """An edit tool's change landed: the file now holds `text`."""
        sha = content_sha(text.encode("utf-8"))
        self._left[str(path)] = sha
        self.store.edit_marks[str(path)] = (sha, self.manifest.run_id)

    async def record_late(self, path: Path, before: Document | None, after: str) -> None:
        """An edit that landed after the run closed (a preview applied after a cancel). OSError
        when it cannot be kept: the caller tells the user."""
        async with self._lock:
            sha = (
                await asyncio.to_thread(self.store.blobs.put, before.text.encode("utf-8"))
                if before is not None
                else None
            )
            self.manifest.files[str(path)] = FileRecord(
                str(path), sha, content_sha(after.encode("utf-8")), via="edit"
            )
            await asyncio.to_thread(self.store.save, self.manifest)

    async def before_command(self) -> Snapshot | None:
        try:
            return await self.store.snapshotter.take()
        except OSError as exc:
            log.warning(
                "no snapshot before the command (%s): its changes will not be restorable", exc
            )
            return None

    async def after_command(self, before: Snapshot) -> list[Path]:
        """Record what the command changed (first change wins); returns the changed files."""
        try:
            changes = await self.store.snapshotter.changes(before)
        except OSError as exc:
            log.warning("could not tell what the command changed: %s", exc)
            return []
        changes = [c for c in changes if not await self._another_runs_edit(c.path)]
        async with self._lock:
            for change in changes:
                self._record(
                    change.path, change.before, "command", change.restorable, change.reason
                )
                self._left.pop(str(change.path), None)  # read it again at the close
            if changes:
                await asyncio.to_thread(self.store.save, self.manifest)
        return [c.path for c in changes]

    async def _another_runs_edit(self, path: Path) -> bool:
        mark = self.store.edit_marks.get(str(path))
        if mark is None or mark[1] == self.manifest.run_id:
            return False
        return content_sha(await current_content(self.workspace, path)) == mark[0]

    async def close(self) -> bool:
        """At the run's end: what it left in each file (for drift detection); saved. Returns
        whether at least one changed file can be restored."""
        for key, record in list(self.manifest.files.items()):
            if key in self._left:
                record.after = self._left[key]
            else:
                record.after = content_sha(await current_content(self.workspace, Path(record.path)))
            # e.g. an edit discarded in the preview
            if record.restorable and record.after == record.before:
                del self.manifest.files[key]
        self.manifest.finished = True
        if self.manifest.files:
            try:
                await asyncio.to_thread(self.store.save, self.manifest)
                await asyncio.to_thread(self.store.prune)
            except OSError as exc:
                log.warning(
                    "the checkpoint of %s could not be saved: %s", self.manifest.run_id, exc
                )
                return False
        return self.manifest.rewindable
