"""Servers that fail, die, hang, change their tools, or are left behind: never a crash, never an orphan."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path

import pytest

from agent_lsp.agent.tools.base import ToolError
from agent_lsp.mcp.config import from_user_settings
from agent_lsp.mcp.manager import McpManager
from agent_lsp.mcp.tools import McpTool
from tests.mcp.conftest import alive, cmdline, descendants, group_members

pytestmark = pytest.mark.timeout(60)
LONG = "everything__trigger-long-running-operation"


async def execute(manager: McpManager | McpTool, name: str, arguments: dict) -> str:
    """Parse, prepare and execute a tool call, as the loop does with a tool it was given."""
    tool = manager.find(name) if isinstance(manager, McpManager) else manager
    assert tool is not None, name
    return await (await tool.prepare(tool.parse(arguments), None)).execute()


def everything(third_party, **extra) -> dict:
    return {"command": third_party.everything, "args": ["stdio"], **extra}


async def wait_for(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_start_failure_is_reported_and_breaks_nothing_else(third_party, tmp_path: Path):
    events: list[tuple[str, str, str]] = []
    decls, _ = from_user_settings({
        "broken": {"command": "sh", "args": ["-c", "echo 'fatal: no config found' >&2; exit 3"]},
        "missing": {"command": str(tmp_path / "no-such-server")},
        "time": {"command": third_party.time},
    })
    manager = McpManager(decls, roots=[tmp_path], on_status=lambda *e: events.append(e))
    try:
        tools = await manager.tools()
        status = {s["name"]: s for s in manager.status()}
        assert status["time"]["state"] == "running" and {t.server for t in tools} == {"time"}
        assert status["broken"]["state"] == "failed" and "fatal: no config found" in status["broken"]["error"]
        assert status["missing"]["state"] == "failed" and "no-such-server" in status["missing"]["error"]
        failed = [e for e in events if e[1] == "failed"]
        assert len(failed) == 2 and all("\n" not in e[2] for e in failed)
        assert any(e[0] == "broken" and e[2].startswith("MCP server `broken` failed to start: ") and "last stderr: fatal: no config found" in e[2] for e in failed)
        assert [e[1] for e in events if e[0] == "time"] == ["starting", "running"]
        await manager.tools()  # a failed start is not retried on every turn
        assert len([e for e in events if e[1] == "failed"]) == 2
    finally:
        await manager.aclose()


async def test_killed_mid_call_then_retried_once(third_party, tmp_path: Path):
    events: list[tuple[str, str, str]] = []
    decls, _ = from_user_settings({"everything": everything(third_party)})
    manager = McpManager(decls, roots=[tmp_path], on_status=lambda *e: events.append(e))
    try:
        tools = {t.name: t for t in await manager.tools()}  # what the run holds
        first = manager.server_pid("everything")
        assert first is not None and alive(first)
        call = asyncio.create_task(execute(manager, LONG, {"duration": 20, "steps": 20}))
        await asyncio.sleep(0.5)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(ToolError, match="stopped during the call"):
            await asyncio.wait_for(call, 5)
        await wait_for(lambda: manager.status()[0]["state"] == "failed")
        assert "restarted once" in manager.status()[0]["error"]
        assert manager.status()[0]["tools"] == [] and manager.find("everything__echo") is None  # dropped

        echo = tools["everything__echo"]
        assert await execute(echo, "", {"message": "back"}) == "Echo: back"  # the one retry
        second = manager.server_pid("everything")
        assert manager.status()[0]["state"] == "running" and second not in (None, first)
        assert "everything__echo" in {t.name for t in await manager.tools()}

        os.kill(second, signal.SIGKILL)
        await wait_for(lambda: manager.status()[0]["state"] == "failed")
        with pytest.raises(ToolError, match="is not running"):
            await execute(echo, "", {"message": "again"})
        assert await manager.tools() == [] and manager.status()[0]["state"] == "failed"
        assert [e[1] for e in events] == ["starting", "running", "failed", "starting", "running", "failed"]
    finally:
        await manager.aclose()


async def test_call_past_request_timeout(third_party, tmp_path: Path):
    decls, _ = from_user_settings({"everything": everything(third_party)})
    manager = McpManager(decls, roots=[tmp_path], request_timeout=1)
    try:
        await manager.tools()
        started = time.monotonic()
        with pytest.raises(ToolError, match="did not answer within 1 s"):
            await execute(manager, LONG, {"duration": 10, "steps": 10})
        assert time.monotonic() - started < 3
        assert await execute(manager, "everything__echo", {"message": "still here"}) == "Echo: still here"
        assert manager.status()[0]["state"] == "running"
    finally:
        await manager.aclose()


def server_with_a_child(third_party) -> dict:
    """server-everything behind a shell that first starts a child of its own. The server exits
    as soon as its stdin closes, so stopping only it would leave the child behind."""
    return {"command": "sh", "args": ["-c", f"sleep 300 & exec {third_party.everything} stdio"]}


async def test_aclose_ends_the_children_a_quick_leader_leaves_behind(third_party, tmp_path: Path):
    decls, _ = from_user_settings({"everything": server_with_a_child(third_party)})
    manager = McpManager(decls, roots=[tmp_path])
    await manager.tools()
    pid = manager.server_pid("everything")
    assert pid is not None and alive(pid)
    await wait_for(lambda: len(group_members(pid)) >= 2)
    tree = [pid, *descendants(pid)]
    assert len(tree) >= 2
    await manager.aclose()
    assert [p for p in tree if alive(p)] == [] and group_members(pid) == []
    await manager.aclose()  # twice is fine
    assert manager.status()[0]["state"] == "idle" and await manager.tools() == []


async def test_cancelled_caller_keeps_the_connection_then_aclose(third_party, tmp_path: Path):
    decls, _ = from_user_settings({"everything": server_with_a_child(third_party)})
    manager = McpManager(decls, roots=[tmp_path])
    await manager.tools()
    pid = manager.server_pid("everything")
    await wait_for(lambda: len(group_members(pid)) >= 2)
    tree = [pid, *descendants(pid)]

    call = asyncio.create_task(execute(manager, LONG, {"duration": 20, "steps": 20}))
    await asyncio.sleep(0.5)
    call.cancel()
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert time.monotonic() - started < 5  # the contract's second, with its ~5x test margin
    assert await execute(manager, "everything__echo", {"message": "alive"}) == "Echo: alive"

    call = asyncio.create_task(execute(manager, LONG, {"duration": 20, "steps": 20}))
    await asyncio.sleep(0.3)
    call.cancel()  # the run is cancelled mid-call, then the front end shuts down
    with pytest.raises(asyncio.CancelledError):
        await call
    await manager.aclose()
    assert [p for p in tree if alive(p)] == [] and group_members(pid) == []


async def test_tools_list_changed(helper_server: list[str], tmp_path: Path):
    decls, _ = from_user_settings({"helper": {"command": helper_server[0], "args": helper_server[1:]}})
    manager = McpManager(decls, roots=[tmp_path])
    try:
        names = {t.name for t in await manager.tools()}
        assert {"helper__add_tool", "helper__environment", "helper__sleep"} <= names and "helper__fresh" not in names
        assert await execute(manager, "helper__add_tool", {"name": "fresh"}) == "added"
        deadline = time.monotonic() + 10
        while "helper__fresh" not in {t.name for t in await manager.tools()}:
            assert time.monotonic() < deadline, "the new tool never appeared"
            await asyncio.sleep(0.05)
        assert await execute(manager, "helper__fresh", {}) == "I was added at run time"
        assert "helper__fresh" in manager.status()[0]["tools"]
    finally:
        await manager.aclose()


async def test_cancelled_start_goes_on_and_aclose_during_start(helper_server: list[str], tmp_path: Path):
    decls, _ = from_user_settings({"helper": {"command": helper_server[0], "args": helper_server[1:]}})
    manager = McpManager(decls, roots=[tmp_path])
    first = asyncio.create_task(manager.tools())
    await asyncio.sleep(0.05)
    first.cancel()  # the run that wanted tools was cancelled: the start goes on
    with pytest.raises(asyncio.CancelledError):
        await first
    assert {t.name for t in await manager.tools()} >= {"helper__sleep"}
    pid = manager.server_pid("helper")
    await manager.aclose()
    assert pid is not None and not alive(pid)

    manager = McpManager(decls, roots=[tmp_path])
    starting = asyncio.create_task(manager.tools())
    await wait_for(lambda: manager.status()[0]["state"] == "starting")
    await manager.aclose()  # shutdown while a server is still starting
    await asyncio.wait_for(starting, 10)
    assert manager.status()[0]["state"] == "idle"
    assert [p for p in descendants(os.getpid()) if alive(p) and helper_server[1] in cmdline(p)] == []


async def test_list_changed_from_a_handshake_era_server(third_party, tmp_path: Path, caplog: pytest.LogCaptureFixture):
    """server-everything speaks the 2025-11-25 handshake protocol (no `subscriptions/listen`) and
    sends list_changed right after `initialized`, as it registers more tools: they are listed again."""
    caplog.set_level(logging.INFO, logger="agent_lsp.mcp")
    decls, _ = from_user_settings({"everything": everything(third_party)})
    manager = McpManager(decls, roots=[tmp_path])
    try:
        deadline = time.monotonic() + 10
        while not any("everything: the tool list changed" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "list_changed was not honoured"
            await manager.tools()
            await asyncio.sleep(0.05)
        assert {t.name for t in await manager.tools()} >= {"everything__echo", "everything__simulate-research-query"}
    finally:
        await manager.aclose()
