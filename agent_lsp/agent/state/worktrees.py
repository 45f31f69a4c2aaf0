"""Git worktrees for `agent-lsp run --worktree` (CONTRACT Decision 42): one per NAME under
`<base>/<workspace hash>/NAME` on a branch `agent/NAME` from HEAD, with the workspace's
uncommitted changes carried over (a first commit), each run's work committed on top (Decision
70); which are running (a lock its run holds), which have
uncommitted changes, and their removal. Every git call is neutralised (Decision 45): the
repository's config is read only by the two calls that register or drop a worktree and its
branch, which run no program; what reads or writes files (the carried-over state, the checkout,
the dirty check) runs with a private git dir that never reads the repository's config."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agent_lsp.agent.fs.safeio import open_private, private_dir, write_private
from agent_lsp.agent.state.gitsafe import (
    Repository,
    find_repository,
    git_env,
    private_git_dir,
    repository_env,
    resolve_head,
    run_git_sync,
)
from agent_lsp.agent.state.sessions import iso, workspace_key

NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
BRANCH_PREFIX = "agent/"
CARRIED_MESSAGE = "carried over from the workspace"
# Decision 70: every commit agent-lsp makes says so, whoever's config runs the run.
AUTHOR = {
    "GIT_AUTHOR_NAME": "agent-lsp",
    "GIT_AUTHOR_EMAIL": "agent-lsp@localhost",
    "GIT_COMMITTER_NAME": "agent-lsp",
    "GIT_COMMITTER_EMAIL": "agent-lsp@localhost",
}
LOCK_WAIT = 30.0  # seconds a creation or removal waits for another one on the same workspace


class WorktreeError(Exception):
    """A worktree cannot be made, used or removed; the message says why, for a person."""


def valid_name(name: str) -> bool:
    return NAME.fullmatch(name) is not None and name not in (".", "..")


@dataclass(frozen=True)
class Worktree:
    name: str
    path: Path  # the worktree's top folder
    branch: str  # the branch it was made on (`agent/NAME`)
    run_id: str | None  # the last run that used it
    created: float
    git_dir: Path  # its admin folder in the repository (`.git/worktrees/<id>`)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": str(self.path),
            "branch": self.branch,
            "runId": self.run_id,
            "created": self.created,
            "gitDir": str(self.git_dir),
        }


class Claim:
    """The lock a running `agent-lsp run` holds on its worktree, released when the process ends
    however it ends (flock): "running" needs no pid file that a crash would leave behind."""

    def __init__(self, fd: int):
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class WorktreeStore:
    """The worktrees of one workspace: folders under `base/<hash>`, their records and locks in
    `base/<hash>.state` (outside every worktree: nothing of ours is ever one of its changes)."""

    def __init__(self, base: Path, workspace: Path):
        self.workspace = workspace.resolve()
        key = workspace_key(self.workspace)
        self.dir = base / key
        self.state = base / f"{key}.state"

    def path(self, name: str) -> Path:
        return self.dir / name

    # -- running ----------------------------------------------------------------------------
    def claim(self, name: str, wait: float = 1.0) -> Claim | None:
        """Hold NAME's run lock, or None if a run holds it. Waits a little: `worktrees` looking
        at the lock holds it for a moment."""
        fd = open_private(self.state / f"{name}.lock", os.O_RDWR | os.O_CREAT)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return Claim(fd)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    return None
                time.sleep(0.02)

    def running(self, name: str) -> bool:
        claim = self.claim(name, wait=0.0)
        if claim is None:
            return True
        claim.release()
        return False

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """One creation or removal at a time per workspace (two processes may try at once)."""
        fd = open_private(self.state / ".lock", os.O_RDWR | os.O_CREAT)
        try:
            deadline = time.monotonic() + LOCK_WAIT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise WorktreeError(
                            "another agent-lsp is making or removing a worktree here; try again"
                        ) from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)

    # -- records ----------------------------------------------------------------------------
    def get(self, name: str) -> Worktree | None:
        try:
            data = json.loads((self.state / f"{name}.json").read_text(encoding="utf-8"))
            return Worktree(
                data["name"],
                Path(data["path"]),
                data["branch"],
                data.get("runId"),
                float(data["created"]),
                Path(data["gitDir"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def all(self) -> list[Worktree]:
        try:
            names = [p.stem for p in self.state.glob("*.json")]
        except OSError:
            return []
        found = [w for w in map(self.get, names) if w is not None]
        return sorted(found, key=lambda w: w.created)

    def _save(self, worktree: Worktree) -> None:
        write_private(self.state / f"{worktree.name}.json", json.dumps(worktree.to_dict()).encode())

    def record_run(self, worktree: Worktree, run_id: str) -> Worktree:
        updated = Worktree(
            worktree.name,
            worktree.path,
            worktree.branch,
            run_id,
            worktree.created,
            worktree.git_dir,
        )
        self._save(updated)
        return updated

    # -- making one -------------------------------------------------------------------------
    def create(self, name: str, run_id: str, exclude: tuple[Path, ...] = ()) -> Worktree:
        """A new worktree NAME on a new branch `agent/NAME` from the workspace's HEAD, holding
        the workspace's tracked changes (staged or not) and its untracked files that are not
        ignored, committed on the branch as "carried over from the workspace" (Decision 70).
        WorktreeError when it cannot be made (and nothing is left behind)."""
        repo = find_repository(self.workspace)
        if repo is None:
            raise WorktreeError(
                f"{self.workspace} is not in a git repository (--worktree needs one)"
            )
        if (repo.common_dir / "reftable").is_dir():
            raise WorktreeError(
                "this repository keeps its refs in the reftable format, "
                "which --worktree does not support"
            )
        head, _ = resolve_head(repo.git_dir, repo.common_dir)
        if head is None:
            raise WorktreeError(
                "the repository has no commit yet (HEAD names none): "
                "commit once, then use --worktree"
            )
        path, branch = self.path(name), BRANCH_PREFIX + name
        with self._changing():
            if path.exists():
                raise WorktreeError(
                    f"{path} already exists but is not a worktree agent-lsp knows; "
                    "remove that folder first"
                )
            private_dir(self.dir)
            with tempfile.TemporaryDirectory(dir=private_dir(self.state)) as tmp:
                private = private_git_dir(Path(tmp) / "git", repo)
                _, current = _carried_over(repo, private, head, tuple(p.resolve() for p in exclude))
                _register(repo, path, branch, head)
                try:
                    git_dir = _admin_dir(path)
                    # Decision 70: what was carried over is the branch's first commit, so that
                    # `git diff agent/NAME~1 agent/NAME` is exactly the run's change.
                    _check_out(repo, private, path, git_dir, current)
                    env = git_env(private, path, git_dir / "index")
                    env["GIT_OBJECT_DIRECTORY"] = str(repo.common_dir / "objects")
                    carried = _commit_tree(path, env, current, head, CARRIED_MESSAGE)
                    _move_branch(repo, branch, carried, head)
                except BaseException:
                    _unregister(repo, path, branch, head)
                    raise
            worktree = Worktree(name, path, branch, run_id, time.time(), git_dir)
            self._save(worktree)
            return worktree

    # -- looking at one ---------------------------------------------------------------------
    def branch_of(self, worktree: Worktree) -> str:
        """The branch checked out there now (the run or the user may have switched)."""
        _, ref = resolve_head(
            worktree.git_dir, worktree.git_dir / _read_text(worktree.git_dir / "commondir")
        )
        if ref is None:
            return "(detached HEAD)"
        return ref.removeprefix("refs/heads/")

    def changed(self, worktree: Worktree) -> list[str] | None:
        """The paths with uncommitted changes (staged, unstaged, untracked not ignored), in the
        worktree and in every repository nested in it (git sees one as a commit id only: its
        own uncommitted files would go with the folder), or None when git cannot tell (counted
        as changed: nothing is removed on a guess)."""
        repo = find_repository(worktree.path)
        if repo is None or repo.git_dir != worktree.git_dir.resolve():
            return None
        found = self._changed_in(repo)
        for nested in _nested_repositories(worktree.path):
            inner = find_repository(nested)
            if found is None or inner is None or inner.top != nested.resolve():
                return None
            more = self._changed_in(inner)
            if more is None:
                return None
            prefix = os.path.relpath(nested, worktree.path)
            found += [f"{prefix}/{name}" for name in more]
        return found

    def _changed_in(self, repo: Repository) -> list[str] | None:
        head, _ = resolve_head(repo.git_dir, repo.common_dir)
        if head is None:
            return None
        with tempfile.TemporaryDirectory(dir=private_dir(self.state)) as tmp:
            # New objects land here, not in the repository.
            private = private_git_dir(Path(tmp) / "git", repo)
            index = private / "index"
            env = git_env(private, repo.top, index)
            try:
                shutil.copyfile(repo.git_dir / "index", index)
            except OSError:
                return None
            trees = [_git(repo.top, ["rev-parse", "--verify", "-q", f"{head}^{{tree}}"], env)]
            trees.append(_git(repo.top, ["write-tree"], env))  # what is staged
            run_git_sync(repo.top, ["add", "-A", "--ignore-errors", "--", "."], env)
            trees.append(_git(repo.top, ["write-tree"], env))  # and what the files hold
            if None in trees:
                return None
            if len(set(trees)) == 1:
                return []
            diff = (
                _git(
                    repo.top,
                    ["diff-tree", "-r", "--name-only", "-z", str(trees[0]), str(trees[2])],
                    env,
                )
                or ""
            )
            names = [n for n in diff.split("\0") if n]
            return names or ["(staged changes)"]

    # -- committing a run's work ------------------------------------------------------------
    def commit_run(self, worktree: Worktree, message: str) -> str:
        """The worktree's files (what is not ignored) as a commit on its branch, on top of the
        branch's last commit; its index then matches, so the worktree is clean. Git runs in a
        private git dir (no filter, hook or fsmonitor of the repository runs); only the branch's
        move reads the repository's config (hooks off). Returns the commit; WorktreeError when
        it cannot be made (the files stay as they are)."""
        repo = find_repository(worktree.path)
        if repo is None or repo.git_dir != worktree.git_dir.resolve():
            raise WorktreeError(f"{worktree.path} is no longer this worktree's folder")
        head, ref = resolve_head(repo.git_dir, repo.common_dir)
        if head is None or ref != f"refs/heads/{worktree.branch}":
            raise WorktreeError(
                f"the worktree is not on branch {worktree.branch} any more "
                f"({ref or 'detached HEAD'}); commit there yourself"
            )
        with tempfile.TemporaryDirectory(dir=private_dir(self.state)) as tmp:
            private = private_git_dir(Path(tmp) / "git", repo)
            index = private / "index"
            env = git_env(private, repo.top, index)
            env["GIT_OBJECT_DIRECTORY"] = str(repo.common_dir / "objects")
            with contextlib.suppress(OSError):
                shutil.copyfile(repo.git_dir / "index", index)  # files already hashed stay so
            run_git_sync(repo.top, ["add", "-A", "--ignore-errors", "--", "."], env)
            tree = _git(repo.top, ["write-tree"], env)
            if tree is None:
                raise WorktreeError("git could not record the worktree's files")
            commit = _commit_tree(repo.top, env, tree, head, message)
            _move_branch(repo, worktree.branch, commit, head)
            shutil.copyfile(index, repo.git_dir / "index")
        return commit

    # -- removing one -----------------------------------------------------------------------
    def remove(self, worktree: Worktree) -> None:
        """Its folder, its admin folder in the repository and our record; the branch stays.
        No git runs: this is what `git worktree remove --force` does, without git reading the
        repository's config."""
        with self._changing():
            common = worktree.git_dir / _read_text(worktree.git_dir / "commondir")
            points_back = os.path.realpath(
                _read_text(worktree.git_dir / "gitdir") or "/nonexistent"
            )
            if (
                worktree.git_dir.parent.name == "worktrees"
                and points_back == os.path.realpath(worktree.path / ".git")
                and os.path.realpath(common) == os.path.realpath(worktree.git_dir.parent.parent)
            ):
                # Only the admin folder of this very worktree.
                shutil.rmtree(worktree.git_dir, ignore_errors=True)
            if worktree.path.is_relative_to(self.dir):
                shutil.rmtree(worktree.path, ignore_errors=True)
            (self.state / f"{worktree.name}.json").unlink(missing_ok=True)


def _nested_repositories(top: Path) -> list[Path]:
    """The folders under top (not top itself) holding a `.git`, found without following links
    or entering a `.git`."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(top, onerror=None, followlinks=False):
        dirs[:] = [d for d in dirs if d != ".git"]
        if folder != str(top) and (".git" in files or os.path.isdir(os.path.join(folder, ".git"))):
            found.append(Path(folder))
    return found


def _carried_over(
    repo: Repository, private: Path, head: str, exclude: tuple[Path, ...]
) -> tuple[str, str]:
    """(staged tree, current tree) of the workspace's repository, computed in a private git dir
    (the repository's filters and fsmonitor never run) whose new objects go straight into the
    repository's object store, where the worktree's index will need them."""
    index = private / "index"
    env = git_env(private, repo.top, index)
    env["GIT_OBJECT_DIRECTORY"] = str(repo.common_dir / "objects")
    with contextlib.suppress(OSError):
        # Files git already hashed are not hashed again.
        shutil.copyfile(repo.git_dir / "index", index)
    head_tree = _git(repo.top, ["rev-parse", "--verify", "-q", f"{head}^{{tree}}"], env)
    if head_tree is None:
        raise WorktreeError(f"git cannot read the commit HEAD names ({head})")
    staged = _git(repo.top, ["write-tree"], env) if index.exists() else None
    # No index, or one git cannot use here (split, sparse, unmerged): start from HEAD.
    if staged is None:
        index.unlink(missing_ok=True)
        staged = head_tree
        _git(repo.top, ["read-tree", head_tree], env)
    # Our own folders (state, data) never travel, should the repository hold them (a home folder).
    spec = ["."] + [
        f":(exclude,literal){os.path.relpath(p, repo.top)}"
        for p in exclude
        if p.is_relative_to(repo.top)
    ]
    run_git_sync(repo.top, ["add", "-A", "--ignore-errors", "--", *spec], env)
    current = _git(repo.top, ["write-tree"], env)
    if current is None:
        raise WorktreeError("git could not record the workspace's uncommitted changes")
    return staged, current


def _register(repo: Repository, path: Path, branch: str, head: str) -> None:
    """`git worktree add --no-checkout -b BRANCH PATH HEAD`: nothing is checked out (no filter),
    hooks and fsmonitor are off."""
    code, _, err = run_git_sync(
        repo.top,
        ["worktree", "add", "--no-checkout", "-b", branch, str(path), head],
        repository_env(repo),
    )
    if code != 0:
        said = err.decode(errors="replace").strip().splitlines()
        if said and f"'{branch}' already exists" in said[-1]:
            raise WorktreeError(
                f"branch {branch} already exists (kept when its worktree was removed?): "
                f"delete it with `git branch -D {branch}`, or pick another NAME"
            )
        raise WorktreeError(
            f"git could not make the worktree: {said[-1] if said else f'exit {code}'}"
        )


def _commit_tree(cwd: Path, env: dict[str, str], tree: str, parent: str, message: str) -> str:
    """A commit of tree on parent by agent-lsp (Decision 70); never signed (no program runs)."""
    env = {**env, **AUTHOR}
    commit = _git(cwd, ["commit-tree", "--no-gpg-sign", tree, "-p", parent, "-m", message], env)
    if commit is None:
        raise WorktreeError("git could not make the commit")
    return commit


def _move_branch(repo: Repository, branch: str, commit: str, old: str) -> None:
    """The branch to commit, only if it still is at old (no one moved it meanwhile); the one
    call that writes the repository's refs (hooks off by GIT_SAFE; it runs no program)."""
    code, _, err = run_git_sync(
        repo.top,
        ["update-ref", "-m", "agent-lsp", f"refs/heads/{branch}", commit, old],
        repository_env(repo),
    )
    if code != 0:
        said = err.decode(errors="replace").strip().splitlines()
        raise WorktreeError(
            f"git could not move branch {branch}: {said[-1] if said else f'exit {code}'}"
        )


def _unregister(repo: Repository, path: Path, branch: str, head: str) -> None:
    """Undo _register after a failed checkout: the folder, the admin folder, the new branch."""
    with contextlib.suppress(OSError, WorktreeError):
        shutil.rmtree(_admin_dir(path), ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)
    run_git_sync(repo.top, ["update-ref", "-d", f"refs/heads/{branch}", head], repository_env(repo))


def _check_out(repo: Repository, private: Path, path: Path, git_dir: Path, current: str) -> None:
    """The files of `current` written into the new worktree, its index set to them, by git in a
    private git dir (no config of the repository: no smudge filter, no hook)."""
    env = git_env(private, path, git_dir / "index")
    env["GIT_OBJECT_DIRECTORY"] = str(repo.common_dir / "objects")
    if _git(path, ["read-tree", "--reset", "-u", current], env) is None:
        raise WorktreeError("git could not write the files into the worktree")


def _admin_dir(path: Path) -> Path:
    text = _read_text(path / ".git")
    if not text.startswith("gitdir:"):
        raise WorktreeError(f"{path}/.git does not name the worktree's git folder")
    return (path / text[len("gitdir:") :].strip()).resolve()


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _git(cwd: Path, args: list[str], env: dict[str, str]) -> str | None:
    """git's stdout (stripped), or None when it failed."""
    code, out, _ = run_git_sync(cwd, args, env)
    if code != 0:
        return None
    return out.decode(errors="replace").strip()


def created_at(worktree: Worktree) -> str:
    return iso(worktree.created)
