"""Issue 12, in-process: what checkpoints cost an edit, and what change detection costs a command.

- checkpoint cost per edit: `run_task` on a DiskWorkspace with N `edit_file` calls, each on a
  different file (so every edit is a run's first change to its file: a blob written and the
  manifest saved), with `RunOptions(checkpoints=CheckpointStore(...))` and without, runs
  interleaved. Per edit: the time between the model's answer holding the call and the next
  request (the tool, its checkpoint, the bookkeeping); the figure is the difference of the
  medians. The run's close (the checkpoint's final save and prune) is reported apart.
- change detection around `run_command`: `Snapshotter.take()` (before the command) and
  `Snapshotter.changes(before)` (after it: a snapshot and the diff, with the old content of each
  changed file kept) in a committed git work tree of 20,000 files with a few local changes,
  against `git status` in the same tree, interleaved. The first snapshot of a fresh state dir
  copies the repository's index: reported apart as the cold figure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Config, median, tag
from benchmarks.model_process import ModelProcess
from benchmarks.turns import AllowAll, our_settings, turn_gaps

EDIT_MARK = "VALUE = 0"


# -- checkpoint cost per edit ------------------------------------------------------------------
def source_files(root: Path, count: int, prefix: str = "mod") -> list[str]:
    """`count` small Python modules (~2 KB) holding EDIT_MARK once; rewritten to this state."""
    names = []
    for i in range(count):
        name = f"src/{prefix}{i:03d}.py"
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def helper_{i}_{n}(value):\n    return value * {n} + {i}  # filler\n\n" for n in range(24))
        path.write_text(f'"""Module {i}."""\n\n{EDIT_MARK}\n\n{body}', encoding="utf-8")
        names.append(name)
    return names


def edit_script(files: list[str], ttft: float) -> list[dict[str, Any]]:
    """One edit_file per reply, each on another file, then a final answer."""
    replies: list[dict[str, Any]] = [
        {"text": "", "ttft": ttft, "tool_calls": [{"name": "edit_file", "arguments": {
            "path": f, "old_text": EDIT_MARK, "new_text": "VALUE = 1"}}]} for f in files]
    replies.append({"text": "Edited them all.", "ttft": ttft})
    return replies


async def checkpoint_cost(cfg: Config, model: ModelProcess) -> dict[str, Any]:
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import RunOptions, Session, run_task
    from agent_lsp.agent.state.checkpoints import CheckpointStore
    from agent_lsp.settings import state_dir

    root = (cfg.work / "ws-checkpoints").resolve()
    count = 10 if cfg.quick else 50
    files = source_files(root, count)
    store = CheckpointStore(state_dir(), [root])  # one per workspace and process, as the host keeps it
    settings = our_settings(model.base_url, cfg.work)
    per_edit: dict[str, list[float]] = {"plain": [], "checkpoints": []}
    close: dict[str, list[float]] = {"plain": [], "checkpoints": []}
    cpu: dict[str, list[float]] = {"plain": [], "checkpoints": []}
    for rep in range(cfg.warmup + cfg.runs):
        order = ("plain", "checkpoints") if rep % 2 == 0 else ("checkpoints", "plain")  # interleaved
        for variant in order:
            source_files(root, count)  # every run edits the same pristine files
            key = tag(f"ckpt-{variant}")
            model.add(key, edit_script(files, cfg.ttft))
            options = RunOptions(checkpoints=store if variant == "checkpoints" else None)
            t0, c0 = time.monotonic(), time.process_time()
            report = await run_task(f"[{key}] Edit the {count} modules.", session=Session(), settings=settings,
                                    workspace=DiskWorkspace([root]), approver=AllowAll(), emit=lambda _e: None,
                                    options=options)
            t1, c1 = time.monotonic(), time.process_time()
            served = model.log(key)
            model.forget(key)
            if str(report.stop_reason) != "done" or len(served) != count + 1 or len(report.edited_files) != count:
                raise RuntimeError(f"checkpoints/{variant}: {report.stop_reason}, {len(served)} model calls, "
                                   f"{len(report.edited_files)} files edited: {report.summary}")
            if variant == "checkpoints" and not report.rewindable:
                raise RuntimeError("a run with checkpoints was not rewindable")
            if rep >= cfg.warmup:
                gaps = turn_gaps(t0, served, t1)
                per_edit[variant] += gaps[1:-1]  # answer with edit i -> request i + 1
                close[variant].append(gaps[-1])  # last answer -> run_task returned
                cpu[variant].append((c1 - c0) / count)
    return {"edits": count, "plain": median(per_edit["plain"]), "checkpoints": median(per_edit["checkpoints"]),
            "close_plain": median(close["plain"]), "close_checkpoints": median(close["checkpoints"]),
            "cpu_plain": median(cpu["plain"]), "cpu_checkpoints": median(cpu["checkpoints"]),
            "samples": len(per_edit["plain"])}


# -- change detection around run_command -------------------------------------------------------
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.invalid", "GIT_CONFIG_NOSYSTEM": "1"}


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ENV, HOME=str(root.parent))  # no user config: a plain repository
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout


def make_repo(root: Path, files: int) -> None:
    """A committed git work tree of `files` small files, 100 per folder, then a few local
    changes (two edited files, one new one): a workspace as a command finds it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("build/\n*.log\n")
    for i in range(files - 1):
        folder = root / f"pkg{i // 2000:02d}" / f"mod{(i // 100) % 20:02d}"
        if i % 100 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:05d}.py").write_text(f"# file {i}\nVALUE = {i}\n\ndef f_{i}(x):\n    return x + {i}\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    (root / "pkg00" / "mod00" / "f00000.py").write_text("# edited locally\n")
    (root / "pkg00" / "mod00" / "f00001.py").write_text("# edited locally too\n")
    (root / "NOTES.md").write_text("untracked notes\n")


async def timed_git_status(root: Path) -> float:
    """`git status` as a user types it (its output read whole), timed like the snapshots:
    an asyncio subprocess on the same event loop."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec("git", "status", cwd=root, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"git status failed ({proc.returncode})")
    return time.monotonic() - t0


def simulate_command(root: Path, rep: int) -> int:
    """What a command does between the snapshots: two files changed, one created. Returns how
    many files changed."""
    (root / "pkg00" / "mod01" / "f00100.py").write_text(f"# changed by command {rep}\n")
    (root / "pkg00" / "mod02" / "f00200.py").write_text(f"# changed by command {rep}\nVALUE = {rep}\n")
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / f"out{rep}.o").write_text("ignored output\n")  # ignored: not a change
    (root / f"generated_{rep}.txt").write_text(f"new file {rep}\n")
    return 3


async def change_detection(cfg: Config) -> dict[str, Any]:
    from agent_lsp.agent.state.snapshots import BlobStore, Snapshotter

    count = 2_000 if cfg.quick else 20_000
    root = (cfg.work / "ws-git").resolve()
    t0 = time.monotonic()
    await asyncio.to_thread(make_repo, root, count)
    made = time.monotonic() - t0
    state = cfg.work / "snapshot-state"
    status: list[float] = []
    before_times: list[float] = []
    after_times: list[float] = []
    cold: list[float] = []
    found: list[int] = []
    warm = Snapshotter(state / "warm", [root], BlobStore(state / "warm" / "blobs"))
    await warm.take()  # the warm snapshotter's own first (index-copying) snapshot
    for rep in range(cfg.warmup + cfg.runs):
        fresh = Snapshotter(state / f"cold{rep}", [root], BlobStore(state / f"cold{rep}" / "blobs"))
        c0 = time.monotonic()
        await fresh.take()  # copies .git/index, then adds and writes its tree
        c1 = time.monotonic()
        s1 = await timed_git_status(root)
        b0 = time.monotonic()
        before = await warm.take()
        b1 = time.monotonic()
        expected = simulate_command(root, rep)
        a0 = time.monotonic()
        changes = await warm.changes(before)
        a1 = time.monotonic()
        s2 = await timed_git_status(root)
        if len(changes) != expected:
            raise RuntimeError(f"change detection found {len(changes)} changes, expected {expected}: "
                               f"{[str(c.path) for c in changes][:10]}")
        if rep >= cfg.warmup:
            cold.append(c1 - c0)
            status += [s1, s2]
            before_times.append(b1 - b0)
            after_times.append(a1 - a0)
            found.append(len(changes))
        shutil.rmtree(state / f"cold{rep}", ignore_errors=True)
    index_bytes = (root / ".git" / "index").stat().st_size
    return {"files": count, "made": made, "status": median(status), "before": median(before_times),
            "after": median(after_times), "cold": median(cold), "changes": found[0] if found else 0,
            "index_bytes": index_bytes}
