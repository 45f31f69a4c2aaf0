"""What the MCP client adds to a tool call, and what `import agent_lsp.mcp` costs.

    python benchmarks/mcp_call.py                     # server-everything's echo over stdio
    python benchmarks/mcp_call.py --server time       # mcp-server-time's get_current_time
    python benchmarks/mcp_call.py --calls 500

(a) the call through `McpTool.parse` + `prepare` + `execute` via `McpManager`, against (b) the
same call made with the `mcp` SDK's `ClientSession.call_tool` on a connection of its own to a
second copy of the same server. Calls alternate a, b, a, b, so load on the machine hits both
alike; the medians and their difference are printed (target: at most 5 ms more). The servers
come from tests/mcp/setup.sh (${AGENT_LSP_CACHE:-~/.cache/agent-lsp-ci}/mcp).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

CACHE = Path(os.environ.get("AGENT_LSP_CACHE") or Path.home() / ".cache" / "agent-lsp-ci") / "mcp"
SERVERS = {
    "everything": (CACHE / "npm" / "node_modules" / ".bin" / "mcp-server-everything", ["stdio"], "echo", {"message": "hello"}),
    "time": (CACHE / "venv" / "bin" / "mcp-server-time", [], "get_current_time", {"timezone": "UTC"}),
}
IMPORT_PROBE = """
import sys, time
{pre}
t = time.perf_counter()
import agent_lsp.mcp.config, agent_lsp.mcp.manager  # what a run imports to get MCP tools
took = time.perf_counter() - t
assert "mcp" not in sys.modules and "mcp_types" not in sys.modules, "agent_lsp.mcp imported the SDK"
print(took)
"""


def import_ms(pre: str, runs: int = 7) -> float:
    """Median wall time of importing the MCP client (config and manager) in a fresh interpreter, after `pre`."""
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE.format(pre=pre)], capture_output=True, text=True, check=True)
        samples.append(float(out.stdout) * 1000)
    return statistics.median(samples)


async def measure(server: str, calls: int, warmup: int, errlog: TextIO) -> tuple[list[float], list[float]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from agent_lsp.mcp.config import from_user_settings
    from agent_lsp.mcp.manager import McpManager

    command, args, tool_name, arguments = SERVERS[server]
    if not os.access(command, os.X_OK):
        sys.exit(f"{command} not found: run `bash tests/mcp/setup.sh` first")
    decls, _ = from_user_settings({server: {"command": str(command), "args": args}})
    manager = McpManager(decls, roots=[Path.cwd()], request_timeout=30)
    ours: list[float] = []
    direct: list[float] = []
    try:
        await manager.tools()
        tool = manager.find(f"{server}__{tool_name}")
        assert tool is not None, manager.status()
        params = StdioServerParameters(command=str(command), args=args)
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(warmup + calls):
                start = time.perf_counter()
                prepared = await tool.prepare(tool.parse(dict(arguments)), None)
                await prepared.execute()
                middle = time.perf_counter()
                result = await session.call_tool(tool_name, dict(arguments))
                end = time.perf_counter()
                assert not result.is_error
                if i >= warmup:
                    ours.append((middle - start) * 1000)
                    direct.append((end - middle) * 1000)
    finally:
        await manager.aclose()
    return ours, direct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=sorted(SERVERS), default="everything")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    options = parser.parse_args()

    cold = import_ms("")
    warm = import_ms("import asyncio, pydantic, agent_lsp.agent.tools.base")
    print(f"import agent_lsp.mcp: {cold:.1f} ms in a fresh interpreter, {warm:.1f} ms once the agent core is loaded (the `mcp` SDK is not imported)")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.client.stdio, mcp.client.streamable_http"], check=True)
    print(f"for reference, a fresh interpreter importing the `mcp` SDK: {(time.perf_counter() - t) * 1000:.0f} ms (paid in a thread on the first server start)")

    with open(os.devnull, "w") as devnull:  # the direct connection's server stderr
        ours, direct = asyncio.run(measure(options.server, options.calls, options.warmup, devnull))
    a, b = statistics.median(ours), statistics.median(direct)
    verdict = "met" if a - b <= 5 else "MISSED"
    print(f"{options.server}: median of {options.calls} calls")
    print(f"  (a) McpTool.prepare + execute via McpManager: {a:.3f} ms  (p90 {statistics.quantiles(ours, n=10)[-1]:.3f})")
    print(f"  (b) mcp ClientSession.call_tool, own connection: {b:.3f} ms  (p90 {statistics.quantiles(direct, n=10)[-1]:.3f})")
    print(f"  difference: {a - b:+.3f} ms  (target <= 5 ms: {verdict})")


if __name__ == "__main__":
    main()
