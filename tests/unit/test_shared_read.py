"""Runs started together share one reading of their files; a run started after it reads afresh."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agent_lsp.agent.fs.prompt_files import discover_shared
from agent_lsp.agent.fs.shared_read import SharedRead


async def test_callers_in_flight_share_one_read_and_a_later_caller_reads_again():
    reads, release = [], threading.Event()

    def read(path: str) -> str:
        reads.append(path)
        release.wait(5)
        return f"text of {path} #{len(reads)}"

    shared = SharedRead()
    callers = [asyncio.ensure_future(shared("k", read, "a.md")) for _ in range(20)]
    await asyncio.sleep(0.05)
    release.set()
    assert set(await asyncio.gather(*callers)) == {"text of a.md #1"} and reads == ["a.md"]
    assert await shared("k", read, "a.md") == "text of a.md #2"  # nothing is cached
    assert await shared("other", read, "b.md") == "text of b.md #3"


async def test_one_callers_cancel_leaves_the_others_their_result():
    release = threading.Event()
    shared = SharedRead()

    def read() -> str:
        release.wait(5)
        return "done"

    first, second = (asyncio.ensure_future(shared("k", read)) for _ in range(2))
    await asyncio.sleep(0.05)
    first.cancel()
    release.set()
    assert await second == "done"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_failed_read_fails_its_sharers_and_the_next_caller_tries_again():
    calls = []

    def read() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("disk gone")
        return "fine"

    shared = SharedRead()
    results = await asyncio.gather(shared("k", read), shared("k", read), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results) and len(calls) == 1
    assert await shared("k", read) == "fine"


async def test_a_command_file_saved_after_a_discovery_is_found_by_the_next_run(tmp_path: Path):
    commands = tmp_path / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "one.md").write_text("Do one thing.")
    assert set((await discover_shared([tmp_path])).commands) >= {"one"}
    (commands / "two.md").write_text("Do another.")
    assert set((await discover_shared([tmp_path])).commands) >= {"one", "two"}
