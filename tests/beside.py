"""Tests that mostly wait are played beside the others. A person thinking two minutes over the
demo's approval, and the VS Code sessions (a browser driving code-server, most of it waiting on
the editor) held a pytest worker each while its CPU idled. The controlling pytest process now
starts them when the run begins (`start`, from tests/conftest.py), in threads of its own; their
test files are scheduled last, and their tests read how they ended (`result`). A test run alone,
chosen by `-k` or by a marker, plays its job itself, as before.

A job's `play(folder)` returns a JSON-able dict (written to `folder/beside-result.json`); its folder
sits in one folder of the run's, which its jobs may share (the VS Code jobs build the .vsix there
once). The jobs of one lane play one after the other, so the VS Code sessions never overlap."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parent


@dataclass(frozen=True)
class Job:
    name: str  # its folder is in the environment variable AGENT_LSP_BESIDE_<NAME>
    file: str  # the test file that reads it, relative to tests/
    play: Callable[[Path], dict[str, Any]]  # runs in a thread of the controlling process
    lane: str  # the jobs of one lane play one after the other
    timeout: float  # how long, at most, a reader waits for it
    tests: frozenset[str] = field(default_factory=frozenset)  # the tests reading it; empty: all of `file`
    cancel: Callable[[], None] = lambda: None  # ends what is still running at the end of the run
    nice: int = 0  # the lane's niceness, which every process it starts inherits


_threads: list[threading.Thread] = []
_jobs: list[Job] = []
_base: list[Path] = []


def variable(name: str) -> str:
    return "AGENT_LSP_BESIDE_" + name.upper().replace("-", "_")


def start(config: pytest.Config, jobs: list[Job]) -> None:
    """In the controlling process: every job the run will read starts now, a thread per lane.
    The workers find each job's folder in the environment they inherit."""
    wanted = [job for job in jobs if _reads(config, job)]
    if not wanted:
        return
    _base.append(Path(tempfile.mkdtemp(prefix="agent-lsp-beside-")))
    lanes: dict[str, list[tuple[Job, Path]]] = {}
    for job in wanted:
        folder = _base[0] / job.name
        folder.mkdir()
        _jobs.append(job)
        os.environ[variable(job.name)] = str(folder)
        lanes.setdefault(job.lane, []).append((job, folder))
    for lane, queue in lanes.items():
        thread = threading.Thread(target=_play_lane, args=(queue,), name=f"beside-{lane}", daemon=True)
        _threads.append(thread)
        thread.start()


def _play_lane(queue: list[tuple[Job, Path]]) -> None:
    # Linux: this thread alone (and what it starts) yields the CPU to the workers' tests; the
    # lane fills the CPU they leave idle, and its files are read last, so it has time to spare
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), max(job.nice for job, _ in queue))
    for job, folder in queue:
        started = time.monotonic()
        try:
            found = job.play(folder)
        except Exception as exc:  # noqa: BLE001 - the reading test reports it
            found = {"beside_error": f"{job.name} could not be played: {exc!r}"}
        found["beside_seconds"] = round(time.monotonic() - started, 1)
        (folder / "beside-result.tmp").write_text(json.dumps(found))
        (folder / "beside-result.tmp").rename(folder / "beside-result.json")


def summary() -> list[str]:
    """How long each job played (for the end of the run's report): what a reader waited on."""
    lines = []
    for job in _jobs:
        done = _base[0] / job.name / "beside-result.json"
        took = json.loads(done.read_text()).get("beside_seconds") if done.exists() else None
        lines.append(f"{job.name} ({job.lane}): " + (f"{took} s" if took is not None else "did not end"))
    return lines


def stop() -> None:
    """At the end of the run: what still plays is ended, the folders removed."""
    for job in _jobs:
        job.cancel()
    for thread in _threads:
        thread.join(timeout=35)
    for base in _base:
        shutil.rmtree(base, ignore_errors=True)


def result(name: str, timeout: float) -> dict[str, Any] | None:
    """How the job started beside the tests ended (waiting for it), or None when none was: the
    test then plays it itself. A job that raised fails the test with what it raised."""
    folder = os.environ.get(variable(name))
    if not folder:
        return None
    done = Path(folder) / "beside-result.json"
    deadline = time.monotonic() + timeout
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    if not done.exists():
        pytest.fail(f"{name}, played beside the tests, did not end within {timeout:.0f} s")
    found: dict[str, Any] = json.loads(done.read_text())
    if "beside_error" in found:
        pytest.fail(found["beside_error"])
    return found


def files(jobs: list[Job]) -> set[Path]:
    return {TESTS / job.file for job in jobs}


class LastQueue(OrderedDict[str, dict[str, bool]]):
    """xdist's queue of files (scope -> its tests). A worker asking for work gets the longest
    file by `times` (seconds of a measured run; a file not measured counts 0, and among equals
    xdist's order holds: most tests first), and the files in `last` after every other."""

    def __init__(self, last: set[str], times: dict[str, float] | None = None):
        super().__init__()
        self.last = last
        self.times = times or {}

    def popitem(self, last: bool = True) -> tuple[str, dict[str, bool]]:
        if last:
            return super().popitem(last)
        # the next file for a worker: the longest that is not a job's (max keeps the first of equals)
        others = [scope for scope in self if scope not in self.last]
        scope = max(others, key=lambda s: self.times.get(s, 0.0)) if others else next(iter(self))
        return scope, self.pop(scope)


def file_times(path: Path) -> dict[str, float]:
    """tests/file_times.txt ("SECONDS FILE" lines, FILE relative to tests/) by xdist's scopes."""
    found: dict[str, float] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            seconds, _, name = line.partition(" ")
            if name and not line.startswith("#"):
                found[f"tests/{name}"] = float(seconds)
    return found


def last_scheduler(config: pytest.Config, log: Any, jobs: list[Job]) -> Any:
    """xdist's `--dist loadfile` scheduler, handing out the longest files first (by
    tests/file_times.txt) and the files of the jobs played beside last. xdist orders files by
    their number of tests (most first): that put the 23 tests of test_vscode.py first (its worker
    then waited two minutes for a session still playing), and a long file of few tests last."""
    from xdist.scheduler import LoadFileScheduling

    scopes = {path.relative_to(config.rootpath).as_posix() for path in files(jobs)}
    scheduler = LoadFileScheduling(config, log)
    scheduler.workqueue = LastQueue(scopes, file_times(TESTS / "file_times.txt"))
    return scheduler


def _reads(config: pytest.Config, job: Job) -> bool:
    if (hasattr(config, "workerinput") or config.option.collectonly or config.option.keyword
            or config.option.markexpr):
        return False  # a worker, a listing, a selection by name or by marker: played in the test
    target = TESTS / job.file
    here = config.invocation_params.dir
    ignored = [(here / p).resolve() for p in (config.option.ignore or [])]
    if any(p == target or p in target.parents for p in ignored):
        return False
    for arg in config.args or [str(config.rootpath)]:
        path, _, name = arg.partition("::")
        found = (here / path).resolve()
        if (found == target and (name == "" or not job.tests or name.split("[")[0] in job.tests)) \
                or found in target.parents:
            return True
    return False
