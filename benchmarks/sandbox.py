"""Issue 17: what the bubblewrap sandbox adds to starting a command.

`CommandRunner.run(["true"])` with `SandboxSettings(mode="workspace-write")` (bwrap: its own
PID, IPC and network namespaces, a read-only root, the workspace writable, a private /tmp, the
secrets folders hidden) against the same runner with the sandbox off (the command then runs
under the small Python reaper of `agent_lsp/agent/process.py`), side by side, many commands
each, interleaved; target: median sandboxed <= median unconfined + 30 ms. For context: a bare
`asyncio.create_subprocess_exec("true")` with the same pipes and new session, and the first
sandboxed command of the process (it also probes once that bwrap works).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Config, median


async def bwrap_problem() -> str | None:
    """None when the sandbox can run here, else why not (the agent's own probe: bwrap on the
    PATH and user namespaces allowed)."""
    if shutil.which("bwrap") is None:
        return "bwrap is not on the PATH (install bubblewrap)"
    from agent_lsp.agent.exec import sandbox

    sandbox.reset_probe()
    return await sandbox.probe()


async def bare_true(cwd: Path, env: dict[str, str]) -> None:
    proc = await asyncio.create_subprocess_exec("true", cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                start_new_session=True)
    await proc.communicate()


async def measure(cfg: Config) -> dict[str, Any]:
    from agent_lsp.agent.exec import sandbox
    from agent_lsp.agent.tools.runner import CommandRunner
    from agent_lsp.settings import SandboxSettings, state_dir

    root = (cfg.work / "ws-sandbox").resolve()
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)

    def runner(mode: str) -> CommandRunner:
        return CommandRunner(env=env, secret_names=["OPENAI_API_KEY"], secrets=[env.get("OPENAI_API_KEY", "")],
                             sandbox=SandboxSettings(mode=mode), roots=[root], hidden=[state_dir()])  # type: ignore[arg-type]

    confined, unconfined = runner("workspace-write"), runner("off")
    sandbox.reset_probe()
    t0 = time.monotonic()
    first, _ = await confined.run(["true"], root, 30)  # includes the once-per-process bwrap probe
    first_seconds = time.monotonic() - t0
    if first.code != 0:
        raise RuntimeError(f"the sandboxed `true` exited {first.code}: {first.output[-300:]}")
    count = 10 if cfg.quick else 40
    times: dict[str, list[float]] = {"sandbox": [], "off": [], "bare": []}
    for rep in range(cfg.warmup + cfg.runs):
        for _ in range(count):
            for name in ("sandbox", "off", "bare"):  # interleaved, command by command
                t0 = time.monotonic()
                if name == "bare":
                    await bare_true(root, env)
                else:
                    result, _ = await (confined if name == "sandbox" else unconfined).run(["true"], root, 30)
                    if result.code != 0:
                        raise RuntimeError(f"`true` exited {result.code} ({name}): {result.output[-300:]}")
                if rep >= cfg.warmup:
                    times[name].append(time.monotonic() - t0)
    return {"sandbox": median(times["sandbox"]), "off": median(times["off"]), "bare": median(times["bare"]),
            "first": first_seconds, "commands": len(times["sandbox"])}
