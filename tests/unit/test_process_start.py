"""A cancel that comes while a command is being started (Confined.start, which commands,
background processes, hooks and the debugger share): the command and what it started end
(asyncio's own clean-up kills only the reaper it runs under; the command then ran on, seen once
in tests/reliability/test_cancel_property.py on a loaded machine)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_lsp.agent.exec.process import reaped, run_process
from agent_lsp.agent.exec.sandbox import Confined
from tests.unit.kit import alive


class SlowToStart(Confined):
    """Spawns the command, then takes a moment more: a cancel lands mid-start."""

    async def spawn(self, cwd: Path, env: dict[str, str], *, stdin: int, stderr: int) -> asyncio.subprocess.Process:
        proc = await super().spawn(cwd, env, stdin=stdin, stderr=stderr)
        (cwd / "started").write_text("")
        await asyncio.sleep(1)
        return proc


@pytest.mark.timeout(30)
async def test_a_cancel_while_the_command_starts_ends_it_and_what_it_started(tmp_path: Path):
    command = "sleep 30 & echo $! > child; echo $$ > pid; exec sleep 30"
    task = asyncio.create_task(run_process(SlowToStart(reaped(["sh", "-c", command])), tmp_path, 60,
                                           env={"PATH": "/usr/bin:/bin"}, processes=set()))
    for _ in range(200):  # the command has started and written its pids
        if (tmp_path / "started").exists() and (tmp_path / "pid").exists() and (tmp_path / "child").exists():
            break
        await asyncio.sleep(0.02)
    pids = [int((tmp_path / name).read_text()) for name in ("pid", "child")]
    assert all(alive(pid) for pid in pids)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not any(alive(pid) for pid in pids), "the command outlived the cancel of its start"
