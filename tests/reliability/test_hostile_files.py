"""Issue 10.2, 10.3, 10.6, 10.9, 10.10: files that try to trick the agent. A planted temp-file
link, memory files linked out of the workspace, FIFOs and devices, files that are not text, the
exec bit, and the permissions of the server's own files."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.messages import StopReason
from tests.unit.kit import ScriptedApprover, call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(60)
ALLOW = {"approval": {"default": "allow"}}


async def one_call(model, workspace, tool_call, **values) -> str:
    model.add([tools_reply({**tool_call, "id": "c"}), {"text": "ok"}])
    report, _, _ = await run("go", model, workspace, **{**ALLOW, **values})
    assert report.stop_reason == StopReason.DONE, report.error
    return last_tool_results(model.requests[-1])["c"]


# -- 10.2: a planted temp-file symlink -----------------------------------------------------
@pytest.mark.parametrize("planted", [".calc.py.agent-lsp.tmp", ".calc.py.tmp", "calc.py.tmp"])
async def test_a_planted_temp_link_never_writes_outside(model, workspace, tmp_path, planted):
    target = tmp_path / "outside-target.txt"
    target.write_text("untouched\n")
    (workspace / planted).symlink_to(target)
    result = await one_call(model, workspace, call("edit_file", path="calc.py", old_text="a - b", new_text="a + b"))
    assert result.startswith("applied"), result
    assert target.read_text() == "untouched\n"
    assert (workspace / "calc.py").read_text().count("a + b") == 1
    assert not (workspace / "calc.py").is_symlink()
    assert [p.name for p in workspace.iterdir() if ".agent-lsp.tmp" in p.name and not p.is_symlink()] == []


async def test_an_edit_through_a_link_to_outside_is_refused(model, workspace, tmp_path):
    target = tmp_path / "outside.py"
    target.write_text("a - b\n")
    (workspace / "linked.py").symlink_to(target)
    result = await one_call(model, workspace, call("edit_file", path="linked.py", old_text="a - b", new_text="x"))
    assert result.startswith("error:") and "outside the workspace" in result
    assert target.read_text() == "a - b\n"


# -- 10.3: memory files -----------------------------------------------------------------------
@pytest.mark.parametrize("how", ["file-link", "dir-link", "relative-escape"])
async def test_memory_linked_out_of_the_workspace_is_not_recalled(model, workspace, tmp_path, how):
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- SECRET-KEY-MATERIAL\n")
    if how == "file-link":
        (workspace / "AGENTS.md").symlink_to(secret)
        memory = ["AGENTS.md"]
    elif how == "dir-link":
        (workspace / ".agent-lsp").symlink_to(tmp_path, target_is_directory=True)
        (tmp_path / "memory.md").write_text("SECRET-KEY-MATERIAL in memory\n")
        memory = [".agent-lsp/memory.md"]
    else:
        memory = ["../id_rsa"]
    model.add([{"text": "hi"}])
    await run("hello", model, workspace, memoryFiles=memory)
    assert "SECRET-KEY-MATERIAL" not in model.requests[0]["messages"][0]["content"]


async def test_memory_must_be_a_regular_file(model, workspace):
    os.mkfifo(workspace / "AGENTS.md")
    model.add([{"text": "hi"}])
    report, _, _ = await asyncio.wait_for(run("hello", model, workspace), 20)
    assert report.stop_reason == StopReason.DONE, "a FIFO memory file never blocks the run"


# -- 10.6: FIFOs and devices -------------------------------------------------------------------
@pytest.mark.parametrize("tool", ["read_file", "search", "edit_file", "write_file"])
async def test_a_fifo_is_refused_at_once(model, workspace, tool):
    os.mkfifo(workspace / "pipe")
    args = {"read_file": {"path": "pipe"}, "search": {"pattern": "x", "path": "pipe"},
            "edit_file": {"path": "pipe", "old_text": "a", "new_text": "b"}, "write_file": {"path": "pipe", "content": "x"}}[tool]
    started = time.monotonic()
    result = await one_call(model, workspace, call(tool, **args))
    assert result.startswith("error:"), result
    assert "FIFO" in result or "regular file" in result
    assert time.monotonic() - started < 20


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
async def test_a_device_file_is_refused(model, workspace):
    os.mknod(workspace / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    result = await one_call(model, workspace, call("read_file", path="zero"))
    assert result.startswith("error:") and "character device" in result


async def test_fifo_reads_never_hold_the_shared_workers(model, workspace):
    """Eight reads of FIFOs at once: each is refused without a worker thread waiting on it, and
    the run's other file I/O goes on."""
    for i in range(8):
        os.mkfifo(workspace / f"pipe{i}")
    threads = threading.active_count()
    model.add([tools_reply(*(call("read_file", id=f"p{i}", path=f"pipe{i}") for i in range(8)), call("read_file", id="ok", path="calc.py")),
               {"text": "done"}])
    report, _, _ = await asyncio.wait_for(run("read", model, workspace), 20)
    results = last_tool_results(model.requests[-1])
    assert all(results[f"p{i}"].startswith("error:") for i in range(8))
    assert "def add" in results["ok"]
    assert report.stop_reason == StopReason.DONE
    assert threading.active_count() <= threads + 8  # no thread is stuck in a blocking open


async def test_a_huge_file_is_refused_not_read_into_memory(model, workspace):
    big = workspace / "huge.txt"
    with big.open("wb") as handle:
        handle.truncate(50_000_000)  # sparse: cheap to make, 50 MB to read
    result = await one_call(model, workspace, call("read_file", path="huge.txt"))
    assert result.startswith("error:") and "too large" in result


# -- 10.10: edits never corrupt files ----------------------------------------------------------
async def test_an_edit_of_a_non_utf8_file_is_refused_and_loses_nothing(model, workspace):
    data = "caf\xe9 = 1\n".encode("latin-1") + b"x = a - b\n"
    (workspace / "latin.py").write_bytes(data)
    result = await one_call(model, workspace, call("edit_file", path="latin.py", old_text="a - b", new_text="a + b"))
    assert result.startswith("error:") and "UTF-8" in result
    assert (workspace / "latin.py").read_bytes() == data


async def test_binary_content_after_8k_is_never_destroyed(model, workspace):
    data = b"text line\n" * 1000 + b"\x00\x01\x02binary tail\xff\n"
    (workspace / "mixed.dat").write_bytes(data)
    for tool_call in (call("edit_file", path="mixed.dat", old_text="text line", new_text="x"),
                      call("write_file", path="mixed.dat", content="replaced\n")):
        result = await one_call(model, workspace, tool_call)
        assert result.startswith("error:"), result
        assert (workspace / "mixed.dat").read_bytes() == data


async def test_an_edit_keeps_the_mode_line_endings_and_final_newline(model, workspace):
    script = workspace / "run.sh"
    script.write_bytes(b"#!/bin/sh\r\necho old\r\necho end")
    script.chmod(0o751)
    result = await one_call(model, workspace, call("edit_file", path="run.sh", old_text="echo old\n", new_text="echo new\n"))
    assert result.startswith("applied"), result
    assert script.read_bytes() == b"#!/bin/sh\r\necho new\r\necho end"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751


async def test_write_file_keeps_crlf_and_the_final_newline(model, workspace):
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    result = await one_call(model, workspace, call("write_file", path="win.txt", content="uno\ndos"))
    assert result.startswith("applied"), result
    assert (workspace / "win.txt").read_bytes() == b"uno\r\ndos\r\n"


# -- 10.9: the server's own files are private -------------------------------------------------
async def test_transcripts_spills_and_sessions_are_private(model, workspace, state_dir):
    os.umask(0o022)
    (workspace / "big.txt").write_text("x" * 50_000)
    model.add([tools_reply(call("read_file", path="big.txt")), {"text": "ok"}])
    report, _, _ = await run("read", model, workspace, toolOutputLimit=1000, session=Session())
    files = [p for p in state_dir.rglob("*") if p.is_file()]
    folders = [p for p in state_dir.rglob("*") if p.is_dir()]
    assert Path(report.transcript) in files and any("spill" in str(p) for p in files)
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for path in folders:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700


async def test_a_state_dir_created_by_an_older_version_is_tightened(model, workspace, state_dir):
    (state_dir / "runs").mkdir(parents=True)
    state_dir.chmod(0o755)
    (state_dir / "runs").chmod(0o755)
    model.add([{"text": "ok"}])
    report, _, _ = await run("hi", model, workspace, approver=ScriptedApprover())
    assert stat.S_IMODE(Path(report.transcript).parent.stat().st_mode) == 0o700
