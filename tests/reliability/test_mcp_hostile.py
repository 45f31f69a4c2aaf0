"""Issue 20: MCP servers and names that try to get more than they were given.

Item 4: a workspace server's tool named like a user server's (`a.b` / `a_b`, `__` inside a server
or a tool name) never gets the user's allow rule, session grant or readOnlyHint treatment.
Item 6: a line that is not UTF-8 (or not JSON-RPC) on a server's stdout costs nothing; a server
that writes only garbage fails its call at once with the reason. Item 12: no MCP server process,
nor the `setsid` helper it leaves, outlives agent-lsp: normal end, LSP shutdown, `agent-lsp run`,
SIGKILL. Item 13: a 30 MB answer is refused with a clear error, in bounded memory, and the
connection goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import RunOptions, Session, run_task
from agent_lsp.agent.ports import Decision
from agent_lsp.agent.tools.base import ToolError
from agent_lsp.mcp.config import from_user_settings, from_workspace
from agent_lsp.mcp.manager import McpManager
from agent_lsp.mcp.tools import McpTool
from tests.unit.kit import (
    Events,
    ScriptedApprover,
    call,
    last_tool_results,
    make_settings,
    tools_reply,
)

pytestmark = pytest.mark.timeout(120)
HOSTILE = Path(__file__).with_name("mcp_servers") / "hostile_server.py"


def server(*args: str) -> dict:
    return {"command": sys.executable, "args": [str(HOSTILE), *args]}


async def execute(tool: McpTool | None, arguments: dict) -> str:
    """What the loop does with a call: parse, prepare, execute."""
    assert tool is not None
    return await (await tool.prepare(tool.parse(arguments), None)).execute()


# -- item 4: names that two servers share ---------------------------------------------------------
# (user server, its tool, workspace server, its tool, the name both once answered to)
COLLISIONS = {
    "dot-vs-underscore": ("a.b", "probe", "a_b", "probe", "a_b__probe"),
    "double-underscore-in-server-name": ("x__y", "z", "x", "y__z", "x__y__z"),
    "double-underscore-in-tool-name": ("x", "y__z", "x__y", "z", "x__y__z"),
}


async def twins(workspace: Path, case: str, *, read_only: bool = False) -> tuple[McpManager, McpTool, McpTool]:
    user_server, user_tool, ws_server, ws_tool, _ = COLLISIONS[case]
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {ws_server: server("--label", "workspace", "--tool", f"{ws_tool}:ro")}}))
    workspace_decls, problems = from_workspace([workspace])
    assert not problems
    user_decls, _ = from_user_settings({user_server: server("--label", "user", "--tool", f"{user_tool}:ro" if read_only else user_tool)})
    manager = McpManager([*user_decls, *workspace_decls], roots=[workspace], workspace_policy="allow", request_timeout=30)
    tools = await manager.tools()
    mine = next(t for t in tools if t.server == user_server and t.tool == user_tool)
    theirs = next(t for t in tools if t.server == ws_server and t.tool == ws_tool)
    return manager, mine, theirs


async def agent_run(model, workspace: Path, tools: list, approver: ScriptedApprover, *calls: dict, session: Session | None = None,
                    rules: dict | None = None, mode: str | None = None):
    model.add([tools_reply(*calls), {"text": "done"}])
    settings = make_settings(model, approval={"tools": rules or {}})
    report = await asyncio.wait_for(run_task("use the tools", session=session or Session(), settings=settings, workspace=DiskWorkspace([workspace]),
                                             approver=approver, emit=Events(), options=RunOptions(extra_tools=tools, mode=mode)), 60)
    return report, last_tool_results(model.requests[-1])


@pytest.mark.parametrize("case", list(COLLISIONS))
async def test_a_users_allow_rule_never_reaches_the_workspace_twin(model, workspace, case):
    manager, mine, theirs = await twins(workspace, case)
    shared = COLLISIONS[case][4]
    try:
        assert mine.name != theirs.name and len({t.name for t in await manager.tools()}) == len(await manager.tools())
        approver = ScriptedApprover(default=Decision.DENY)
        _, results = await agent_run(model, workspace, await manager.tools(), approver,
                                     call(theirs.name, id="ws"), call(mine.name, id="mine"),
                                     rules={shared: "allow", mine.name: "allow"})
        asked = [r.tool for r in approver.requests]
        assert theirs.name in asked, f"the workspace tool ran under the user's rule: {results}"
        assert results["ws"].startswith("denied") and "workspace ran" not in results["ws"]
        assert mine.name not in asked and "user ran" in results["mine"]  # its own name still allows it
        assert manager.find(shared) is None  # a name that may mean either tool finds neither
        assert any(f"`{mine.server}`" in p and f"`{theirs.server}`" in p and "same `<server>__<tool>` name" in p for p in manager.problems)
        if case == "dot-vs-underscore":  # and so does its raw name, which no other tool can carry
            assert mine.raw_name == "a.b__probe" and mine.raw_name in mine.aliases and manager.find("a.b__probe") is mine
    finally:
        await manager.aclose()


@pytest.mark.parametrize("case", list(COLLISIONS))
async def test_a_deny_under_a_shared_name_holds_for_both(model, workspace, case):
    manager, mine, theirs = await twins(workspace, case)
    try:
        approver = ScriptedApprover(default=Decision.ALLOW)
        _, results = await agent_run(model, workspace, await manager.tools(), approver, call(theirs.name, id="ws"), call(mine.name, id="mine"),
                                     rules={COLLISIONS[case][4]: "deny"})
        assert results["ws"].startswith("denied") and results["mine"].startswith("denied") and approver.requests == []
    finally:
        await manager.aclose()


@pytest.mark.parametrize("case", list(COLLISIONS))
async def test_a_user_servers_read_only_hint_does_not_pass_to_the_twin(model, workspace, case):
    manager, mine, theirs = await twins(workspace, case, read_only=True)
    try:
        assert mine.read_only and not theirs.read_only  # the workspace's own readOnlyHint is never taken either
        approver = ScriptedApprover(default=Decision.DENY)
        _, results = await agent_run(model, workspace, await manager.tools(), approver, call(theirs.name, id="ws"), call(mine.name, id="mine"))
        assert [r.tool for r in approver.requests] == [theirs.name]
        assert results["ws"].startswith("denied") and "user ran" in results["mine"]
        # Plan mode offers only what runs like a read-only tool: the user's, not the twin.
        approver = ScriptedApprover(default=Decision.DENY)
        await agent_run(model, workspace, await manager.tools(), approver, call(mine.name, id="p"), mode="plan")
        offered = {t["function"]["name"] for t in model.requests[-1]["tools"]}
        assert mine.name in offered and theirs.name not in offered
    finally:
        await manager.aclose()


async def test_allow_for_session_is_for_that_servers_tool_not_a_later_namesake(model, workspace):
    """The user's `a_b` server's tool allowed for the session; later the user's settings lose
    `a_b` and the workspace declares its own `a_b`: same model name, another tool. It asks."""
    session = Session()
    user_decls, _ = from_user_settings({"a_b": server("--label", "user", "--tool", "probe")})
    first = McpManager(user_decls, roots=[workspace], request_timeout=30)
    try:
        tools = await first.tools()
        approver = ScriptedApprover(Decision.ALLOW_SESSION, default=Decision.DENY)
        _, results = await agent_run(model, workspace, tools, approver, call("a_b__probe", id="one"), session=session)
        assert "user ran" in results["one"]
    finally:
        await first.aclose()
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"a_b": server("--label", "workspace", "--tool", "probe")}}))
    second = McpManager(from_workspace([workspace])[0], roots=[workspace], workspace_policy="allow", request_timeout=30)
    try:
        tools = await second.tools()
        assert [t.name for t in tools if t.tool == "probe"] == ["a_b__probe"]
        approver = ScriptedApprover(default=Decision.DENY)
        _, results = await agent_run(model, workspace, tools, approver, call("a_b__probe", id="two"), session=session)
        assert [r.tool for r in approver.requests] == ["a_b__probe"] and results["two"].startswith("denied")
    finally:
        await second.aclose()


# -- item 6: lines that are not UTF-8 / not JSON-RPC ----------------------------------------------
async def test_a_latin1_line_mid_session_costs_nothing(tmp_path):
    decls, _ = from_user_settings({"h": server()})
    manager = McpManager(decls, roots=[tmp_path], request_timeout=20)
    try:
        await manager.tools()
        started = time.monotonic()
        assert await execute(manager.find("h__latin1"), {}) == "answered after a Latin-1 line"
        for n in range(3):
            assert await execute(manager.find("h__echo"), {"text": f"n{n}"}) == f"echo: n{n}"
        elapsed = time.monotonic() - started
        assert elapsed < 5, f"calls after a Latin-1 line took {elapsed:.1f} s (the request timeout is 20 s)"
        assert manager.status()[0]["state"] == "running"
    finally:
        await manager.aclose()


async def test_a_latin1_banner_before_the_handshake(tmp_path):
    decls, _ = from_user_settings({"h": server("--latin1-banner")})
    manager = McpManager(decls, roots=[tmp_path], request_timeout=20, start_timeout=20)
    try:
        started = time.monotonic()
        assert "h__echo" in {t.name for t in await manager.tools()}
        assert await execute(manager.find("h__echo"), {"text": "ok"}) == "echo: ok"
        assert time.monotonic() - started < 10
    finally:
        await manager.aclose()


async def test_a_server_writing_only_garbage_fails_the_call_at_once(tmp_path):
    decls, _ = from_user_settings({"h": server()})
    manager = McpManager(decls, roots=[tmp_path], request_timeout=15)
    try:
        tools = {t.tool: t for t in await manager.tools()}  # what the run holds
        started = time.monotonic()
        with pytest.raises(ToolError, match="lines in a row on stdout that are not JSON-RPC messages") as failure:
            await execute(tools["garbage"], {})
        elapsed = time.monotonic() - started
        assert elapsed < 5, f"took {elapsed:.1f} s"
        assert "restarted once" in str(failure.value)
        await wait_until(lambda: manager.status()[0]["state"] == "failed", 10, "the connection's end")
        assert "not JSON-RPC" in manager.status()[0]["error"]
        assert await execute(tools["echo"], {"text": "back"}) == "echo: back"  # the one restart
    finally:
        await manager.aclose()


# -- item 13: an answer too large to read ---------------------------------------------------------
def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("form", ["id-first", "id-last", "no-id"])
async def test_a_30_mb_answer_is_refused_clearly_and_the_server_goes_on(tmp_path, form, capsys):
    decls, _ = from_user_settings({"h": server()})
    manager = McpManager(decls, roots=[tmp_path], request_timeout=30)
    try:
        tools = {t.tool: t for t in await manager.tools()}
        pid = manager.server_pid("h")
        before = peak_rss_mb()
        started = time.monotonic()
        with pytest.raises(ToolError) as failure:
            if form == "id-first":  # what the Python SDK writes
                await execute(tools["huge"], {"megabytes": 30})
            else:  # the TypeScript SDK's order; or no id at all
                await execute(tools["huge_raw"], {"megabytes": 30, "form": "tail" if form == "id-last" else "noid"})
        elapsed = time.monotonic() - started
        message = str(failure.value)
        assert "10.0 MB" in message, message
        assert elapsed < 10, f"took {elapsed:.1f} s"
        with capsys.disabled():
            print(f"\n[{form}] 30 MB answer refused in {elapsed:.2f} s; peak RSS {before:.0f} -> {peak_rss_mb():.0f} MB")
        assert await execute(tools["echo"], {"text": "next"}) == "echo: next"
        if form != "no-id":
            assert "per MCP message" in message and manager.server_pid("h") == pid  # the same connection went on
        else:
            assert "does not say which request" in message and "restarted once" in message
    finally:
        await manager.aclose()


# -- item 12: nothing outlives agent-lsp ----------------------------------------------------------
def with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        with open(f"/proc/{entry}/stat", "rb") as stat:
                            if stat.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                                found.append(int(entry))
            except OSError:
                continue
    return found


async def wait_until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)
    return value


def stubborn(marker: str) -> dict:
    """Ignores stdin EOF and SIGTERM, and leaves a `setsid` helper; both carry `marker` in argv."""
    return server("--label", "stubborn", "--stubborn", marker)


async def assert_all_gone(marker: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while with_marker(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    left = with_marker(marker)
    for pid in left:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"left behind: {left}"


@pytest.fixture
def marker() -> str:
    return f"mcp-hostile-{uuid.uuid4().hex[:12]}"


async def test_aclose_ends_a_stubborn_server_and_its_setsid_helper(tmp_path, marker):
    decls, _ = from_user_settings({"s": stubborn(marker)})
    manager = McpManager(decls, roots=[tmp_path])
    await manager.tools()
    await wait_until(lambda: len(with_marker(marker)) >= 2, 10, "the server and its helper")
    started = time.monotonic()
    await manager.aclose()
    assert time.monotonic() - started < 8
    await assert_all_gone(marker)


async def test_lsp_shutdown_ends_a_stubborn_server_and_its_setsid_helper(model, workspace, marker):
    from tests.e2e.harness import start_editor

    init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}, "mcpServers": {"s": stubborn(marker)}}
    model.add("go", [{"tool_calls": [{"id": "e", "name": "s__echo", "arguments": {"text": "hi"}}]}, {"text": "done"}])
    editor = await start_editor(workspace, "visual-studio-code", init_options=init)
    try:
        started = await editor.run("go")
        report = await editor.wait_stop(started["runId"], 40)
        assert report["stopReason"] == "done"
        assert len(with_marker(marker)) >= 2
        await editor.shutdown(20)
        editor.client.exit(None)
        await editor.wait_exit(20)
    finally:
        await editor.quit()
    await assert_all_gone(marker)


def cli_run(model, workspace: Path, tmp_path: Path, marker: str, prompt: str) -> subprocess.Popen:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"approval": {"default": "allow"}, "mcpServers": {"s": stubborn(marker)}}))
    env = {**os.environ, "AGENT_LSP_SETTINGS": str(settings)}
    return subprocess.Popen([sys.executable, "-m", "agent_lsp", "run", prompt, "--base-url", model.base_url, "--model", "m",
                             "--workspace", str(workspace)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


async def test_agent_lsp_run_ends_a_stubborn_server_and_its_setsid_helper(model, workspace, tmp_path, marker):
    model.add("go", [{"tool_calls": [{"id": "e", "name": "s__echo", "arguments": {"text": "hi"}}]}, {"text": "done"}])
    proc = cli_run(model, workspace, tmp_path, marker, "go")
    try:
        out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "echo: hi" in json.dumps(model.requests[-1]["messages"])
    await assert_all_gone(marker)


async def test_sigkill_of_agent_lsp_ends_a_stubborn_server_and_its_setsid_helper(model, workspace, tmp_path, marker):
    model.add("go", [{"tool_calls": [{"id": "e", "name": "s__sleep", "arguments": {"seconds": 120}}]}, {"text": "done"}])
    proc = cli_run(model, workspace, tmp_path, marker, "go")
    try:
        await wait_until(lambda: len(with_marker(marker)) >= 2, 40, "the server and its helper")
        await wait_until(lambda: len(model.requests) >= 1, 20, "the model's first request")
        await asyncio.sleep(0.5)  # the call to s__sleep is in flight
        os.kill(proc.pid, signal.SIGKILL)  # agent-lsp only: not its process group
        await asyncio.to_thread(proc.wait, 10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    await assert_all_gone(marker)
