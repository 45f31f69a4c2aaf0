"""The agent's own git calls, made so that a repository cannot run code through them: the
repository is found without running git, git runs with a private GIT_DIR (the repository's
config, hooks and info are never read; its objects only as a read-only alternate), a fixed
environment without the API key, and `core.fsmonitor`/hooks off even when the user's global
config sets them (CONTRACT Decision 45). Also: which repositories carry config that executes,
so that a git command the user allowlisted asks first."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import fnmatch
import logging
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from agent_lsp.agent.exec.program_path import find_program, safe_path

log = logging.getLogger(__name__)

# -c wins over every config file, the user's global one included.
GIT_SAFE = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.quotePath=false",
    "-c",
    "core.untrackedCache=false",
]
# What git needs from the environment to find the user's global and system config and to run;
# everything else (the API key in any variable, GIT_* redirections) stays out.
_PASSED = (
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
)

# Repository config keys that make git run a program (Decision 45's list, and the other keys of
# git-config(1) that name a command). Section and key are case-insensitive, so the patterns
# are matched against the lower-cased name; `*` stands for a subsection.
EXECUTING_KEYS = (
    "core.fsmonitor",
    "core.hookspath",
    "core.sshcommand",
    "core.pager",
    "core.editor",
    "core.askpass",
    "core.gitproxy",
    "core.alternaterefscommand",
    "sequence.editor",
    "diff.external",
    "diff.*.textconv",
    "diff.*.command",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "merge.*.driver",
    "credential.helper",
    "credential.*.helper",
    "gpg.program",
    "gpg.*.program",
    "uploadpack.packobjectshook",
    "include.path",
    "includeif.*.path",
    "pager.*",
    "interactive.difffilter",
    "difftool.*.cmd",
    "mergetool.*.cmd",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "remote.*.vcs",
    "web.browser",
    "browser.*.cmd",
    "man.*.cmd",
    "ssh.variant",
    "sendemail.smtpserver",
    "sendemail.*.smtpserver",
    "sendemail.tocmd",
    "sendemail.cccmd",
    "sendemail.headercmd",
    "receive.procreceiverefs",
)
_NO_GIT = b"git was not found in the absolute entries of PATH"
_VALUE_EXECUTES = ("alias.*", "submodule.*.update")  # only when the value starts with "!"


@dataclass(frozen=True)
class Repository:
    top: Path  # the work tree's top folder
    git_dir: Path  # .git, or the folder a `.git` file points to (worktrees, submodules)
    common_dir: (
        Path  # where objects, config and hooks live (the main repository's .git for a worktree)
    )


def find_repository(folder: Path) -> Repository | None:
    """The repository holding folder, found by looking for `.git` upwards; git is not run (its
    discovery would read the repository's config)."""
    for candidate in (folder, *folder.parents):
        dot_git = candidate / ".git"
        try:
            if dot_git.is_dir():
                git_dir = dot_git.resolve()
            elif dot_git.is_file():
                text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
                if not text.startswith("gitdir:"):
                    continue
                git_dir = (candidate / text[len("gitdir:") :].strip()).resolve()
            else:
                continue
            if not (git_dir / "HEAD").is_file():
                continue
            common = git_dir
            if (git_dir / "commondir").is_file():
                common = (
                    git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
                ).resolve()
            return Repository(candidate.resolve(), git_dir, common)
        except OSError:
            continue
    return None


def base_env() -> dict[str, str]:
    from agent_lsp.agent.exec.keyguard import child_env

    env = {k: v for k, v in child_env().items() if k in _PASSED or k.startswith("LC_")}
    env["PATH"] = safe_path(env.get("PATH", ""))  # git looks programs up too (Decision 62)
    return env


def git_env(git_dir: Path, work_tree: Path, index: Path | None = None) -> dict[str, str]:
    env = base_env()
    env.update(
        GIT_DIR=str(git_dir),
        GIT_WORK_TREE=str(work_tree),
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        GIT_EDITOR="true",
        GIT_ASKPASS="/bin/false",
        GIT_NO_REPLACE_OBJECTS="1",
    )
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


def private_git_dir(folder: Path, repo: Repository) -> Path:
    """A git dir of our own for a repository's work tree: HEAD, refs, its own objects with the
    repository's as an alternate, a copy of info/exclude (ignore rules are data); no config of the
    repository, no hooks. Idempotent and cheap: run it off the event loop."""
    from agent_lsp.agent.fs.safeio import private_dir, write_private

    private_dir(folder)
    for sub in ("refs", "objects", "objects/info", "info"):
        private_dir(folder / sub)
    if not (folder / "HEAD").exists():
        write_private(folder / "HEAD", b"ref: refs/heads/agent-lsp-snapshot\n")
    if not (folder / "config").exists():
        write_private(folder / "config", b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
    alternates = f"{repo.common_dir / 'objects'}\n".encode()
    target = folder / "objects" / "info" / "alternates"
    if not target.exists() or target.read_bytes() != alternates:
        write_private(target, alternates)
    exclude = _read_small(repo.common_dir / "info" / "exclude")
    if _read_small(folder / "info" / "exclude") != exclude:
        write_private(folder / "info" / "exclude", exclude)
    return folder


def _read_small(path: Path, limit: int = 1 << 20) -> bytes:
    from agent_lsp.agent.fs.safeio import read_regular_sync

    try:
        return read_regular_sync(path, limit)
    except (OSError, ValueError):
        return b""


async def run_git(
    cwd: Path, args: list[str], env: dict[str, str], stdin: bytes | None = None
) -> tuple[int, bytes, bytes]:
    """git with the safe overrides; killed if the caller is cancelled (no git left running)."""
    git = find_program("git", env.get("PATH", ""))
    if git is None:
        return 127, b"", _NO_GIT
    try:
        proc = await asyncio.create_subprocess_exec(
            git,
            *GIT_SAFE,
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        return 127, b"", str(exc).encode()
    try:
        out, err = await proc.communicate(stdin)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
        raise
    return proc.returncode or 0, out, err


def run_git_sync(cwd: Path, args: list[str], env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """run_git for code off any event loop (the `agent-lsp worktrees` commands, a worktree made
    before the run starts); a Ctrl-C kills git (subprocess.run does)."""
    git = find_program("git", env.get("PATH", ""))
    if git is None:
        return 127, b"", _NO_GIT
    try:
        proc = subprocess.run(
            [git, *GIT_SAFE, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        return 127, b"", str(exc).encode()
    return proc.returncode, proc.stdout, proc.stderr


def repository_env(repo: Repository) -> dict[str, str]:
    """For the few calls that must change the repository itself (a worktree registered, a branch
    made or dropped): git reads its config, so only calls that run no program may use this; hooks
    and fsmonitor are off by GIT_SAFE, and a checkout (filters) never runs with it."""
    env = base_env()
    env.update(
        GIT_DIR=str(repo.git_dir),
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        GIT_EDITOR="true",
        GIT_ASKPASS="/bin/false",
        GIT_NO_REPLACE_OBJECTS="1",
    )
    return env


def resolve_head(git_dir: Path, common_dir: Path) -> tuple[str | None, str | None]:
    """(commit, branch ref) of a work tree's HEAD read from the files, without git (its config is
    not read): (None, ref) for an unborn branch or refs git keeps elsewhere (reftable)."""
    head = _read_small(git_dir / "HEAD").decode(errors="replace").strip()
    if not head.startswith("ref:"):
        return (head or None), None
    ref = head[len("ref:") :].strip()
    if not ref.startswith("refs/") or ".." in ref.split("/"):
        return None, None
    for folder in dict.fromkeys((git_dir, common_dir)):
        loose = _read_small(folder / ref).decode(errors="replace").strip()
        if loose and not loose.startswith("ref:"):
            return loose, ref
    for line in (
        _read_small(common_dir / "packed-refs", 1 << 28).decode(errors="replace").splitlines()
    ):
        sha, _, name = line.partition(" ")
        if name.strip() == ref and not line.startswith(("#", "^")):
            return sha, ref
    return None, ref


@contextlib.asynccontextmanager
async def held(lock_file: Path, wait: float = 30.0) -> AsyncIterator[None]:
    """An exclusive lock on lock_file between processes (two servers or `agent-lsp run`s on one
    workspace share the private index), polled so the event loop never blocks; after `wait`
    seconds the caller goes on without it (a stuck process must not stop every snapshot)."""
    from agent_lsp.agent.fs.safeio import open_private, private_dir

    private_dir(lock_file.parent)
    fd = open_private(lock_file, os.O_RDWR | os.O_CREAT)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    log.warning("%s stayed locked for %g s: going on without it", lock_file, wait)
                    break
                await asyncio.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


# -- repositories whose config executes ---------------------------------------------------------
async def executing_config(folder: Path) -> list[str]:
    """What in the repository holding folder would make git run a program: config keys of its own
    config files (read by git itself with includes off, so the parse is git's), and hooks."""
    repo = await asyncio.to_thread(find_repository, folder)
    if repo is None:
        return []
    found: list[str] = []
    for config in dict.fromkeys((repo.common_dir / "config", repo.git_dir / "config.worktree")):
        if not config.is_file():
            continue
        # Outside any repository (cwd /, no GIT_DIR): git only parses that one file.
        code, out, _ = await run_git(
            Path("/"),
            ["config", "--file", str(config), "--no-includes", "--list", "-z"],
            base_env(),
        )
        if code != 0:
            found.append(f"{config} (git cannot parse it)")
            continue
        for entry in out.decode("utf-8", errors="replace").split("\0"):
            name, _, value = entry.partition("\n")
            if name and _executes(name, value):
                found.append(name)
    found += await asyncio.to_thread(_hooks, repo)
    return list(dict.fromkeys(found))


def _executes(name: str, value: str) -> bool:
    low = name.lower()
    if any(fnmatch.fnmatchcase(low, pattern) for pattern in EXECUTING_KEYS):
        return True
    return value.lstrip().startswith("!") and any(
        fnmatch.fnmatchcase(low, p) for p in _VALUE_EXECUTES
    )


def _hooks(repo: Repository) -> list[str]:
    found = []
    for git_dir in dict.fromkeys((repo.git_dir, repo.common_dir)):
        try:
            entries = list((git_dir / "hooks").iterdir())
        except OSError:
            continue
        found += [
            f"hook {e.name}"
            for e in entries
            if not e.name.endswith(".sample") and os.access(e, os.X_OK)
        ]
    return found


# A config line whose value is a credential: `extraheader = AUTHORIZATION: basic …` (what
# actions/checkout persists), a password or token key; and a URL's user:password@.
_SECRET_KEY = re.compile(
    r"^(\s*(?:extraheader|[\w.-]*(?:password|passwd|token|secret|credential)[\w.-]*)\s*=\s*)"
    r"(\S.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_URL_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@", re.IGNORECASE)


def redact_git_secrets(text: str) -> str:
    """A file from a `.git` folder as the model may see it (Decision 62): credential values in
    its config and user:password in its URLs replaced by `[redacted]`."""
    text = _SECRET_KEY.sub(lambda m: f"{m.group(1)}[redacted]", text)
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}[redacted]@", text)


def mentions_git(argv: list[str]) -> bool:
    """True when a command line (parsed with shell punctuation as separate tokens) runs git."""
    return any(os.path.basename(token) == "git" for token in argv)
