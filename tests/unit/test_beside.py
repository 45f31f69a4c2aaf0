"""tests/beside.py: what the controlling pytest process plays beside the workers is read by
its tests when over, its files are handed out last, and a job that fails fails its tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import beside


def job(name: str, file: str, play: Any = None, tests: frozenset[str] = frozenset()) -> beside.Job:
    return beside.Job(name, file, play or (lambda folder: {}), lane="test", timeout=5, tests=tests)


def test_the_files_of_the_jobs_are_handed_out_after_every_other():
    queue = beside.LastQueue({"tests/editors/test_vscode.py"})
    for scope in ("tests/editors/test_vscode.py", "tests/unit/test_a.py", "tests/unit/test_b.py"):
        queue[scope] = {f"{scope}::test": False}
    handed = [queue.popitem(last=False)[0] for _ in range(3)]
    assert handed == ["tests/unit/test_a.py", "tests/unit/test_b.py", "tests/editors/test_vscode.py"]


def test_the_longest_file_measured_goes_first_and_the_others_keep_xdists_order(tmp_path: Path):
    record = tmp_path / "file_times.txt"
    record.write_text("# seconds, file\n80.5 editors/test_emacs.py\n9.0 unit/test_c.py\n")
    queue = beside.LastQueue(set(), beside.file_times(record))
    for scope in ("tests/unit/test_a.py", "tests/unit/test_c.py", "tests/unit/test_b.py", "tests/editors/test_emacs.py"):
        queue[scope] = {f"{scope}::test": False}
    handed = [queue.popitem(last=False)[0] for _ in range(4)]
    assert handed == ["tests/editors/test_emacs.py", "tests/unit/test_c.py", "tests/unit/test_a.py", "tests/unit/test_b.py"]


def test_a_reader_gets_what_the_job_played_and_a_failed_job_fails_it(tmp_path: Path, monkeypatch):
    played, failed = tmp_path / "played", tmp_path / "failed"
    played.mkdir()
    failed.mkdir()

    def boom(folder: Path) -> dict[str, Any]:
        raise RuntimeError("code-server would not start")

    beside._play_lane([(job("played", "x.py", lambda folder: {"answer": 42}), played),
                       (job("failed", "y.py", boom), failed)])
    monkeypatch.setenv(beside.variable("played"), str(played))
    monkeypatch.setenv(beside.variable("failed"), str(failed))
    assert beside.result("played", 5)["answer"] == 42
    with pytest.raises(pytest.fail.Exception, match="code-server would not start"):
        beside.result("failed", 5)
    monkeypatch.delenv(beside.variable("played"))
    assert beside.result("played", 5) is None  # not played beside: the test plays it itself


def config(args: list[str], keyword: str = "", markexpr: str = "") -> Any:
    tests = Path(beside.__file__).parent
    option = SimpleNamespace(collectonly=False, keyword=keyword, markexpr=markexpr, ignore=[])
    return SimpleNamespace(option=option, invocation_params=SimpleNamespace(dir=tests.parent),
                           args=args, rootpath=tests.parent)


def test_a_job_is_played_beside_only_when_the_run_reads_it_and_chose_no_test_by_name():
    demo = job("demo", "demo/test_demo.py", tests=frozenset({"test_thinking"}))
    assert beside._reads(config(["tests"]), demo)
    assert beside._reads(config(["tests/demo/test_demo.py::test_thinking"]), demo)
    assert not beside._reads(config(["tests/demo/test_demo.py::test_other"]), demo)
    assert not beside._reads(config(["tests/unit"]), demo)
    assert not beside._reads(config(["tests"], keyword="thinking"), demo)
    assert not beside._reads(config(["tests"], markexpr="not slow"), demo)
