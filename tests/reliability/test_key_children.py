"""Issue 20 item 3: the model's API key reaches no child and no model request. Children get no
variable that holds the key (by name or by value, whatever its name): commands, MCP servers, rg
and git; a workspace MCP server that asks for it, or carries it in its command line, is not
started; /proc/<agent-lsp pid>/environ no longer shows it and the process is non-dumpable
(CONTRACT Decision 45); and no tool result the model reads carries it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.fs.ripgrep import find_rg
from agent_lsp.agent.loop.run import RunOptions, Session, run_task
from agent_lsp.mcp.config import from_user_settings, from_workspace
from agent_lsp.mcp.manager import McpManager
from tests.unit.kit import (
    API_KEY,
    Events,
    ScriptedApprover,
    call,
    last_tool_results,
    make_settings,
    run,
    tools_reply,
)

pytestmark = pytest.mark.timeout(90)

OTHER_KEY = "sk-other-model-key-0987654321"  # the key of a custom `apiKeyEnv`
NOBODY = 65534
# Any process will do as an MCP server here: this one writes what it was given, then exits
# (the MCP handshake then fails, which is fine: the question is what it received).
ENV_DUMP = """
import json, os, sys
with open(sys.argv[1], "a") as out:
    out.write(json.dumps({"env": dict(os.environ), "argv": sys.argv[2:]}) + "\\n")
"""
NOTE_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def read_note(path: str) -> str:
    """The text of a note."""
    with open(path) as handle:
        return handle.read()


server.run()
'''


def hostile_env(**more: str) -> dict[str, str]:
    """Our environment with the key under its own name, under another one, and inside a value."""
    return {**os.environ, "OPENAI_API_KEY": API_KEY, "LLM_API_KEY": API_KEY, "AUTH_HEADER": f"Bearer {API_KEY}",
            "DEPLOY_URL": f"https://bot:{API_KEY}@deploy.example/", **more}


@pytest.fixture
def dumper(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "dump_env.py"
    script.write_text(ENV_DUMP)
    return script, tmp_path / "dump.jsonl"


def declare(root: Path, servers: dict) -> list:
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    decls, problems = from_workspace([root])
    assert not problems
    return decls


async def start_all(decls: list, workspace: Path, env: dict[str, str], api_key_env: str = "OPENAI_API_KEY") -> list[dict]:
    manager = McpManager(decls, roots=[workspace], env=env, api_key_env=api_key_env, workspace_policy="allow")
    try:
        await manager.tools()
        return manager.status()
    finally:
        await manager.aclose()


# -- MCP servers ------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["args", "env"])
async def test_a_workspace_server_asking_for_any_variable_that_holds_the_key_is_not_started(workspace, dumper, field):
    script, dump = dumper
    asks = ({"args": [str(script), str(dump), "${env:LLM_API_KEY}"]} if field == "args"
            else {"args": [str(script), str(dump)], "env": {"TOKEN": "${env:LLM_API_KEY}"}})
    status = await start_all(declare(workspace, {"leaky": {"command": sys.executable, **asks}}), workspace, hostile_env())
    assert status[0]["state"] == "failed"
    assert "LLM_API_KEY" in status[0]["error"] and "API key" in status[0]["error"], status  # says which variable and why
    assert API_KEY not in json.dumps(status), "never the value"
    assert not dump.exists(), "the server was not started at all"


@pytest.mark.parametrize("source", ["user", "workspace"])
async def test_no_mcp_server_inherits_the_key_under_any_variable(workspace, dumper, source):
    script, dump = dumper
    server = {"command": sys.executable, "args": [str(script), str(dump)]}
    decls = from_user_settings({"probe": server})[0] if source == "user" else declare(workspace, {"probe": server})
    env = hostile_env(MY_MODEL_KEY=OTHER_KEY, CI_TOKEN=OTHER_KEY)
    await start_all(decls, workspace, env, api_key_env="MY_MODEL_KEY")
    seen = json.loads(dump.read_text().splitlines()[0])["env"]
    assert seen.get("PATH") == os.environ["PATH"], "the rest of the environment is passed"
    for name in ("OPENAI_API_KEY", "LLM_API_KEY", "AUTH_HEADER", "DEPLOY_URL", "MY_MODEL_KEY", "CI_TOKEN"):
        assert name not in seen, name
    assert API_KEY not in json.dumps(seen) and OTHER_KEY not in json.dumps(seen)


@pytest.mark.parametrize("how", ["workspace-literal", "workspace-in-a-value", "user-expanded"])
async def test_an_mcp_server_with_the_key_in_its_command_line_is_refused(workspace, dumper, how):
    """A command line is readable by every local user (/proc/<pid>/cmdline): not even the user's
    own server gets the key there (its `env` may name it)."""
    script, dump = dumper
    token = {"workspace-literal": API_KEY, "workspace-in-a-value": f"--auth=Bearer:{API_KEY}",
             "user-expanded": "${env:OPENAI_API_KEY}"}[how]
    server = {"command": sys.executable, "args": [str(script), str(dump), token]}
    decls = from_user_settings({"probe": server})[0] if how.startswith("user") else declare(workspace, {"probe": server})
    status = await start_all(decls, workspace, hostile_env())
    assert status[0]["state"] == "failed" and "args[2]" in status[0]["error"] and "API key" in status[0]["error"], status
    assert API_KEY not in json.dumps(status)
    assert not dump.exists()


# -- commands ---------------------------------------------------------------------------------
async def test_a_command_gets_no_variable_that_holds_or_contains_the_key(model, workspace):
    model.add([tools_reply(call("run_command", id="c", command="env > seen.env")), {"text": "ok"}])
    await run("env", model, workspace, env=hostile_env(MY_MODEL_KEY=OTHER_KEY, CI_TOKEN=f"x{OTHER_KEY}x"),
              apiKeyEnv="MY_MODEL_KEY", approval={"default": "allow"})
    seen = (workspace / "seen.env").read_text()
    assert "PATH=" in seen
    for banned in ("LLM_API_KEY", "AUTH_HEADER", "DEPLOY_URL", "MY_MODEL_KEY", "CI_TOKEN", API_KEY, OTHER_KEY):
        assert banned not in seen, banned


# -- the real front ends: rg, git, /proc/<pid>/environ, dumpable --------------------------------
def shim_python(tmp_path: Path, log: Path) -> Path:
    """This venv's Python seen from another folder, with an `rg` beside it that logs its
    environment (agent-lsp runs the rg next to sys.executable), and a `git` that does the same
    first on the PATH."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text((Path(sys.prefix) / "pyvenv.cfg").read_text())
    (venv / "lib").symlink_to(Path(sys.prefix) / "lib")
    (venv / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    real = {"rg": find_rg(), "git": shutil.which("git")}
    assert real["rg"] and real["git"]
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, where in (("rg", venv / "bin"), ("git", shims)):
        (where / name).write_text(f'#!/bin/sh\nenv > "{log}/{name}.$$"\nexec "{real[name]}" "$@"\n')
        (where / name).chmod(0o755)
    return venv / "bin" / "python"


def test_rg_and_git_started_by_agent_lsp_run_get_no_key(model, workspace, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    python = shim_python(tmp_path, log)
    model.add([tools_reply(call("search", id="s", pattern="def add")),
               tools_reply(call("run_command", command="true")),  # snapshots around a command: git
               {"text": "done"}])
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    env = hostile_env(PATH=f"{tmp_path / 'shims'}:{os.environ['PATH']}")
    proc = subprocess.run([str(python), "-m", "agent_lsp", "run", "find add", "--base-url", model.base_url, "--model", "m",
                           "--workspace", str(workspace), "--yes", "--json"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "calc.py" in last_tool_results(model.requests[1])["s"]
    seen = {p.name: p.read_text() for p in log.iterdir()}
    assert any(n.startswith("rg.") for n in seen) and any(n.startswith("git.") for n in seen), sorted(seen)
    for name, text in seen.items():
        assert "PATH=" in text
        for banned in ("OPENAI_API_KEY", "LLM_API_KEY", "AUTH_HEADER", "DEPLOY_URL", API_KEY):
            assert banned not in text, (name, banned)
    assert model.authorizations and set(model.authorizations) == {f"Bearer {API_KEY}"}, "the key still reaches the model"


async def test_the_lsp_server_environment_block_no_longer_shows_the_key(open_editor, model, workspace):
    """Read as root, /proc/<pid>/environ still opens: it must not hold the key, under any name,
    nor the key of the `apiKeyEnv` initializationOptions name; the key still authenticates."""
    editor = await open_editor(init={"apiKeyEnv": "MY_MODEL_KEY", "approval": {"default": "allow"}},
                               env={**hostile_env(MY_MODEL_KEY=OTHER_KEY, CI_TOKEN=OTHER_KEY)})
    model.add([{"text": "hello"}])
    started = await editor.run("say hello")
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    block = Path(f"/proc/{editor.process.pid}/environ").read_bytes()
    assert b"PATH=" in block, "the rest of the block is untouched"
    assert API_KEY.encode() not in block and OTHER_KEY.encode() not in block
    assert model.authorizations == [f"Bearer {OTHER_KEY}"]


def wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def python_for_nobody(tmp_path: Path) -> Path:
    """This venv seen through an interpreter `nobody` may run (ours may sit under /root)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if not os.path.exists(candidate):
            continue
        venv = Path(tempfile.mkdtemp(prefix="agent-lsp-nobody-", dir=tmp_path))
        venv.chmod(0o755)
        (venv / "bin").mkdir()
        (venv / "pyvenv.cfg").write_text(f"home = {os.path.dirname(candidate)}\ninclude-system-site-packages = false\n")
        (venv / "lib").symlink_to(Path(sys.prefix) / "lib")
        (venv / "bin" / "python").symlink_to(candidate)
        python = venv / "bin" / "python"
        try:
            check = subprocess.run([str(python), "-c", "import agent_lsp.cli, pygls, acp"], user=NOBODY, group=NOBODY,
                                   capture_output=True, timeout=60)
        except OSError:  # not executable by nobody
            continue
        if check.returncode == 0:
            return python
    pytest.skip("no Python interpreter with this venv's packages can run as `nobody` here")


@pytest.fixture
def shared_tmp():
    """A folder `nobody` can use (pytest's own tmp_path sits under a root-only folder), and a
    way through to this venv and this checkout: a clone in `mktemp -d` is 0700, so for the
    test only, the folders above them get the search bit (o+x: enter, not list) and the two
    themselves o+rx (the editable install's import lists the checkout), restored afterwards.
    (The suite runs a file at a time per worker: no other test sees the modes change.)"""
    path = Path(tempfile.mkdtemp(prefix="agent-lsp-key-"))
    path.chmod(0o777)
    opened = []
    for needed in (Path(sys.prefix).resolve(), Path(__file__).resolve().parents[2]):
        for folder, bits in [(needed, 0o005), *((above, 0o001) for above in needed.parents)]:
            mode = folder.stat().st_mode
            if mode & bits != bits:
                folder.chmod(mode | bits)
                opened.append((folder, mode))
    try:
        yield path
    finally:
        for folder, mode in reversed(opened):
            folder.chmod(mode)
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("front_end", ["serve", "acp", "run"])
def test_a_same_user_process_cannot_read_the_key_from_proc(model, shared_tmp, front_end):
    """agent-lsp and a reader both run as `nobody`: once the front end started, the reader is
    refused /proc/<pid>/environ (the process is non-dumpable: its /proc files belong to root),
    and the block holds no key either (read as root)."""
    python = python_for_nobody(shared_tmp)
    workspace, home = shared_tmp / "ws", shared_tmp / "home"
    for path in (workspace, home):
        path.mkdir()
        path.chmod(0o777)
    marker = workspace / "started"
    model.add([tools_reply(call("run_command", command=f"touch {marker} && sleep 60")), {"text": "ok"}])
    argv = {"serve": ["serve"], "acp": ["acp"],
            "run": ["run", "wait", "--base-url", model.base_url, "--model", "m", "--workspace", str(workspace), "--yes"]}[front_end]
    env = {**hostile_env(), "HOME": str(home), "AGENT_LSP_STATE_DIR": str(home / "state"), "XDG_CONFIG_HOME": str(home),
           "AGENT_LSP_SETTINGS": str(home / "settings.json"), "CLAUDE_CONFIG_DIR": str(home / ".claude")}  # readable by nobody
    proc = subprocess.Popen([str(python), "-m", "agent_lsp", *argv], env=env, cwd=workspace, user=NOBODY, group=NOBODY,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        environ = Path(f"/proc/{proc.pid}/environ")
        ready = wait_for(lambda: proc.poll() is None and environ.stat().st_uid == 0 and (front_end != "run" or marker.exists()))
        assert ready, f"/proc/{proc.pid} belongs to uid {environ.stat().st_uid} (exit code {proc.poll()}): the process is dumpable"
        reader = subprocess.run(["cat", str(environ)], user=NOBODY, group=NOBODY, capture_output=True, timeout=30)
        assert reader.returncode != 0 and b"Permission denied" in reader.stderr, reader.stdout
        assert API_KEY.encode() not in environ.read_bytes()  # root still reads it: no key there either
    finally:
        proc.kill()
        proc.wait(10)
        assert proc.stdin is not None
        proc.stdin.close()


def test_a_sealed_process_is_not_dumpable():
    """The start-up helper every front end calls, checked from inside (prctl PR_GET_DUMPABLE)."""
    code = "from agent_lsp.agent.exec import keyguard; print(keyguard.is_dumpable()); keyguard.seal_process(); print(keyguard.is_dumpable())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True).stdout.split()
    assert out == ["True", "False"]


# -- what the model reads ---------------------------------------------------------------------
@pytest.mark.parametrize("tool", ["run_command", "read_file", "search"])
async def test_the_model_never_reads_the_key_in_a_tool_result(model, workspace, tool):
    (workspace / "notes.txt").write_text(f"deploy with MODEL_KEY={API_KEY} and go\n")
    calls = {"run_command": call("run_command", id="c", command="cat notes.txt"),
             "read_file": call("read_file", id="c", path="notes.txt"),
             "search": call("search", id="c", pattern="MODEL_KEY")}
    model.add([tools_reply(calls[tool]), {"text": "ok"}])
    report, _, _ = await run("look at the notes", model, workspace, approval={"default": "allow"})
    assert report.stop_reason == "done"
    result = last_tool_results(model.requests[-1])["c"]
    assert "MODEL_KEY=[redacted] and go" in result, result  # the model is told it was redacted
    assert API_KEY not in json.dumps(model.requests)


async def test_the_model_never_reads_the_key_in_an_mcp_result(model, workspace, tmp_path):
    (workspace / "notes.txt").write_text(f"deploy with MODEL_KEY={API_KEY} and go\n")
    script = tmp_path / "notes_server.py"
    script.write_text(NOTE_SERVER)
    decls, _ = from_user_settings({"notes": {"command": sys.executable, "args": [str(script)]}})
    manager = McpManager(decls, roots=[workspace])
    try:
        tools = await manager.tools()
        assert [t.name for t in tools] == ["notes__read_note"], manager.status()
        model.add([tools_reply(call("notes__read_note", id="c", path=str(workspace / "notes.txt"))), {"text": "ok"}])
        report = await asyncio.wait_for(run_task(
            "read the note", session=Session(), settings=make_settings(model, approval={"default": "allow"}),
            workspace=DiskWorkspace([workspace]), approver=ScriptedApprover(), emit=Events(),
            options=RunOptions(extra_tools=tools)), 60)
    finally:
        await manager.aclose()
    assert report.stop_reason == "done"
    result = last_tool_results(model.requests[-1])["c"]
    assert "MODEL_KEY=[redacted] and go" in result, result
    assert API_KEY not in json.dumps(model.requests)


async def test_the_model_never_reads_the_key_in_a_memory_file(model, workspace):
    (workspace / "AGENTS.md").write_text(f"Deploy with MODEL_KEY={API_KEY}.\n")
    model.add([{"text": "ok"}])
    await run("hello", model, workspace)
    system = model.requests[0]["messages"][0]["content"]
    assert "MODEL_KEY=[redacted]." in system and API_KEY not in json.dumps(model.requests)


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_writing_back_a_redacted_key_is_refused_and_the_file_keeps_it(model, workspace, tool):
    """The model sees the key as [redacted]: writing what it read back would lose the user's key."""
    notes = workspace / "notes.txt"
    notes.write_text(f"MODEL_KEY={API_KEY}\nmode=slow\n")
    edit = (call("write_file", id="w", path="notes.txt", content="MODEL_KEY=[redacted]\nmode=fast\n") if tool == "write_file"
            else call("edit_file", id="w", path="notes.txt", old_text=f"MODEL_KEY={API_KEY}\nmode=slow", new_text="MODEL_KEY=[redacted]\nmode=fast"))
    model.add([tools_reply(call("read_file", id="r", path="notes.txt")), tools_reply(edit), {"text": "ok"}])
    await run("speed it up", model, workspace, approval={"default": "allow"})
    assert "[redacted]" in last_tool_results(model.requests[1])["r"]
    assert last_tool_results(model.requests[2])["w"].startswith("error: this edit would replace the model's API key")
    assert notes.read_text() == f"MODEL_KEY={API_KEY}\nmode=slow\n"
