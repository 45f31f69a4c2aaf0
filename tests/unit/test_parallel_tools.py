"""Tool layer: read-only calls of one reply run concurrently, side effects one at a time in
the model's order, and results are appended in the model's order, matched by id."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.ports import Document, EditOutcome
from tests.unit.kit import assert_valid_conversation, call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(30)


class RecordingWorkspace(DiskWorkspace):
    """A disk workspace that logs when each read/apply starts and ends.

    `barrier_reads`: reads of files whose name starts with "slow" wait until that many reads
    are in flight at once; reads that ran one after another would never get past it (they
    time out and fail). `delays`: extra seconds a read of that file name takes."""

    def __init__(self, roots: list[Path], barrier_reads: int = 0, delays: dict[str, float] | None = None,
                 apply_delay: float = 0.0):
        super().__init__(roots)
        self.log: list[tuple[str, str, str]] = []  # (event, op, file name)
        self.barrier = asyncio.Barrier(barrier_reads) if barrier_reads else None
        self.delays = delays or {}
        self.apply_delay = apply_delay

    async def read(self, path: Path) -> Document:
        self.log.append(("start", "read", path.name))
        try:
            if self.barrier is not None and path.name.startswith("slow"):
                try:
                    await asyncio.wait_for(self.barrier.wait(), 3)
                except TimeoutError:
                    raise ValueError("the reads did not overlap (barrier timed out)") from None
            await asyncio.sleep(self.delays.get(path.name, 0))
            return await super().read(path)
        finally:
            self.log.append(("end", "read", path.name))

    async def apply(self, path: Path, before: Document | None, after: str, *, preview: str | None = None,
                    late=None) -> EditOutcome:
        self.log.append(("start", "apply", path.name))
        try:
            await asyncio.sleep(self.apply_delay)
            return await super().apply(path, before, after, preview=preview)
        finally:
            self.log.append(("end", "apply", path.name))


@pytest.fixture
def slow_files(workspace: Path) -> list[str]:
    names = [f"slow{i}.txt" for i in range(4)]
    for name in names:
        (workspace / name).write_text(f"content of {name}\n")
    return names


async def test_read_only_calls_of_one_reply_overlap(model, workspace, slow_files):
    ws = RecordingWorkspace([workspace], barrier_reads=len(slow_files))
    model.add([tools_reply(*(call("read_file", id=f"r{i}", path=name) for i, name in enumerate(slow_files))), {"text": "read them"}])

    report, _, _ = await run("read all", model, ws)

    results = last_tool_results(model.requests[1])
    assert list(results) == ["r0", "r1", "r2", "r3"]
    for i, name in enumerate(slow_files):
        assert results[f"r{i}"] == f"1\tcontent of {name}", results[f"r{i}"]
    # Every read started before any of them ended: they ran at the same time.
    events = [event for event, op, _ in ws.log if op == "read"]
    assert events == ["start"] * 4 + ["end"] * 4
    assert report.tool_calls == 4


async def test_results_are_appended_in_the_models_order_matched_by_id(model, workspace):
    for name in ("first.txt", "second.txt", "third.txt"):
        (workspace / name).write_text(f"this is {name}\n")
    # The first call is the slowest, so it finishes last.
    ws = RecordingWorkspace([workspace], delays={"first.txt": 0.3, "second.txt": 0.1})
    model.add([tools_reply(call("read_file", id="a", path="first.txt"), call("read_file", id="b", path="second.txt"),
                           call("read_file", id="c", path="third.txt")), {"text": "ok"}])

    await run("read", model, ws)

    ends = [name for event, op, name in ws.log if event == "end"]
    assert ends[-1] == "first.txt", "the first call finished last"
    tool = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool] == [
        ("a", "1\tthis is first.txt"), ("b", "1\tthis is second.txt"), ("c", "1\tthis is third.txt")]
    assert_valid_conversation(model.requests[1]["messages"])


async def test_side_effecting_calls_run_one_at_a_time_in_order(model, workspace):
    ws = RecordingWorkspace([workspace], apply_delay=0.05)
    model.add([tools_reply(
        call("write_file", id="w1", path="one.txt", content="1"),
        call("write_file", id="w2", path="two.txt", content="2"),
        call("edit_file", id="e3", path="calc.py", old_text="a - b", new_text="a + b"),
        call("write_file", id="w4", path="four.txt", content="4"),
    ), {"text": "ok"}])

    report, _, _ = await run("write", model, ws)

    applies = [(event, name) for event, op, name in ws.log if op == "apply"]
    assert applies == [("start", "one.txt"), ("end", "one.txt"), ("start", "two.txt"), ("end", "two.txt"),
                       ("start", "calc.py"), ("end", "calc.py"), ("start", "four.txt"), ("end", "four.txt")]
    assert [Path(u).name for u in report.edited_files] == ["one.txt", "two.txt", "calc.py", "four.txt"]
    assert list(last_tool_results(model.requests[1])) == ["w1", "w2", "e3", "w4"]


async def test_commands_run_in_order_not_concurrently(model, workspace):
    # Each command appends its start and end marks; in order means no interleaving.
    script = workspace / "mark.py"
    script.write_text(
        "import sys, time\n"
        "with open('marks.txt', 'a') as f: f.write(f'start {sys.argv[1]}\\n')\n"
        "time.sleep(0.15)\n"
        "with open('marks.txt', 'a') as f: f.write(f'end {sys.argv[1]}\\n')\n"
    )
    import sys
    model.add([tools_reply(*(call("run_command", command=f"{sys.executable} mark.py {n}") for n in ("A", "B", "C"))), {"text": "ok"}])

    await run("mark", model, workspace, approval={"default": "allow"})

    assert (workspace / "marks.txt").read_text().split("\n")[:-1] == ["start A", "end A", "start B", "end B", "start C", "end C"]


async def test_a_read_after_a_write_in_the_same_reply_sees_the_write(model, workspace):
    ws = RecordingWorkspace([workspace], apply_delay=0.1)
    model.add([tools_reply(call("read_file", id="r1", path="README.md"),
                           call("write_file", id="w", path="README.md", content="# rewritten\n"),
                           call("read_file", id="r2", path="README.md")), {"text": "ok"}])

    await run("rewrite", model, ws)

    results = last_tool_results(model.requests[1])
    assert results["r1"] == "1\t# sample"
    assert results["r2"] == "1\t# rewritten"
    ops = [(event, op) for event, op, _ in ws.log]
    assert ops == [("start", "read"), ("end", "read"), ("start", "read"), ("end", "read"),  # r1, then w's own read
                   ("start", "read"), ("end", "read"),  # w's diff on the text as it is when approved
                   ("start", "apply"), ("end", "apply"), ("start", "read"), ("end", "read")]


async def test_parallel_reads_cost_the_slowest_not_the_sum(model, workspace):
    # Not a wall-time threshold: the overlap is shown by the time ranges themselves.
    names = [f"r{i}.txt" for i in range(3)]
    for name in names:
        (workspace / name).write_text("x\n")
    spans: dict[str, list[float]] = {}

    class Timed(DiskWorkspace):
        async def read(self, path):
            spans[path.name] = [time.monotonic()]
            await asyncio.sleep(0.2)
            spans[path.name].append(time.monotonic())
            return await super().read(path)

    model.add([tools_reply(*(call("read_file", path=n) for n in names)), {"text": "ok"}])
    await run("read", model, Timed([workspace]))

    latest_start = max(s for s, _ in spans.values())
    earliest_end = min(e for _, e in spans.values())
    assert latest_start < earliest_end
