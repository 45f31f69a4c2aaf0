"""`agent-lsp run --worktree [NAME]` and `agent-lsp worktrees [remove NAME]` (CONTRACT Decision
42): a run in its own git worktree under the data dir, on a branch `agent/NAME`, with the
workspace's uncommitted changes carried over; the list of a workspace's worktrees; their
removal, refused while the run runs or when it would lose uncommitted work."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from agent_lsp.agent.display import for_terminal
from agent_lsp.agent.state.gitsafe import find_repository
from agent_lsp.agent.state.session import new_id
from agent_lsp.agent.state.worktrees import (
    Claim,
    Worktree,
    WorktreeError,
    WorktreeStore,
    created_at,
    valid_name,
)
from agent_lsp.terminal.style import Style

EXIT_REFUSED = 1
EXIT_USAGE = 2
NAME_RULE = "a worktree NAME is 1 to 64 letters, digits, '.', '_' or '-'"


def data_dir() -> Path:
    """Not the state dir: the sandbox hides that one, and a worktree is where commands write."""
    import platformdirs

    return Path(platformdirs.user_data_dir("agent-lsp"))


def store_for(workspace: Path) -> WorktreeStore:
    return WorktreeStore(data_dir() / "worktrees", workspace)


@dataclass
class WorktreeRun:
    """The worktree a run works in, held (its lock) until the process ends."""

    name: str
    path: Path  # the worktree's top folder
    branch: str
    workspace: Path  # the run's workspace: the worktree, or the same subfolder of it
    origin: Path  # the workspace the user named
    run_id: str
    claim: Claim
    not_committed: str | None = None  # why the run's work is not on its branch (finish)

    def to_dict(self) -> dict[str, str]:
        return {"path": str(self.path), "branch": self.branch}

    def finish(self, task: str) -> None:
        """Decision 70: the run's work committed on its branch as "agent-lsp <runId>: <the
        prompt's first line>", on top of what was carried over (or of the session's last run)."""
        first = next((line.strip() for line in task.splitlines() if line.strip()), "")
        try:
            store = store_for(self.origin)
            worktree = store.get(self.name)
            if worktree is None:
                raise WorktreeError("agent-lsp's record of the worktree is gone")
            store.commit_run(worktree, f"agent-lsp {self.run_id}: {first}".rstrip())
        except (WorktreeError, OSError) as exc:
            self.not_committed = str(exc)

    def last_line(self) -> str:
        where = f"worktree: {self.path} · branch {self.branch}"
        if self.not_committed is not None:
            return for_terminal(f"{where} · not committed: {self.not_committed}")
        b = self.branch
        return for_terminal(
            f"{where} · see the run's change: git diff {b}~1 {b} · take it: git merge {b}"
        )

    def continue_hint(self, session_id: str) -> str:
        return (
            f'run `agent-lsp run --session {session_id} --worktree {self.name} "..."` '
            f"in {self.origin} "
            f"to continue in worktree {self.path}"
        )

    def rewind_command(self, run_id: str) -> str:
        return f"{run_id} --workspace {shlex.quote(str(self.workspace))}"


def enter_worktree(
    name: str, workspace: Path, session_id: str | None, err: TextIO | None = None
) -> WorktreeRun | int:
    """The worktree for a run: NAME's if it exists and is idle (reused as it is), else a new one
    (named after the run when no NAME is given). An exit code instead when there can be none."""
    err = err or sys.stderr
    run_id = new_id("r")
    if not name and session_id is not None:
        return _say(
            err, "--session with --worktree needs the worktree's NAME (see `agent-lsp worktrees`)"
        )
    name = name or run_id
    if not valid_name(name):
        return _say(
            err,
            f"--worktree {name!r}: {NAME_RULE} (put the task first to name it after the run: "
            '`agent-lsp run "TASK" --worktree`)',
        )
    repo = find_repository(workspace.resolve())
    if repo is None:
        return _say(err, f"--worktree needs a git repository, and {workspace} is not in one")
    try:
        store = store_for(workspace)
        claim = store.claim(name)
        if claim is None:
            known = store.get(name)
            return _say(
                err,
                f"worktree {name} is in use by a running run "
                f"({known.run_id if known else 'unknown'}); "
                "wait for it, or pick another NAME",
            )
        try:
            known = store.get(name)
            if known is not None and known.path.is_dir():
                worktree = store.record_run(known, run_id)
            else:
                from agent_lsp.settings import state_dir

                worktree = store.create(name, run_id, exclude=(state_dir(), data_dir()))
        except BaseException:
            claim.release()
            raise
    except WorktreeError as exc:
        return _say(err, str(exc))
    except OSError as exc:
        return _say(err, f"the worktree could not be made: {exc}")
    except KeyboardInterrupt:
        err.write("\ncancelled\n")
        return 130
    inside = workspace.resolve().relative_to(repo.top)
    return WorktreeRun(
        name, worktree.path, worktree.branch, worktree.path / inside, workspace, run_id, claim
    )


def _say(err: TextIO, text: str, code: int = EXIT_USAGE, command: str = "run") -> int:
    err.write(f"agent-lsp {command}: {for_terminal(text)}\n")
    return code


# -- agent-lsp worktrees ------------------------------------------------------------------------
def worktrees_cli(args: argparse.Namespace) -> int:
    store = store_for(args.workspace)
    if args.action == "remove":
        return remove_worktree(store, args.name, args.force, sys.stdout, sys.stderr)
    items = [describe(store, w) for w in store.all()]
    if args.json:
        print(json.dumps(items))
    else:
        print_worktrees(items, sys.stdout)
    return 0


def describe(store: WorktreeStore, worktree: Worktree) -> dict[str, object]:
    exists = worktree.path.is_dir()
    changed = store.changed(worktree) if exists else []
    return {
        "name": worktree.name,
        "path": str(worktree.path),
        "branch": store.branch_of(worktree) if exists else worktree.branch,
        "runId": worktree.run_id,
        "running": store.running(worktree.name),
        "dirty": changed != [],
        "created": created_at(worktree),
    }


def print_worktrees(items: list[dict[str, object]], out: TextIO) -> None:
    s = Style.for_stream(out)
    if not items:
        out.write(
            'no worktrees for this workspace (make one with `agent-lsp run "TASK" --worktree`)\n'
        )
        return
    for item in items:  # from our own records and the repository: shown, never obeyed
        state = "running" if item["running"] else "idle"
        dirty = "uncommitted changes" if item["dirty"] else "clean"
        out.write(
            for_terminal(
                f"{s.bold(str(item['name']))}  {item['branch']}  {state}, {dirty}  "
                f"created {item['created']}  last run {item['runId']}"
            )
            + "\n"
        )
        out.write(s.dim(for_terminal(f"    {item['path']}")) + "\n")


def remove_worktree(store: WorktreeStore, name: str, force: bool, out: TextIO, err: TextIO) -> int:
    """Exit 0 removed, 1 refused (its run runs; uncommitted changes without --force), 2 unknown."""
    worktree = store.get(name) if valid_name(name) else None
    if worktree is None:
        return _say(
            err,
            f"no worktree {name!r} for this workspace (see `agent-lsp worktrees`)",
            command="worktrees",
        )
    claim = store.claim(name, wait=0.0)  # held while removing: no run starts in it meanwhile
    if claim is None:
        return _say(
            err,
            f"refused: the run in worktree {name} ({worktree.run_id}) is still running; "
            "wait for it or cancel it first",
            EXIT_REFUSED,
            "worktrees",
        )
    try:
        changed = store.changed(worktree) if worktree.path.is_dir() else []
        if changed != [] and not force:
            what = (
                "git cannot tell whether it has uncommitted changes"
                if changed is None
                else f"it has uncommitted changes "
                f"({', '.join(changed[:5])}{', …' if len(changed) > 5 else ''})"
            )
            return _say(
                err,
                f"refused: {what}; commit them on branch {worktree.branch}, "
                "or pass --force to lose them",
                EXIT_REFUSED,
                "worktrees",
            )
        store.remove(worktree)
    except (WorktreeError, OSError) as exc:
        return _say(err, f"worktree {name} could not be removed: {exc}", EXIT_REFUSED, "worktrees")
    finally:
        claim.release()
    out.write(
        for_terminal(
            f"removed worktree {name} ({worktree.path}); branch {worktree.branch} is kept "
            f"(delete it with `git branch -D {worktree.branch}`)"
        )
        + "\n"
    )
    return 0
