"""A stdio MCP server (the real `mcp` SDK) that misbehaves on request: it writes raw lines to
the wire (Latin-1, garbage, 30 MB), ignores stdin EOF and SIGTERM, and leaves a `setsid` helper.

    hostile_server.py [--label L] [--tool NAME[:ro]]... [--latin1-banner] [--stubborn MARKER]

The SDK diverts fd 1 while it serves (stray prints land on stderr), so raw writes go to a
duplicate of the real stdout taken first.
"""

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

WIRE = os.dup(1)


def wire(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(WIRE, view):]


def option(name: str) -> list[str]:
    return [sys.argv[i + 1] for i, arg in enumerate(sys.argv[:-1]) if arg == name]


label = (option("--label") or ["hostile"])[0]
server = MCPServer(label)

for spec in option("--tool"):
    tool_name, _, flag = spec.partition(":")

    def named(tool_name: str = tool_name) -> str:
        return f"{label} ran {tool_name}"

    server.add_tool(named, name=tool_name, description=f"{label}'s {tool_name}",
                    annotations=ToolAnnotations(read_only_hint=True) if flag == "ro" else None)


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return f"echo: {text}"


@server.tool()
def latin1() -> str:
    """Write a Latin-1 log line on stdout, then answer."""
    wire(b"caf\xe9 au lait: a log line in Latin-1\n")
    return "answered after a Latin-1 line"


@server.tool()
def huge(megabytes: int) -> str:
    """Answer with `megabytes` MB of text (the SDK writes the id first)."""
    return "x" * (megabytes * 1024 * 1024)


@server.tool()
async def huge_raw(megabytes: int, form: str, ctx: Context) -> str:
    """Write a `megabytes` MB answer ourselves: `form` "tail" puts the id last (as the TypeScript
    SDK does), "noid" leaves it out; then never answer through the SDK."""
    body = json.dumps({"content": [{"type": "text", "text": "y" * (megabytes * 1024 * 1024)}]})
    request = int(ctx.request_id) if ctx.request_id.isdigit() else ctx.request_id
    end = f',"jsonrpc":"2.0","id":{json.dumps(request)}}}' if form == "tail" else ',"jsonrpc":"2.0"}'
    wire(b'{"result":' + body.encode() + end.encode() + b"\n")
    await asyncio.sleep(3600)
    return "unreachable"


@server.tool()
async def garbage() -> str:
    """Write lines that are not JSON-RPC, forever, and never answer."""
    def spew() -> None:
        try:
            while True:
                wire(b"\xff\xfe not json, not utf-8 \x80\n")
        except OSError:
            return

    threading.Thread(target=spew, daemon=True).start()
    await asyncio.sleep(3600)
    return "unreachable"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "slept"


if "--latin1-banner" in sys.argv:
    wire(b"d\xe9marrage du serveur (Latin-1)\n")

stubborn = option("--stubborn")
if stubborn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)", f"{stubborn[0]}-helper"]
    setsid = shutil.which("setsid")
    # A helper in a session of its own: no process-group kill reaches it.
    subprocess.Popen([setsid, *sleeper] if setsid else sleeper, start_new_session=setsid is None,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

print(f"{label} ready", file=sys.stderr, flush=True)
server.run()
if stubborn:
    while True:  # stdin closed: a well-behaved server would exit now
        time.sleep(1)
