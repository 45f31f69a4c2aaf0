"""Core features seen through ACP: MCP servers passed in session/new, delegates, truncated
results, and a wire that holds nothing but the protocol (no secret in it)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tests.acp.conftest import model_settings
from tests.unit.kit import API_KEY, call, last_tool_results, tools_reply

MCP_SERVER = '''
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("helper")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def fetch_page(url: str) -> str:
    """Pretend to fetch a page."""
    return "<html>" + url + "</html>"


server.run()
'''


def running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def test_mcp_servers_from_session_new(connect, model, workspace: Path, tmp_path: Path):
    script = tmp_path / "acp_mcp_helper.py"
    script.write_text(MCP_SERVER)
    model.add("mcp", [
        tools_reply(call("helper__shout", "c-shout", text="hi"), call("helper__fetch_page", "c-fetch", url="http://x")),
        {"text": "shouted"},
    ])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace, [{"name": "helper", "command": sys.executable, "args": [str(script)], "env": []}])
    client.permissions("allow")
    assert client.prompt(session_id, "mcp: shout hi", timeout=60)["stopReason"] == "end_turn"
    offered = {t["function"]["name"] for t in model.requests_for("mcp")[0]["tools"]}
    assert {"helper__shout", "helper__fetch_page"} <= offered
    calls = {u["toolCallId"]: u for u in client.updates(session_id, "tool_call")}
    assert calls["c-shout"]["kind"] == "other" and calls["c-fetch"]["kind"] == "fetch"
    assert last_tool_results(model.requests_for("mcp")[-1])["c-shout"] == "HI"
    # readOnlyHint from a server the client passed (the user's own): no question; the fetch asks
    assert [p["params"]["toolCall"]["toolCallId"] for p in client.of("permission")] == ["c-fetch"]
    assert client.close()["code"] == 0
    deadline = time.monotonic() + 5
    while running(str(script)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(str(script)) == []


def test_delegate_and_truncation(connect, model, workspace: Path):
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(2000)))
    model.add("main-task", [
        tools_reply(call("delegate", "c-del", task="sub-task: where is add?"), call("read_file", "c-big", path="big.txt")),
        {"text": "all done"},
    ])
    model.add("sub-task", [tools_reply(call("search", "c-sub", pattern="def add")), {"text": "calc.py line 1"}])
    client = connect(model_settings(model, toolOutputLimit=500))
    client.initialize()
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "main-task: find add")["stopReason"] == "end_turn"
    calls = {u["toolCallId"]: u for u in client.updates(session_id, "tool_call")}
    assert calls["c-del"]["kind"] == "think"
    assert calls["c-sub"]["kind"] == "search" and calls["c-sub"]["title"].startswith("[main/1] Search")
    assert calls["c-sub"]["_meta"]["agentLsp"]["agentId"] == "main/1"
    done = {u["toolCallId"]: u for u in client.updates(session_id, "tool_call_update") if u.get("status")}
    assert done["c-del"]["status"] == "completed"
    big = done["c-big"]
    assert big["rawOutput"]["truncated"] is True
    assert "truncated for the model" in big["content"][-1]["content"]["text"]
    assert calls["c-big"]["locations"] == [{"path": str(workspace / "big.txt")}]
    client.close()


def test_the_wire_holds_only_the_protocol_and_no_secret(connect, model, workspace: Path):
    model.add("secret", [tools_reply(call("run_command", "c-env", command="env")), {"text": "ok"}])
    client = connect(model_settings(model, approval={"default": "allow"}))
    client.initialize()
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "secret: show env")["stopReason"] == "end_turn"
    calls = {u["toolCallId"]: u for u in client.updates(session_id, "tool_call")}
    assert calls["c-env"]["kind"] == "execute" and calls["c-env"]["title"] == "Run `env`"
    client.close()
    lines = client.wire.read_text().splitlines()
    assert lines and all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)
    assert API_KEY not in client.wire.read_text()
    assert client.schema_problems() == []  # none dropped or salvaged by the TypeScript SDK's schema
    sent = [json.loads(line) for line in lines if json.loads(line).get("method") == "session/update"]
    assert {m["params"]["update"]["sessionUpdate"] for m in sent} >= {
        "available_commands_update", "tool_call", "tool_call_update", "agent_message_chunk", "usage_update", "session_info_update"}


def test_a_workspace_mcp_server_asks_consent_as_a_permission_of_kind_other(connect, model, workspace: Path, tmp_path: Path):
    script = tmp_path / "acp_mcp_workspace.py"
    script.write_text(MCP_SERVER)
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"ws": {"command": sys.executable, "args": [str(script)]}}}))
    model.add("consent", [tools_reply(call("ws__shout", "c-shout", text="yo")), {"text": "done"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allow")
    assert client.prompt(session_id, "consent: shout", timeout=60)["stopReason"] == "end_turn"
    consent = client.of("permission")[0]["params"]
    assert consent["sessionId"] == session_id
    assert consent["toolCall"]["kind"] == "other" and "ws" in consent["toolCall"]["title"]
    assert [o["kind"] for o in consent["options"]] == ["allow_once", "allow_always", "reject_once"]
    assert last_tool_results(model.requests_for("consent")[-1])["c-shout"] == "YO"
    client.close()


def test_the_agent_exits_when_the_client_goes_away_and_leaves_no_process(connect, model, workspace: Path):
    marker = "31.4159"
    model.add("long", [tools_reply(call("run_command", "c-sleep", command=f"sleep {marker}")), {"text": "slept"}])
    client = connect(model_settings(model, approval={"default": "allow"}))
    client.initialize()
    session_id = client.new_session(workspace)
    client.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "long: wait"}]})
    deadline = time.monotonic() + 20
    while not running(f"sleep {marker}"):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    started = time.monotonic()
    exit_event = client.close(timeout=15)
    assert time.monotonic() - started < 10  # CONTRACT: within two seconds; tests allow 5x
    assert exit_event["code"] == 0
    assert running(f"sleep {marker}") == []
