"""`debug_start` to the first stop vs debugpy's own CLI plus a minimal client (the debugger).

Ours: the agent's Debugger (debugpy's adapter started by agent-lsp under the reaper, DAP over
its stdio, launch, breakpoints, the stop read back with its stack and locals). Baseline, same
program, same breakpoint, same data read: `python -m debugpy --listen 127.0.0.1:PORT
--wait-for-client prog.py`, a client connecting as soon as the port answers, `initialize`,
`attach`, `setBreakpoints`, `configurationDone`, the `stopped` event, `stackTrace`, `scopes`,
`variables`. Interleaved, medians; target: ours <= 1.5x the baseline.

`python benchmarks/debug.py [--runs N] [--named-adapter]` (exit 1 when the target is missed).
`--named-adapter`: ours goes through the `debugAdapters` path, debugpy's adapter named by the
user (`python -m debugpy.adapter`, generic launch arguments) instead of the built-in one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = """\
def average(values):
    total = sum(values)
    count = len(values) - 1
    return total / count


print(average([3, 5, 10]))
"""
LINE = 4
TARGET = 1.5


async def ours(folder: Path, named: bool = False) -> float:
    from agent_lsp.agent.tools.debugger.launcher import Debugger
    from agent_lsp.agent.tools.debugger.session import Adapter, Breakpoint, Launch
    from agent_lsp.agent.tools.runner import CommandRunner
    from agent_lsp.settings import SandboxSettings

    runner = CommandRunner(env=dict(os.environ), secret_names=[], secrets=[], sandbox=SandboxSettings(),
                           roots=[folder], hidden=[])
    debugger = Debugger(runner, lambda p: p)
    prog = str(folder / "prog.py")
    t0 = time.perf_counter()
    adapter = Adapter("mypy", [sys.executable, "-m", "debugpy.adapter"]) if named else None
    launch = Launch(sys.executable, prog, None, [], str(folder), adapter=adapter)
    stop = await debugger.start(launch, [Breakpoint(prog, LINE)], 60)
    took = time.perf_counter() - t0
    await debugger.stop()
    assert stop.state == "stopped" and "count (int) = 2" in stop.text(), stop.text()
    return took


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    while True:
        try:
            return await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.005)


async def baseline(folder: Path) -> float:
    from agent_lsp.agent.tools.debugger.dap import DapClient

    prog = str(folder / "prog.py")
    port = _free_port()
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "debugpy", "--listen", f"127.0.0.1:{port}", "--wait-for-client", prog,
        cwd=folder, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    try:
        reader, writer = await _connect(port)
        client = DapClient(reader, writer)
        await client.request("initialize", {"adapterID": "debugpy", "linesStartAt1": True, "pathFormat": "path"})
        attached = client.send("attach", {"justMyCode": True})
        while (await client.events.get()).event != "initialized":
            pass
        await client.request("setBreakpoints", {"source": {"path": prog}, "breakpoints": [{"line": LINE}]})
        await client.request("configurationDone")
        await attached
        while (event := await client.events.get()).event != "stopped":
            pass
        frames = (await client.request("stackTrace", {"threadId": event.body["threadId"], "levels": 10}))["stackFrames"]
        scopes = (await client.request("scopes", {"frameId": frames[0]["id"]}))["scopes"]
        variables = await client.request("variables", {"variablesReference": scopes[0]["variablesReference"]})
        took = time.perf_counter() - t0
        assert any(v["name"] == "count" and v["value"] == "2" for v in variables["variables"]), variables
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.request("disconnect", {"terminateDebuggee": True}), 3)
        await client.close()
        return took
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()


async def main(runs: int, named: bool = False) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp).resolve()
        (folder / "prog.py").write_text(PROGRAM)
        await ours(folder, named)  # warm-up: disk caches, byte-code
        await baseline(folder)
        times: dict[str, list[float]] = {"ours": [], "baseline": []}
        for _ in range(runs):
            times["ours"].append(await ours(folder, named))
            times["baseline"].append(await baseline(folder))
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    ratio = med["ours"] / med["baseline"]
    how = " (debugAdapters)" if named else ""
    print(f"debug_start to first stop: ours{how} {med['ours'] * 1000:.0f} ms, debugpy CLI + minimal client "
          f"{med['baseline'] * 1000:.0f} ms, ratio {ratio:.2f}x (target <= {TARGET}x) over {runs} runs each")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--named-adapter", action="store_true", help="ours through debugAdapters")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.runs, args.named_adapter)))
