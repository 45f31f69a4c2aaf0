"""What the MCP tests share: the third-party servers tests/mcp/setup.sh installs, a small server
written with the real `mcp` SDK, and /proc helpers to prove no process outlives the manager."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("AGENT_LSP_CACHE") or Path.home() / ".cache" / "agent-lsp-ci") / "mcp"
SETUP = Path(__file__).with_name("setup.sh")


@dataclass(frozen=True)
class ThirdParty:
    time: str
    git: str
    everything: str


def _require(found: bool, what: str) -> None:
    """A missing server fails the run in CI (a skip would hide it) and skips elsewhere."""
    if found:
        return
    if os.environ.get("CI"):
        raise RuntimeError(f"{what} not found under {CACHE}: run `bash {SETUP}`")
    pytest.skip(f"{what} not found under {CACHE} (run `bash {SETUP}`)")


@pytest.fixture(scope="session")
def third_party() -> ThirdParty:
    servers = ThirdParty(
        time=str(CACHE / "venv" / "bin" / "mcp-server-time"),
        git=str(CACHE / "venv" / "bin" / "mcp-server-git"),
        everything=str(CACHE / "npm" / "node_modules" / ".bin" / "mcp-server-everything"),
    )
    for name in ("time", "git", "everything"):
        _require(os.access(getattr(servers, name), os.X_OK), f"mcp-server-{name}")
    return servers


# A server written with the real SDK (mcp 2.x MCPServer): it negotiates the 2026-07-28 protocol,
# so its list_changed travels on a `subscriptions/listen` stream; older clients get the plain
# notification too. `--sentinel PATH` makes it prove it ran by creating PATH.
HELPER_SERVER = '''
import asyncio, json, os, sys
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

if "--sentinel" in sys.argv:
    open(sys.argv[sys.argv.index("--sentinel") + 1], "w").close()
server = MCPServer("helper")


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called `name`, then say the tool list changed."""
    def added() -> str:
        return "I was added at run time"
    server.add_tool(added, name=name, description="added at run time")
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "added"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def environment() -> str:
    """This process's environment variable names and working directory."""
    return json.dumps({"keys": sorted(os.environ), "cwd": os.getcwd(), "argv": sys.argv[1:]})


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "slept"


print("helper server ready", file=sys.stderr, flush=True)
server.run()
'''


@pytest.fixture(scope="session")
def helper_server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """argv of the helper server, run with this venv's Python (which has the `mcp` SDK)."""
    path = tmp_path_factory.mktemp("mcp-helper") / "helper_server.py"
    path.write_text(HELPER_SERVER)
    return [sys.executable, str(path)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def everything_http(third_party: ThirdParty):
    """server-everything in its streamable HTTP mode (`PORT`, endpoint /mcp) on a free port."""
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    proc = subprocess.Popen([third_party.everything, "streamableHttp"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("server-everything (streamableHttp) did not listen") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (the server and whatever it started)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry))
    return members


def descendants(root: int) -> list[int]:
    """Live processes below `root` (by parent pid), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
