"""The editor dies mid-run, or shuts the server down mid-run: the process exits quickly and
leaves no orphan (a `run_command` child is killed)."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from tests.e2e.harness import find_processes, is_alive

EXIT_DEADLINE = 5.0  # the contract says two seconds; tests allow some slack on a loaded machine
SLEEP = ["sleep", "61.5"]  # an argv no other test uses, so the scan finds only ours


async def start_sleeping_child(open_editor, model, caps: str = "visual-studio-code"):
    model.add("sleep long", [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": " ".join(SLEEP)}}]},
        {"text": "slept"},
    ])
    editor = await open_editor(caps)
    editor.approval_answers = ["Allow"]
    started = await editor.run("sleep long please")
    pids = await editor.wait_for(lambda: [p for p in find_processes(SLEEP) if descends_from(p, editor.process.pid)],
                                 15, "the sleep child")
    return editor, started, pids[0]


def descends_from(pid: int, ancestor: int) -> bool:
    """True when `ancestor` is pid's parent, or the parent of its parent (the reaper between)."""
    for _ in range(4):
        parent = parent_of(pid)
        if parent is None or parent <= 1:
            return False
        if parent == ancestor:
            return True
        pid = parent
    return False


def parent_of(pid: int) -> int | None:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


async def wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while is_alive(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} is still alive after {timeout}s")
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(("caps", "how"), [
    ("visual-studio-code", "stdin-closed"), ("neovim", "stdin-closed"), ("visual-studio-code", "both-pipes-closed"),
])
async def test_editor_dies_mid_run_no_orphans(open_editor, model, caps, how):
    editor, _started, child = await start_sleeping_child(open_editor, model, caps)
    assert is_alive(child)
    began = time.monotonic()
    if how == "stdin-closed":
        editor.close_stdin()  # the server reads EOF
    else:
        editor.die()  # ...and its writes fail
    await editor.wait_exit(EXIT_DEADLINE)
    took = time.monotonic() - began
    await wait_gone(child, 1.0)
    assert took < EXIT_DEADLINE, f"the server took {took:.2f}s to exit"


async def test_editor_dies_while_a_model_call_is_held(open_editor, model):
    model.add("slow one", [{"text": "never", "ttft": 30}])
    editor = await open_editor("visual-studio-code")
    await editor.run("slow one please")
    await editor.wait_for(lambda: model.log, 10, "the model request")
    began = time.monotonic()
    editor.close_stdin()
    await editor.wait_exit(EXIT_DEADLINE)
    assert time.monotonic() - began < EXIT_DEADLINE


async def test_shutdown_and_exit_during_a_run_end_the_process_quickly(open_editor, model):
    editor, started, child = await start_sleeping_child(open_editor, model)
    began = time.monotonic()
    await editor.shutdown(EXIT_DEADLINE)
    report = await editor.wait_stop(started["runId"], 2)  # runs were cancelled by shutdown
    assert report["stopReason"] == "cancelled"
    await wait_gone(child, 1.0)  # the child was killed by then
    editor.client.exit(None)
    await editor.wait_exit(EXIT_DEADLINE)
    assert time.monotonic() - began < EXIT_DEADLINE
    assert editor.process.returncode == 0


async def test_exit_without_shutdown_during_a_run(open_editor, model):
    editor, _started, child = await start_sleeping_child(open_editor, model)
    began = time.monotonic()
    editor.client.exit(None)
    await editor.wait_exit(EXIT_DEADLINE)
    assert time.monotonic() - began < EXIT_DEADLINE
    await wait_gone(child, 1.0)
    progress_end = [p for p in editor.progress(_started["runId"]) if isinstance(p, types.WorkDoneProgressEnd)]
    assert len(progress_end) <= 1
    assert editor.process.returncode == 1  # LSP: `exit` without a `shutdown` first exits 1


@pytest.mark.parametrize(("shutdown_first", "code"), [(True, 0), (False, 1)])
async def test_exit_code_says_whether_shutdown_came_first(open_editor, shutdown_first, code):
    editor = await open_editor("neovim")
    if shutdown_first:
        await editor.shutdown(EXIT_DEADLINE)
    editor.client.exit(None)
    assert await editor.wait_exit(EXIT_DEADLINE) == code


async def test_cancel_during_a_command_kills_it_and_the_run_goes_on_answering(open_editor, model):
    editor, started, child = await start_sleeping_child(open_editor, model)
    began = time.monotonic()
    assert await editor.execute("agentLsp.cancel", {"runId": started["runId"]}) is True
    report = await editor.wait_stop(started["runId"], EXIT_DEADLINE)
    assert report["stopReason"] == "cancelled" and time.monotonic() - began < EXIT_DEADLINE
    await wait_gone(child, 2.0)
    assert editor.process.returncode is None  # the server itself goes on
    assert await editor.execute("agentLsp.cancel", {"runId": started["runId"]}) is False
