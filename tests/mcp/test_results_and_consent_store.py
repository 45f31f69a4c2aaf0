"""Results as text (real `mcp` result types), approval detail, the consent prompt and store."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agent_lsp.agent.tools.base import ToolError
from agent_lsp.mcp.config import from_user_settings, from_workspace
from agent_lsp.mcp.consent import ConsentStore, consent_prompt
from agent_lsp.mcp.display import failure_message
from agent_lsp.mcp.tools import McpTool, render_result

PNG = base64.b64encode(b"\x89PNG" + bytes(12341)).decode()


def test_content_is_rendered_as_text():
    result = CallToolResult(content=[
        TextContent(text="first"),
        ImageContent(data=PNG, mime_type="image/png"),
        AudioContent(data=base64.b64encode(b"abc").decode(), mime_type="audio/wav"),
        EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="inside")),
        EmbeddedResource(resource=BlobResourceContents(uri="file:///b.bin", blob=base64.b64encode(b"12345").decode(), mime_type="application/zip")),
        ResourceLink(name="doc", uri="file:///doc.md", description="the docs"),
        TextContent(text="last"),
    ])
    assert render_result(result).splitlines() == [
        "first",
        "[image: image/png, 12345 bytes]",
        "[audio: audio/wav, 3 bytes]",
        "[resource file:///a.txt]",
        "inside",
        "[resource file:///b.bin: application/zip, 5 bytes]",
        "[resource link doc file:///doc.md: the docs]",
        "last",
    ]


def test_structured_content_error_and_empty():
    structured = CallToolResult(content=[], structured_content={"temperature": 21, "unit": "°C"})
    assert json.loads(render_result(structured)) == {"temperature": 21, "unit": "°C"}
    both = CallToolResult(content=[TextContent(text="21 °C")], structured_content={"t": 21})
    assert render_result(both) == "21 °C"  # the text already says it
    with pytest.raises(ToolError, match="repository not found"):
        render_result(CallToolResult(content=[TextContent(text="repository not found")], is_error=True))
    with pytest.raises(ToolError, match="without a message"):
        render_result(CallToolResult(content=[], is_error=True))
    assert render_result(CallToolResult(content=[])) == "(no output)"


async def test_tool_schema_parse_and_detail():
    calls = []

    async def call(tool, args):
        calls.append((tool, args))
        return CallToolResult(content=[TextContent(text="ok")])

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = McpTool(server="search", tool="find", description="Find  things\nfast", input_schema=schema, read_only=True, call=call)
    function = tool.schema()["function"]
    assert function["name"] == "search__find" and function["description"] == "[MCP server search] Find things fast"
    assert function["parameters"] == {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert McpTool(server="s", tool="t", description="", input_schema={"type": "string"}, read_only=False, call=call).schema()["function"]["parameters"] == {"type": "object"}
    with pytest.raises(ToolError, match="missing required q"):
        tool.parse({})
    with pytest.raises(ToolError, match="JSON object"):
        tool.parse(["q"])  # type: ignore[arg-type]
    prepared = await tool.prepare(tool.parse({"q": "x\u202ey", "n": 1}), None)
    assert prepared.detail.splitlines()[0] == "search__find"
    assert "\\u202e" in prepared.detail and "\u202e" not in prepared.detail  # bidi shown, not obeyed
    assert await prepared.execute() == "ok" and calls == [("find", {"q": "x\u202ey", "n": 1})]
    long = await tool.prepare({"q": "z" * 5000}, None)
    assert len(long.detail) < 2200 and "more characters not shown" in long.detail


def test_consent_prompt_shows_names_not_values(tmp_path: Path):
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "db": {"command": "npx", "args": ["-y", "db-server", "--url", "${env:DATABASE_URL}"], "env": {"DB_PASSWORD": "hunter2"}, "cwd": "tools"},
        "web": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer sk-live-123"}},
    }}))
    db, web = from_workspace([tmp_path])[0]
    text = consent_prompt(db, default_cwd=str(tmp_path))
    assert "`db`" in text and str(tmp_path / ".mcp.json") in text
    assert "npx -y db-server --url '${env:DATABASE_URL}'" in text and "Working directory: tools" in text
    assert "DB_PASSWORD" in text and "hunter2" not in text and "DATABASE_URL" in text
    text = consent_prompt(web)
    assert "https://mcp.example.com/mcp" in text and "Authorization" in text and "sk-live-123" not in text


def test_consent_store_files(tmp_path: Path):
    path = tmp_path / "state" / "deep" / "mcp-consent.json"
    decl = from_user_settings({"s": {"command": "x"}})[0][0]
    store = ConsentStore(path)
    assert store.get("/ws", decl.fingerprint) is None
    store.remember("/ws", decl, "deny")
    store.remember("/other", decl, "allow")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    again = ConsentStore(path)  # a new process reads what the last one wrote
    assert again.get("/ws", decl.fingerprint) == "deny" and again.get("/other", decl.fingerprint) == "allow"
    assert again.get("/ws", "0" * 64) is None
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".mcp-consent-")] == []  # no temp files left
    path.write_text("{broken")
    assert ConsentStore(path).get("/ws", decl.fingerprint) is None  # unreadable = nothing remembered, no crash


def test_failure_message_is_one_line():
    line = failure_message("git", "command not found: uvx", ["Traceback (most recent call last):", "  File x", "ModuleNotFoundError: No module named 'git'\x1b[0m"])
    assert "\n" not in line and line.startswith("MCP server `git` failed to start: command not found: uvx; last stderr: ")
    assert "ModuleNotFoundError" in line and "\x1b" not in line
    assert failure_message("a", "x" * 1000).endswith("…")
