"""Declarations as written: the user's settings, the workspace's files, ACP; expansion; names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lsp.agent.tools.base import Tool
from agent_lsp.mcp.config import (
    MAX_FILE_BYTES,
    from_acp,
    from_user_settings,
    from_workspace,
    strip_jsonc,
)
from agent_lsp.mcp.launch import LaunchError, resolve_launch
from agent_lsp.mcp.tools import McpTool, model_tool_name, tool_aliases

KEY = "OPENAI_API_KEY"


def test_user_settings_shapes_and_problems():
    decls, problems = from_user_settings({
        "git": {"command": "uvx", "args": ["mcp-server-git", 3], "env": {"A": "1", "B": None, "C": 2}, "cwd": "sub"},
        "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}},
        "bare": {"url": "http://127.0.0.1:9/mcp"},
        "explicit": {"type": "stdio", "command": "srv"},
        "old": {"type": "sse", "url": "https://example.com/sse"},
        "nocmd": {"args": ["x"]},
        "badargs": {"command": "x", "args": "--flag"},
        "badenv": {"command": "x", "env": {"A": ["list"]}},
        "notobj": "npx server",
        "weird": {"type": "websocket", "url": "ws://x"},
        "badurl": {"type": "http", "url": "ftp://x"},
    })
    by = {d.name: d for d in decls}
    assert set(by) == {"git", "remote", "bare", "explicit"}
    assert by["git"].transport == "stdio" and by["git"].args == ("mcp-server-git", "3")
    assert by["git"].env == {"A": "1", "B": None, "C": "2"} and by["git"].cwd == "sub"
    assert by["remote"].transport == "http" and by["remote"].headers == {"Authorization": "Bearer ${env:TOKEN}"}
    assert by["bare"].transport == "http"  # {url} without type is streamable HTTP
    assert all(d.source == "user" and d.trusted for d in decls)
    text = "\n".join(problems)
    for name, key in [("old", "sse"), ("nocmd", "command"), ("badargs", "args"), ("badenv", "A"), ("notobj", "object"), ("weird", "websocket"), ("badurl", "url")]:
        assert any(f"`{name}`" in p and key in p for p in problems), (name, text)
    assert from_user_settings(["not", "a", "dict"])[1]  # a problem, not an exception
    assert from_user_settings(None) == ([], [])


def test_fingerprint_is_of_the_declaration_as_written():
    one = from_user_settings({"s": {"command": "x", "args": ["${workspaceFolder}"]}})[0][0]
    same = from_user_settings({"s": {"args": ["${workspaceFolder}"], "command": "x"}})[0][0]
    changed = from_user_settings({"s": {"command": "x", "args": ["${workspaceFolder}", "-v"]}})[0][0]
    assert one.fingerprint == same.fingerprint != changed.fingerprint
    assert len(one.fingerprint) == 64


def test_workspace_files(tmp_path: Path):
    root = tmp_path / "ws"
    (root / ".vscode").mkdir(parents=True)
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"a": {"command": "srv-a"}}}))
    (root / ".vscode" / "mcp.json").write_text("""{
      // VS Code's file is JSON with comments
      "inputs": [{"id": "token", "type": "promptString"}],
      "servers": {
        "b": {"type": "stdio", "command": "srv-b", "args": ["${workspaceFolder}", "a//b", "/*x*/"],},
        /* trailing commas too */
        "c": {"type": "http", "url": "https://example.com/mcp", "headers": {"X": "${input:token}"}},
      },
    }""")
    other = tmp_path / "other"
    other.mkdir()
    (other / ".mcp.json").write_text("{not json")
    decls, problems = from_workspace([root, other, tmp_path / "missing"])
    by = {d.name: d for d in decls}
    assert by["a"].source == ".mcp.json" and by["a"].origin == str(root / ".mcp.json")
    assert by["b"].source == ".vscode/mcp.json" and by["b"].args == ("${workspaceFolder}", "a//b", "/*x*/")
    assert by["c"].transport == "http"
    assert not any(d.trusted for d in decls)
    assert len(problems) == 1 and "invalid JSON" in problems[0] and str(other / ".mcp.json") in problems[0]


def test_workspace_files_read_safely(tmp_path: Path):
    big, fifo, directory, link = (tmp_path / n for n in ("big", "fifo", "dir", "link"))
    for root in (big, fifo, directory, link):
        root.mkdir()
    (big / ".mcp.json").write_text('{"mcpServers": {}, "pad": "' + "x" * MAX_FILE_BYTES + '"}')
    os.mkfifo(fifo / ".mcp.json")  # a FIFO would block a naive read forever
    (directory / ".mcp.json").mkdir()
    (link / ".mcp.json").symlink_to(big / ".mcp.json")
    decls, problems = from_workspace([big, fifo, directory, link])
    assert decls == []
    assert sum("larger than" in p for p in problems) == 2
    assert sum("not a regular file" in p for p in problems) == 2


def test_jsonc_keeps_strings_intact():
    text = '{"a": "// not a comment", "b": "/* nor this */", "c": "q\\"//", "d": [1, 2,], } // end'
    assert json.loads(strip_jsonc(text)) == {"a": "// not a comment", "b": "/* nor this */", "c": 'q"//', "d": [1, 2]}


def test_acp_servers():
    decls, problems = from_acp([
        {"name": "fs", "command": "srv", "args": ["-x"], "env": [{"name": "A", "value": "1"}]},
        {"type": "http", "name": "web", "url": "https://example.com/mcp", "headers": [{"name": "H", "value": "v"}]},
        {"type": "sse", "name": "old", "url": "https://example.com/sse", "headers": []},
        {"command": "nameless"},
    ])
    by = {d.name: d for d in decls}
    assert by["fs"].env == {"A": "1"} and by["fs"].source == "acp" and by["fs"].trusted
    assert by["web"].headers == {"H": "v"}
    assert len(problems) == 2 and any("`old`" in p and "sse" in p for p in problems)


def test_expansion(tmp_path: Path):
    env = {"HOME": "/home/u", "TOKEN": "t0k", KEY: "sk-secret", "PATH": "/bin", "DROP": "x"}
    user = from_user_settings({"u": {"command": "${userHome}/bin/srv", "args": ["${workspaceFolder}", "${env:TOKEN}", "${env:NOPE}", "${unknown}"], "env": {"K": "${env:" + KEY + "}", "DROP": None}, "cwd": "sub"}})[0][0]
    launch = resolve_launch(user, roots=[tmp_path], env=env, api_key_env=KEY)
    assert launch.command == "/home/u/bin/srv"
    assert launch.args == (str(tmp_path), "t0k", "", "${unknown}")
    assert launch.cwd == str(tmp_path / "sub")
    assert launch.env["K"] == "sk-secret"  # the user's own server may name the key
    assert KEY not in launch.env and "DROP" not in launch.env  # ...but does not inherit it
    assert not launch.problems

    named = from_user_settings({"u": {"command": "srv", "env": {KEY: "${env:" + KEY + "}"}}})[0][0]
    assert resolve_launch(named, roots=[tmp_path], env=env, api_key_env=KEY).env[KEY] == "sk-secret"
    assert resolve_launch(named, roots=[], env=env, api_key_env=KEY).cwd is None

    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"w": {"command": "srv", "args": ["${env:TOKEN}"], "env": {KEY: "literal"}}}}))
    workspace = from_workspace([tmp_path])[0][0]
    launch = resolve_launch(workspace, roots=[tmp_path], env=env, api_key_env=KEY)
    assert launch.args == ("t0k",)
    assert KEY not in launch.env and "sk-secret" not in json.dumps(launch.env)
    assert len(launch.problems) == 1 and all(KEY in p for p in launch.problems)
    assert launch.cwd == str(tmp_path)  # default: the first workspace folder
    # A workspace server asking for the key is not started at all (tests/reliability/test_key_children.py).
    for asks in ({"args": ["${env:" + KEY + "}"]}, {"env": {"X": "${env:" + KEY + "}"}}):
        (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"w": {"command": "srv", **asks}}}))
        with pytest.raises(LaunchError, match=KEY) as refused:
            resolve_launch(from_workspace([tmp_path])[0][0], roots=[tmp_path], env=env, api_key_env=KEY)
        assert "sk-secret" not in str(refused.value)

    needs_input = from_user_settings({"i": {"type": "http", "url": "https://x/mcp", "headers": {"A": "${input:tok}"}}})[0][0]
    with pytest.raises(LaunchError, match="tok"):
        resolve_launch(needs_input, roots=[tmp_path], env=env, api_key_env=KEY)


def test_tool_names_sanitised_and_cut():
    assert model_tool_name("git", "git_status") == "git__git_status"
    assert model_tool_name("my.server", "do it/now") == "my_server__do_it_now"
    long = model_tool_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long != model_tool_name("s" * 40, "t" * 41)
    for name in (long, model_tool_name("ü", "ß" * 80), model_tool_name("a", "b", force_hash=True)):
        assert len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)

    async def call(tool, args):
        return None

    tool = McpTool(server="my.server", tool="do it", description="d", input_schema=None, read_only=False, call=call)
    assert tool.name == "my_server__do_it"
    assert tool_aliases(tool) == {"my_server__do_it", "my.server__do it"}
    assert isinstance(tool, Tool) and tool_aliases(tool) >= {tool.name}


def test_import_is_light():
    """`import agent_lsp.mcp` must not load the SDK, pygls or lsprotocol (start-up time, layering)."""
    code = "import sys, agent_lsp.mcp; print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'anyio', 'httpx2', 'pygls', 'lsprotocol'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
