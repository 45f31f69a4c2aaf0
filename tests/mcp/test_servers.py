"""Real servers nobody here wrote: mcp-server-time, mcp-server-git, server-everything (stdio + HTTP)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import pytest_asyncio

from agent_lsp.agent.tools.base import ToolError
from agent_lsp.mcp.config import from_user_settings
from agent_lsp.mcp.manager import McpManager
from agent_lsp.mcp.tools import McpTool

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]


async def run(tool: McpTool | None, arguments: dict) -> str:
    """What the loop does with a tool call: parse, prepare (approval detail), execute."""
    assert tool is not None
    prepared = await tool.prepare(tool.parse(arguments), None)
    return await prepared.execute()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "notes.txt").write_text("hello\n")
    return path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def manager(third_party, repo):
    decls, problems = from_user_settings({
        "time": {"command": third_party.time, "args": ["--local-timezone", "UTC"]},
        "git": {"command": third_party.git, "args": ["--repository", str(repo)]},
        "everything": {"command": third_party.everything, "args": ["stdio"]},
    })
    assert not problems
    manager = McpManager(decls, roots=[repo], request_timeout=30)
    yield manager
    await manager.aclose()


async def test_tools_of_each_server(manager: McpManager):
    assert [s["state"] for s in manager.status()] == ["idle"] * 3  # lazy: nothing started yet
    tools = {t.name: t for t in await manager.tools()}
    status = {s["name"]: s for s in manager.status()}
    assert {name: s["state"] for name, s in status.items()} == {"time": "running", "git": "running", "everything": "running"}
    assert {"time__get_current_time", "time__convert_time", "git__git_status", "git__git_commit", "everything__echo", "everything__get-sum", "everything__get-tiny-image"} <= set(tools)
    assert set(status["git"]["tools"]) == {n for n in tools if n.startswith("git__")}
    # readOnlyHint from the user's own configuration runs like a read-only tool; the rest asks.
    assert tools["time__get_current_time"].read_only and tools["git__git_status"].read_only
    assert not tools["git__git_commit"].read_only and not tools["everything__toggle-simulated-logging"].read_only
    schema = tools["git__git_status"].schema()["function"]
    assert schema["parameters"]["required"] == ["repo_path"] and schema["description"].startswith("[MCP server git] ")
    assert await manager.tools() == list(tools.values())  # the second call starts nothing new


async def test_time(manager: McpManager):
    await manager.tools()
    answer = json.loads(await run(manager.find("time__get_current_time"), {"timezone": "UTC"}))
    assert answer["timezone"] == "UTC" and answer["datetime"].endswith("+00:00")


async def test_git_status(manager: McpManager, repo: Path):
    await manager.tools()
    text = await run(manager.find("git__git_status"), {"repo_path": str(repo)})
    assert "Untracked files" in text and "notes.txt" in text


async def test_everything_echo_sum_image_and_error(manager: McpManager):
    await manager.tools()
    assert await run(manager.find("everything__echo"), {"message": "héllo 😀"}) == "Echo: héllo 😀"
    assert "5" in await run(manager.find("everything__get-sum"), {"a": 2, "b": 3})
    image = await run(manager.find("everything__get-tiny-image"), {})
    assert "[image: image/png, " in image and "The image above is the MCP logo." in image
    with pytest.raises(ToolError, match="expected number"):  # the server answers isError: true
        await run(manager.find("everything__get-sum"), {"a": "two", "b": 3})
    with pytest.raises(ToolError, match="missing required message"):  # our light check, no round trip
        await run(manager.find("everything__echo"), {})


async def test_everything_over_streamable_http(everything_http: str):
    decls, problems = from_user_settings({"web": {"type": "http", "url": everything_http, "headers": {"X-Test": "${env:HOME}"}}})
    manager = McpManager(decls, roots=[Path.cwd()], request_timeout=30)
    try:
        tools = {t.name: t for t in await manager.tools()}
        assert manager.status()[0]["state"] == "running", manager.status()
        assert {"web__echo", "web__get-sum"} <= set(tools)
        assert await run(tools["web__echo"], {"message": "over http"}) == "Echo: over http"
        assert "[image: image/png, " in await run(tools["web__get-tiny-image"], {})
    finally:
        await manager.aclose()
    assert manager.status()[0]["state"] == "idle"
