"""MCP servers through the real LSP server (issue 15): the user's `mcpServers` pasted into the
settings give the agent their tools; a repository's settings cannot add servers; a workspace's
own .mcp.json starts only after consent (remembered, asked again when the declaration changes);
status for clients; no server process outlives the language server."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.e2e.harness import start_editor, tool_messages
from tests.mcp.conftest import alive, descendants, helper_server, third_party  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(90)


async def stop(editor, prompt: str, timeout: float = 40, **extra) -> dict:
    started = await editor.run(prompt, **extra)
    return await editor.wait_stop(started["runId"], timeout)


def time_call(call_id: str = "t1") -> dict:
    return {"tool_calls": [{"id": call_id, "name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]}


async def test_a_pasted_mcp_servers_block_gives_the_agent_its_tools(open_editor, model, third_party):
    model.add("time", [time_call(), {"text": "it is now"}])
    editor = await open_editor(init={"mcpServers": {"time": {"command": third_party.time}}})
    report = await stop(editor, "what time is it")
    assert report["stopReason"] == "done", report
    tools = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "time__get_current_time" in tools
    result = tool_messages(model.requests[-1])["t1"]
    assert "UTC" in result and "datetime" in result
    status = await editor.execute("agentLsp.mcpServers", {})
    assert status[0]["name"] == "time" and status[0]["source"] == "user" and status[0]["state"] == "running"
    assert "time__get_current_time" in status[0]["tools"]


async def test_mcp_servers_from_workspace_configuration_are_ignored(open_editor, model, workspace, helper_server, tmp_path):
    sentinel = tmp_path / "started.flag"
    model.add("repo", [{"text": "ok"}])
    editor = await open_editor(configuration={"mcpServers": {"evil": {"command": helper_server[0],
                                                                      "args": [*helper_server[1:], "--sentinel", str(sentinel)]}}})
    await stop(editor, "repo settings")
    assert not sentinel.exists()
    assert not any("evil__" in t["function"]["name"] for t in model.requests[0]["tools"])
    assert await editor.execute("agentLsp.mcpServers", {}) == []


async def test_a_workspace_server_needs_consent_remembered_and_asked_again_when_changed(model, workspace, helper_server, tmp_path):
    sentinel = tmp_path / "started.flag"
    declaration = {"mcpServers": {"helper": {"command": helper_server[0], "args": [*helper_server[1:], "--sentinel", str(sentinel)]}}}
    (workspace / ".mcp.json").write_text(json.dumps(declaration))
    init = {"model": "m", "baseUrl": model.base_url}
    model.add("consent", [{"text": "one"}, {"text": "two"}, {"text": "three"}])

    editor = await start_editor(workspace, "visual-studio-code", init_options=init)
    try:
        editor.approval_answers = ["Deny"]
        await stop(editor, "consent please")
        [ask] = editor.approval_requests
        assert "helper" in ask.message and helper_server[0] in ask.message and "--sentinel" in ask.message
        assert [a.title for a in ask.actions] == ["Allow", "Allow always for this workspace", "Deny"]
        assert not sentinel.exists(), "never started before consent"
        status = await editor.execute("agentLsp.mcpServers", {})
        assert status[0]["state"] == "denied" and status[0]["source"] == ".mcp.json"
    finally:
        await editor.quit()

    again = await start_editor(workspace, "visual-studio-code", init_options=init)
    try:
        await stop(again, "consent please again")
        assert again.approval_requests == [], "the denial was remembered for this exact declaration"
        assert not sentinel.exists()
    finally:
        await again.quit()

    declaration["mcpServers"]["helper"]["env"] = {"CHANGED": "1"}
    (workspace / ".mcp.json").write_text(json.dumps(declaration))
    changed = await start_editor(workspace, "visual-studio-code", init_options=init)
    try:
        changed.approval_answers = ["Allow"]
        await stop(changed, "consent please once more")
        assert len(changed.approval_requests) == 1, "a changed declaration asks again"
        assert sentinel.exists()
    finally:
        await changed.quit()


@pytest.mark.parametrize("ending", ["shutdown", "stdin-eof", "cancel-mid-call"])
async def test_no_mcp_server_outlives_the_language_server(model, workspace, helper_server, ending):
    init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"},
            "mcpServers": {"helper": {"command": helper_server[0], "args": helper_server[1:]}}}
    model.add("sleepy", [{"tool_calls": [{"name": "helper__sleep", "arguments": {"seconds": 60}}]}, {"text": "woke"}])
    editor = await start_editor(workspace, "visual-studio-code", init_options=init)
    started = await editor.run("sleepy")
    await editor.wait_for(lambda: [e for e in editor.events(started["runId"], "status") if "helper__sleep" in e["text"] or "sleep" in e["text"]], 30, "the call")
    servers = await editor.wait_for(lambda: [p for p in descendants(editor.process.pid) if alive(p)], 15, "the server process")
    if ending == "cancel-mid-call":
        await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
        report = await editor.wait_stop(started["runId"])
        assert report["stopReason"] == "cancelled"
        await editor.shutdown(10)
        editor.client.exit(None)
    elif ending == "shutdown":
        await editor.shutdown(10)
        editor.client.exit(None)
    else:
        editor.close_stdin()
    await editor.wait_exit(10)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in servers) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not [p for p in servers if alive(p)], "an MCP server process survived"
    await editor.quit()


async def test_a_server_that_fails_is_shown_once_with_its_stderr(open_editor, model, tmp_path):
    broken = tmp_path / "broken.sh"
    broken.write_text("#!/bin/sh\necho 'BROKEN-SERVER: missing config file' >&2\nexit 3\n")
    broken.chmod(0o755)
    model.add("broken", [{"text": "ok"}, {"text": "ok again"}])
    editor = await open_editor(init={"mcpServers": {"broken": {"command": str(broken)}}})
    report = await stop(editor, "broken server")
    assert report["stopReason"] == "done", "a failing server costs its tools, never the run"
    report = await stop(editor, "broken server again")
    shown = [m.message for m in editor.client.messages if "broken" in m.message]
    assert len(shown) == 1 and "BROKEN-SERVER: missing config file" in shown[0]
    status = await editor.execute("agentLsp.mcpServers", {})
    assert status[0]["state"] == "failed" and "BROKEN-SERVER" in status[0]["error"]
    assert any(e["kind"] == "status" and "broken" in e["text"] for e in editor.stream)


def test_the_workspace_file_shapes_users_have(tmp_path):
    """VS Code's .vscode/mcp.json shape with ${workspaceFolder}, and .mcp.json, both read."""
    from agent_lsp.mcp.config import from_workspace

    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode/mcp.json").write_text('{"servers": {"fs": {"command": "x", "args": ["${workspaceFolder}"]}}}')
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"git": {"command": "y"}}}')
    declarations, problems = from_workspace([Path(tmp_path)])
    assert problems == [] and sorted((d.name, d.source) for d in declarations) == [("fs", ".vscode/mcp.json"), ("git", ".mcp.json")]
