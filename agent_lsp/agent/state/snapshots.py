"""What a command changed in the workspace, found by comparing snapshots taken before and after it.

In a git work tree, a snapshot is a tree written with a git dir of our own in the state dir (its
index and objects; the repository's objects as an alternate; the repository's config and hooks
never read, so nothing of the repository's runs): as cheap as `git status` (files git already
knows are not hashed again) and nothing is written under the workspace. Elsewhere
it is a walk of the files the ignore rules keep, with the content of files under 1 MB kept so
they can be restored. Ignored files, `.git/` and Python's bytecode caches (`__pycache__/`, `*.pyc`)
are never looked at (CONTRACT Decision 17)."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import os
import shutil
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.fs.safeio import private_dir, read_regular_sync, write_private
from agent_lsp.agent.fs.walk import fallback_walk
from agent_lsp.agent.state.gitsafe import (
    Repository,
    find_repository,
    git_env,
    held,
    private_git_dir,
    run_git,
)

log = logging.getLogger(__name__)

# Python's bytecode caches: written by any command that imports the workspace's code, never a
# change of the user's (a .gitignore usually says so; a new project's often has none yet).
BYTECODE_DIRS = ("__pycache__",)
BYTECODE_SUFFIXES = (".pyc", ".pyo")
BYTECODE_PATHSPEC = tuple(
    [f":(exclude,glob)**/{d}/**" for d in BYTECODE_DIRS]
    + [f":(exclude,glob)**/*{s}" for s in BYTECODE_SUFFIXES]
)
SMALL_FILE = 1_000_000  # outside git, files up to this size are kept before a command
# The private git dir's own objects (every version of every untracked or changed file a snapshot
# saw) grow with each command: past this size they are dropped with the private index, and the
# next snapshot starts again from the repository's index. Nothing restorable is lost: a
# checkpoint copies the old content of each changed file into its own blob store.
MAX_GIT_OBJECTS = 256 * 1024 * 1024
GIT_SIZE_CHECK_SECONDS = 300.0


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
    # workspace root -> (repository, tree id)
    git_trees: dict[Path, tuple[Repository, str]] = field(default_factory=dict)
    # non-git: path -> (size, mtime_ns, sha)
    files: dict[Path, tuple[int, int, str | None]] = field(default_factory=dict)
    # Shared locks on the private git dirs whose trees this snapshot names: while held, their
    # objects are not dropped (by this process or another). Released by `changes`, or when the
    # snapshot is collected.
    leases: list[int] = field(default_factory=list)

    def release(self) -> None:
        _release(self.leases)


def _release(leases: list[int]) -> None:
    while leases:
        try:
            os.close(leases.pop())
        except OSError:
            pass


class Snapshotter:
    """Snapshots of one workspace's folders; keeps its git index and stat cache between commands."""

    def __init__(
        self, state: Path, roots: list[Path], blobs: BlobStore, exclude: tuple[Path, ...] = ()
    ):
        self.state = state
        self.roots = roots
        self.blobs = blobs
        self.exclude = tuple(p.resolve() for p in exclude)  # never part of a change (the state dir)
        self._repos: dict[Path, Repository | None] = {}
        self._hashes: dict[Path, tuple[int, int, str]] = {}  # non-git stat cache
        self._lock = asyncio.Lock()
        self.max_git_objects = MAX_GIT_OBJECTS
        self.size_check_seconds = GIT_SIZE_CHECK_SECONDS
        self._size_checked: dict[Path, float] = {}

    async def take(self) -> Snapshot:
        async with self._lock, held(self.state / "git" / "lock"):
            snap = Snapshot()
            weakref.finalize(snap, _release, snap.leases)
            for root in self.roots:
                repo = await self._repository(root)
                if repo is not None:
                    folder = self._git_dir(repo)
                    await self._bound(folder)
                    snap.leases.append(await asyncio.to_thread(_lease, folder))
                    snap.git_trees[root] = (repo, await self._write_tree(repo, root))
                else:
                    await asyncio.to_thread(self._walk, root, snap)
            return snap

    async def changes(self, before: Snapshot) -> list[Change]:
        """What differs between `before` and now, with the old content of each changed file.
        In git, the refreshed private index is compared with the tree taken before (no tree is
        written for the after side: the next snapshot writes one)."""
        found: list[Change] = []
        async with self._lock, held(self.state / "git" / "lock"):
            after = Snapshot()
            try:
                for root in self.roots:
                    if root in before.git_trees:
                        repo, tree = before.git_trees[root]
                        await self._add(repo, root)
                        found += await self._git_changes(repo, tree)
                    else:
                        await asyncio.to_thread(self._walk, root, after)
            finally:
                before.release()
        for path, (size, mtime, sha) in before.files.items():
            current = after.files.get(path)
            if sha is None:  # too big to have been kept: only its size and time tell
                if current is None or current[:2] != (size, mtime):
                    found.append(
                        Change(
                            path,
                            None,
                            False,
                            f"larger than {SMALL_FILE // 1_000_000} MB and not in git: "
                            "no copy was kept",
                        )
                    )
                continue
            if current is not None and current[2] == sha:
                continue
            found.append(Change(path, sha))
        for path in after.files:
            if path not in before.files:
                found.append(Change(path, None))
        return found

    # -- git ---------------------------------------------------------------------------------
    async def _repository(self, root: Path) -> Repository | None:
        if root not in self._repos:
            self._repos[root] = await asyncio.to_thread(find_repository, root)
        return self._repos[root]

    def _git_dir(self, repo: Repository) -> Path:
        return self.state / "git" / hashlib.sha256(str(repo.top).encode()).hexdigest()[:12]

    async def _git_env(self, repo: Repository) -> dict[str, str]:
        """Our own git dir for the repository (Decision 45): its config and hooks are never read."""
        folder = self._git_dir(repo)
        await asyncio.to_thread(self._prepare_git_dir, folder, repo)
        return git_env(folder, repo.top)

    async def _bound(self, folder: Path) -> None:
        """Keep the private git dir's objects under `max_git_objects` (looked at most every
        `size_check_seconds`). Called with the snapshot lock held, before a tree is written."""
        now = time.monotonic()
        if now - self._size_checked.get(folder, float("-inf")) < self.size_check_seconds:
            return
        self._size_checked[folder] = now
        try:
            if await asyncio.to_thread(_tree_size, folder / "objects") > self.max_git_objects:
                await asyncio.to_thread(_drop_objects, folder, self.max_git_objects)
        except OSError as exc:
            log.warning("could not bound the snapshot objects in %s: %s", folder, exc)

    def _prepare_git_dir(self, folder: Path, repo: Repository) -> None:
        private_git_dir(folder, repo)
        index = folder / "index"
        if not index.exists() and (repo.git_dir / "index").is_file():
            # start from the repository's own index: files git already hashed are not hashed again
            try:
                shutil.copyfile(repo.git_dir / "index", index)
                os.chmod(index, 0o600)
            except OSError:
                pass

    def _pathspec(self, repo: Repository, root: Path) -> list[str]:
        spec = [os.path.relpath(root, repo.top), *BYTECODE_PATHSPEC]
        for folder in self.exclude:  # the state dir is never one of the workspace's changes
            if folder == root or folder.is_relative_to(root):
                spec.append(f":(exclude,literal){os.path.relpath(folder, repo.top)}")
        return spec

    async def _add(self, repo: Repository, root: Path) -> None:
        env = await self._git_env(repo)
        args = ["add", "-A", "--ignore-errors", "--", *self._pathspec(repo, root)]
        code, out, err = await run_git(repo.top, args, env)
        if code != 0 and (Path(env["GIT_DIR"]) / "index").exists() and b"index" in err:
            # A copied index git cannot use here (a split or sparse index): start a fresh one.
            (Path(env["GIT_DIR"]) / "index").unlink(missing_ok=True)
            code, out, err = await run_git(repo.top, args, env)
        if code != 0:
            log.info(
                "git add for a snapshot of %s said: %s",
                root,
                err.decode(errors="replace").strip()[:300],
            )

    async def _write_tree(self, repo: Repository, root: Path) -> str:
        await self._add(repo, root)
        code, out, err = await run_git(repo.top, ["write-tree"], await self._git_env(repo))
        if code != 0:
            raise OSError(0, f"git write-tree failed: {err.decode(errors='replace').strip()[:300]}")
        return out.decode().strip()

    async def _git_changes(self, repo: Repository, old: str) -> list[Change]:
        env = await self._git_env(repo)
        code, raw, err = await run_git(
            repo.top, ["diff-index", "--cached", "-r", "-z", "--no-renames", "--raw", old], env
        )
        if code != 0:
            raise OSError(0, f"git diff-index failed: {err.decode(errors='replace').strip()[:300]}")
        changes: list[Change] = []
        wanted: dict[str, Path] = {}  # old blob -> path, read back in one `cat-file --batch`
        parts = raw.decode("utf-8", errors="surrogateescape").split("\0")
        for meta, name in zip(parts[0::2], parts[1::2], strict=False):
            if not meta.startswith(":"):
                continue
            fields = meta[1:].split()
            old_mode, old_sha, status = fields[0], fields[2], fields[4][:1]
            path = (repo.top / name).resolve()
            if status == "A" or old_sha.strip("0") == "":
                changes.append(Change(path, None))
            elif old_mode.startswith("12") or old_mode.startswith("16"):  # a symlink or a submodule
                changes.append(
                    Change(path, None, False, "a symbolic link or submodule: not restored")
                )
            else:
                wanted.setdefault(old_sha, path)
                changes.append(Change(path, old_sha))
        contents = await self._blobs_of(repo, list(wanted), env) if wanted else {}
        for change in changes:
            if change.before is None or not change.restorable:
                continue
            content = contents.get(change.before)
            if content is None:
                change.before, change.restorable, change.reason = (
                    None,
                    False,
                    "its old content could not be read from git",
                )
            else:
                change.before = await asyncio.to_thread(self.blobs.put, content)
        return changes

    async def _blobs_of(
        self, repo: Repository, shas: list[str], env: dict[str, str]
    ) -> dict[str, bytes]:
        code, out, _ = await run_git(
            repo.top, ["cat-file", "--batch"], env, stdin="".join(f"{s}\n" for s in shas).encode()
        )
        found: dict[str, bytes] = {}
        at = 0
        while code == 0 and at < len(out):
            end = out.index(b"\n", at)
            header = out[at:end].split()
            at = end + 1
            if len(header) == 3 and header[1] == b"blob":
                size = int(header[2])
                found[header[0].decode()] = out[at : at + size]
                at += size + 1
        return found

    # -- outside git -------------------------------------------------------------------------
    def _walk(self, root: Path, snap: Snapshot) -> None:
        for name in fallback_walk(root, None):
            path = Path(name)
            if any(path.is_relative_to(folder) for folder in self.exclude) or is_bytecode(
                path.relative_to(root)
            ):
                continue
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


def is_bytecode(path: Path) -> bool:
    """A file of Python's bytecode cache: never one of the workspace's changes."""
    return path.suffix in BYTECODE_SUFFIXES or any(d in path.parts for d in BYTECODE_DIRS)


def _lease(folder: Path) -> int:
    """A shared lock on the git dir's `in-use` file (see Snapshot.leases)."""
    from agent_lsp.agent.fs.safeio import open_private, private_dir

    private_dir(folder)
    fd = open_private(folder / "in-use", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def _tree_size(folder: Path) -> int:
    total = 0
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _drop_objects(folder: Path, bound: int) -> None:
    """Delete the private objects and index, unless a snapshot still names a tree in them (its
    lease is held, here or in another process): then it is left for a later check."""
    from agent_lsp.agent.fs.safeio import open_private

    fd = open_private(folder / "in-use", os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(
                "snapshot objects in %s passed %d bytes but a snapshot still uses them: "
                "kept for now",
                folder,
                bound,
            )
            return
        shutil.rmtree(folder / "objects")
        (folder / "index").unlink(missing_ok=True)
        log.info(
            "snapshot objects in %s passed %d bytes: dropped "
            "(the next snapshot rebuilds its index)",
            folder,
            bound,
        )
    finally:
        os.close(fd)
