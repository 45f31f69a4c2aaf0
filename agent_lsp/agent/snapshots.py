"""What a command changed in the workspace, found by comparing snapshots taken before and after it.

In a git work tree, a snapshot is a tree written with a temporary index and object directory in
the state dir, the repository's own objects as an alternate: as cheap as `git status` (files
git already knows are not hashed again) and nothing is written under the workspace. Elsewhere
it is a walk of the files the ignore rules keep, with the content of files under 1 MB kept so
they can be restored. Ignored files and `.git/` are never looked at (CONTRACT Decision 17)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.safeio import private_dir, read_regular_sync, write_private

log = logging.getLogger(__name__)

SMALL_FILE = 1_000_000  # outside git, files up to this size are kept before a command
GIT_SAFE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.quotePath=false"]


class BlobStore:
    """File contents by sha256, private, in the state dir: what checkpoints restore."""

    def __init__(self, folder: Path):
        self.folder = folder

    def path(self, sha: str) -> Path:
        return self.folder / sha[:2] / sha

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        target = self.path(sha)
        if not target.exists():
            private_dir(target.parent)
            write_private(target, data)
        return sha

    def get(self, sha: str) -> bytes:
        return read_regular_sync(self.path(sha), 1 << 40)


@dataclass
class Change:
    path: Path
    before: str | None  # the blob sha of its old content; None: the file did not exist before
    restorable: bool = True
    reason: str = ""  # why it cannot be restored


@dataclass
class Snapshot:
    git_trees: dict[Path, tuple[Path, str]] = field(default_factory=dict)  # workspace root -> (toplevel, tree id)
    files: dict[Path, tuple[int, int, str | None]] = field(default_factory=dict)  # non-git: path -> (size, mtime_ns, sha)


class Snapshotter:
    """Snapshots of one workspace's folders; keeps its git index and stat cache between commands."""

    def __init__(self, state: Path, roots: list[Path], blobs: BlobStore):
        self.state = state
        self.roots = roots
        self.blobs = blobs
        self._toplevel: dict[Path, Path | None] = {}
        self._hashes: dict[Path, tuple[int, int, str]] = {}  # non-git stat cache
        self._lock = asyncio.Lock()

    async def take(self) -> Snapshot:
        async with self._lock:
            snap = Snapshot()
            for root in self.roots:
                top = await self._git_top(root)
                if top is not None:
                    snap.git_trees[root] = (top, await self._write_tree(top, root))
                else:
                    await asyncio.to_thread(self._walk, root, snap)
            return snap

    async def changes(self, before: Snapshot) -> list[Change]:
        """What differs between `before` and now, with the old content of each changed file.
        In git, the refreshed private index is compared with the tree taken before (no tree is
        written for the after side: the next snapshot writes one)."""
        found: list[Change] = []
        async with self._lock:
            after = Snapshot()
            for root in self.roots:
                if root in before.git_trees:
                    top, tree = before.git_trees[root]
                    await self._add(top, root)
                    found += await self._git_changes(top, tree)
                else:
                    await asyncio.to_thread(self._walk, root, after)
        for path, (size, mtime, sha) in before.files.items():
            current = after.files.get(path)
            if sha is None:  # too big to have been kept: only its size and time tell
                if current is None or current[:2] != (size, mtime):
                    found.append(Change(path, None, False, f"larger than {SMALL_FILE // 1_000_000} MB and not in git: no copy was kept"))
                continue
            if current is not None and current[2] == sha:
                continue
            found.append(Change(path, sha))
        for path in after.files:
            if path not in before.files:
                found.append(Change(path, None))
        return found

    # -- git ---------------------------------------------------------------------------------
    async def _git_top(self, root: Path) -> Path | None:
        if root not in self._toplevel:
            code, out = await _git(root, "rev-parse", "--show-toplevel")
            self._toplevel[root] = Path(out.strip()).resolve() if code == 0 and out.strip() else None
        return self._toplevel[root]

    def _git_env(self, top: Path) -> dict[str, str]:
        base = private_dir(self.state / "git" / hashlib.sha256(str(top).encode()).hexdigest()[:12])
        objects = private_dir(base / "objects")
        index = base / "index"
        if not index.exists() and (top / ".git" / "index").is_file():
            try:  # start from the repository's own index: files git already hashed are not hashed again
                shutil.copyfile(top / ".git" / "index", index)
            except OSError:
                pass
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        git_objects = top / ".git" / "objects"
        env.update(GIT_INDEX_FILE=str(index), GIT_OBJECT_DIRECTORY=str(objects),
                   GIT_ALTERNATE_OBJECT_DIRECTORIES=str(git_objects) if git_objects.is_dir() else "")
        return env

    async def _add(self, top: Path, root: Path) -> None:
        spec = os.path.relpath(root, top)
        code, out = await _git(top, "add", "-A", "--ignore-errors", "--", spec, env=self._git_env(top))
        if code != 0:
            log.info("git add for a snapshot of %s said: %s", root, out.strip()[:300])

    async def _write_tree(self, top: Path, root: Path) -> str:
        await self._add(top, root)
        code, out = await _git(top, "write-tree", env=self._git_env(top))
        if code != 0:
            raise OSError(0, f"git write-tree failed: {out.strip()[:300]}")
        return out.strip()

    async def _git_changes(self, top: Path, old: str) -> list[Change]:
        env = self._git_env(top)
        code, out = await _git(top, "diff-index", "--cached", "-r", "-z", "--no-renames", "--raw", old, env=env)
        if code != 0:
            raise OSError(0, f"git diff-index failed: {out.strip()[:300]}")
        changes = []
        parts = out.split("\0")
        for meta, name in zip(parts[0::2], parts[1::2], strict=False):
            if not meta.startswith(":"):
                continue
            fields = meta[1:].split()
            old_mode, old_sha, status = fields[0], fields[2], fields[4][:1]
            path = (top / name).resolve()
            if status == "A" or old_sha.strip("0") == "":
                changes.append(Change(path, None))
            elif old_mode.startswith("12") or old_mode.startswith("16"):  # a symlink or a submodule
                changes.append(Change(path, None, False, "a symbolic link or submodule: not restored"))
            else:
                content = await _git_bytes(top, ["cat-file", "blob", old_sha], env)
                if content is None:
                    changes.append(Change(path, None, False, "its old content could not be read from git"))
                else:
                    changes.append(Change(path, await asyncio.to_thread(self.blobs.put, content)))
        return changes

    # -- outside git -------------------------------------------------------------------------
    def _walk(self, root: Path, snap: Snapshot) -> None:
        from agent_lsp.agent.tools.search import fallback_walk

        for name in fallback_walk(root, None):
            path = Path(name)
            try:
                info = path.stat()
            except OSError:
                continue
            cached = self._hashes.get(path)
            if cached is not None and cached[:2] == (info.st_size, info.st_mtime_ns):
                sha: str | None = cached[2]
            elif info.st_size <= SMALL_FILE:
                try:
                    sha = self.blobs.put(read_regular_sync(path, SMALL_FILE))
                except (OSError, ValueError):
                    continue
                self._hashes[path] = (info.st_size, info.st_mtime_ns, sha)
            else:
                sha = None
            snap.files[path] = (info.st_size, info.st_mtime_ns, sha)


async def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        proc = await asyncio.create_subprocess_exec("git", *GIT_SAFE, *args, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    except OSError as exc:
        return 127, str(exc)
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode("utf-8", errors="surrogateescape")


async def _git_bytes(cwd: Path, args: list[str], env: dict[str, str]) -> bytes | None:
    proc = await asyncio.create_subprocess_exec("git", *GIT_SAFE, *args, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    return out if proc.returncode == 0 else None
