"""A replaced configuration leaves nothing running (issue 32): when the user's settings change
(the settings file, then didChangeConfiguration), the language servers and MCP servers the old
configuration started are stopped and the old endpoint's model client is closed, at once when no
run uses them, else when the last run using them ends."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types

from agent_lsp.testing.scripted_model import ScriptedModelServer
from tests.e2e.harness import start_editor
from tests.langservers.conftest import FAKE
from tests.mcp.conftest import alive, cmdline, descendants, helper_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(120)

GONE_WAIT = 20.0  # a loaded machine: the wait, not a speed claim


def configure(path: Path, model: ScriptedModelServer, helper: list[str] | None, ls_log: Path | None) -> None:
    """The user's own settings file (mcpServers, languageServers and baseUrl are trusted keys)."""
    settings: dict = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}}
    if helper is not None:
        settings["mcpServers"] = {"helper": {"command": helper[0], "args": helper[1:]}}
    if ls_log is not None:
        settings["languageServers"] = {"auto": False, "servers": {"fake": {
            "command": [sys.executable, str(FAKE), "plain"], "extensions": [".py"]}}}
    path.write_text(json.dumps(settings))


def use_both(call: str = "c") -> dict:
    """One turn that starts the helper MCP server and the language server."""
    return {"tool_calls": [
        {"id": f"{call}1", "name": "helper__environment", "arguments": {}},
        {"id": f"{call}2", "name": "hover", "arguments": {"path": "calc.py", "line": 1, "symbol": "add"}},
    ]}


def helper_pids(editor) -> list[int]:
    return [p for p in descendants(editor.process.pid) if "helper_server.py" in cmdline(p)]


async def gone(pids: list[int], timeout: float = GONE_WAIT) -> list[int]:
    """The pids still alive after waiting (at most `timeout`) for them to end."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


def change_configuration(editor) -> None:
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={}))


async def started_servers(editor, model, ls_log: Path, prompt: str) -> tuple[dict, list[int]]:
    """Start a run whose first turn starts both servers; their pids once both run."""
    started = await editor.run(prompt)
    await editor.wait_for(lambda: ls_log.exists() and helper_pids(editor), 30, "both servers")
    return started, [*helper_pids(editor), int(ls_log.read_text().split()[0])]


async def test_a_replaced_configuration_stops_its_servers_and_closes_its_model_client(
        model, workspace, helper_server, tmp_path, monkeypatch):
    settings_file = tmp_path / "user-settings.json"
    ls_log = tmp_path / "ls.log"
    monkeypatch.setenv("FAKE_LSP_LOG", str(ls_log))
    configure(settings_file, model, helper_server, ls_log)
    model.add("both", [use_both(), {"text": "used both"}])
    editor = await start_editor(workspace, "visual-studio-code")
    other = ScriptedModelServer().start()
    try:
        started, pids = await started_servers(editor, model, ls_log, "both please")
        report = await editor.wait_stop(started["runId"], 40)
        assert report["stopReason"] == "done", report
        assert all(alive(p) for p in pids)
        assert model.open_connections >= 1  # the client keeps its connection for the next run

        configure(settings_file, other, None, None)  # another endpoint, no servers
        change_configuration(editor)
        assert await gone(pids) == [], "the replaced configuration's servers still run"
        await editor.wait_for(lambda: model.open_connections == 0, GONE_WAIT, "the old client closed")

        other.add("again", [{"text": "from the new endpoint"}])
        again = await editor.run("again")
        assert (await editor.wait_stop(again["runId"], 40))["stopReason"] == "done"
        assert other.requests and len(model.requests) == 2
    finally:
        await editor.quit()
        other.stop()


async def test_a_run_in_flight_keeps_the_servers_it_uses_until_it_ends(
        model, workspace, helper_server, tmp_path, monkeypatch):
    settings_file = tmp_path / "user-settings.json"
    ls_log = tmp_path / "ls.log"
    monkeypatch.setenv("FAKE_LSP_LOG", str(ls_log))
    configure(settings_file, model, helper_server, ls_log)
    settings = json.loads(settings_file.read_text())
    settings["approval"] = {"default": "ask", "tools": {"helper__environment": "allow"}}
    settings_file.write_text(json.dumps(settings))
    model.add("hold", [use_both(), {"tool_calls": [
        {"id": "w1", "name": "write_file", "arguments": {"path": "new.txt", "content": "x\n"}}]},
        {"text": "done holding"}])
    editor = await start_editor(workspace, "visual-studio-code")
    release = asyncio.Event()

    async def answer_later(params):
        await release.wait()
        return "Allow"

    editor.approval_answers = [answer_later]
    try:
        started, pids = await started_servers(editor, model, ls_log, "hold please")
        await editor.wait_for(lambda: editor.approval_requests, 30, "the approval")
        configure(settings_file, model, None, None)
        change_configuration(editor)
        # The replaced configuration's servers stay while the run that uses them goes on...
        assert await editor.execute("agentLsp.sessions", {}) is not None
        await asyncio.sleep(1.0)
        assert all(alive(p) for p in pids)
        release.set()
        report = await editor.wait_stop(started["runId"], 40)
        assert report["stopReason"] == "done", report
        # ...and are stopped once it ended.
        assert await gone(pids) == []
    finally:
        await editor.quit()


async def test_a_server_that_failed_to_start_is_tried_again_only_once_its_configuration_changed(
        model, workspace, tmp_path):
    """Issue 32: after a failed start, code-intel calls do not start it again (one line in the
    log, said once); a changed `languageServers` configuration is a new server, started anew."""
    settings_file, starts = tmp_path / "user-settings.json", tmp_path / "starts.log"

    def failing(flag: str) -> None:
        command = ["sh", "-c", f"echo {flag} >> {starts}; echo 'Error: no project here' >&2; exit 2"]
        settings_file.write_text(json.dumps({"model": "m", "baseUrl": model.base_url, "languageServers": {
            "auto": False, "servers": {"pyls": {"command": command, "extensions": [".py"]}}}}))

    hover = {"name": "hover", "arguments": {"path": "calc.py", "line": 1, "symbol": "add"}}
    failing("first")
    model.add("twice", [{"tool_calls": [{"id": "h1", **hover}]}, {"tool_calls": [{"id": "h2", **hover}]},
                        {"text": "no luck"}])
    model.add("again", [{"tool_calls": [{"id": "h3", **hover}]}, {"text": "still no luck"}])
    editor = await start_editor(workspace, "visual-studio-code")
    try:
        started = await editor.run("twice")
        assert (await editor.wait_stop(started["runId"], 40))["stopReason"] == "done"
        assert starts.read_text().split() == ["first"]
        said = [line for line in editor.stderr if "failed to start" in line]
        assert len(said) == 1 and "`pyls` failed to start: exited with code 2: Error: no project here" in said[0]

        failing("second")
        change_configuration(editor)
        started = await editor.run("again")
        assert (await editor.wait_stop(started["runId"], 40))["stopReason"] == "done"
        assert starts.read_text().split() == ["first", "second"]
    finally:
        await editor.quit()
