"""Start-up to the first model request: `agent-lsp run TASK`
against the bare openai-SDK loop (`bare_loop.py`), each a fresh process, same scripted model
(in a process of its own), no MCP servers or hooks configured, runs interleaved with the order
alternating round by round. Measured: from just before `Popen` to the model server having
parsed the process's first request (both clocks are CLOCK_MONOTONIC), and the process's peak
RSS over its whole life (`wait4`'s ru_maxrss: the run answers and exits after one reply).
Targets: first request <= 1.0 x the bare loop's, peak RSS <= 1.1 x.

Before measuring, the agent_lsp package each contestant imports is byte-compiled (`compileall`),
as pip compiles an installed package: with PYTHONDONTWRITEBYTECODE set (CI, containers) a
source checkout is otherwise compiled from source at every start (~0.3 s of CPU for ours),
while the SDK in site-packages has its bytecode from its installation.

    python benchmarks/first_request.py [--rounds 12] [--also DIR]

`--also DIR` adds a third contestant in the same interleaved run: `agent-lsp run` from another
checkout (DIR first on PYTHONPATH), e.g. the code before a change: before/after ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script
    sys.path[:] = [p for p in sys.path if p not in ("", str(Path(__file__).resolve().parent))]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Config, bench_env, cpu_seconds, median, tag  # noqa: E402
from benchmarks.model_process import ModelProcess  # noqa: E402

BARE_LOOP = Path(__file__).resolve().with_name("bare_loop.py")
NAMES = ("bare", "ours")
# The reply's time to first token: long enough that the CPU read at the first request (polled)
# is not mixed with the work on the answer (ours writes its report and transcript; the bare
# loop only exits), as a hosted model's is (~0.3-1 s).
TTFT = 0.3


def _argv(name: str, base_url: str, prompt: str, cfg: Config, tools: Path) -> list[str]:
    if name == "bare":  # "also": ours from another checkout (its own PYTHONPATH)
        return [sys.executable, str(BARE_LOOP), base_url, prompt, str(tools)]
    return [sys.executable, "-m", "agent_lsp", "run", prompt, "--yes", "--workspace",
            str(cfg.work / "ws-first-request"), "--base-url", base_url, "--model", "m"]


def _one(model: ModelProcess, argv_of: Any, name: str, env: dict[str, str],
         ttft: float) -> tuple[float, float, int]:
    """(seconds to the first request, CPU seconds the process had used when the model saw it,
    peak RSS in bytes) of one fresh process. The CPU figure is read while polling the model's
    log every 5 ms, so it includes up to ~5 ms past the request; it hardly moves with the
    machine's load, unlike the wall time."""
    key = tag(f"first-{name}")
    model.add(key, [{"text": "done", "ttft": ttft}])
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv_of(name, f"Say done. [{key}]"), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        cpu = float("nan")
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if cpu != cpu and model.log(key):
                cpu = cpu_seconds(proc.pid)
            time.sleep(0.005)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log = model.log(key)
        model.forget(key)
        if proc.returncode != 0 or not log:
            err.seek(0)
            raise RuntimeError(f"{name} exited {proc.returncode} with {len(log)} request(s): "
                               f"{err.read().decode(errors='replace')[-2000:]}")
    return log[0].t_start - t0, cpu, usage.ru_maxrss * 1024


def compile_package(env: dict[str, str]) -> Path:
    """Byte-compile the agent_lsp package these settings import (see the module docstring)."""
    where = subprocess.run([sys.executable, "-c", "import agent_lsp, os; print(os.path.dirname(agent_lsp.__file__))"],
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return Path(where)


def measure(cfg: Config, env: dict[str, str], rounds: int | None = None,
            also: Path | None = None, compiled: bool = True) -> dict[str, Any]:
    rounds = rounds or (cfg.runs if cfg.quick else max(10, cfg.runs * 2))
    home = cfg.work / "home-first-request"
    home.mkdir(parents=True, exist_ok=True)
    (cfg.work / "ws-first-request").mkdir(parents=True, exist_ok=True)
    # Nobody's user settings, Claude Code files or MCP servers: an empty home for both.
    env = {**env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "AGENT_LSP_SETTINGS": str(home / "absent.json")}
    tools = cfg.work / "first-request-tools.json"
    from benchmarks.baselines import tool_schemas

    tools.write_text(json.dumps(tool_schemas()), encoding="utf-8")
    names = NAMES + (("also",) if also is not None else ())
    env_of = {n: env for n in names}
    if also is not None:
        env_of["also"] = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(also), env.get("PYTHONPATH")]))}
    for name in names[1:] if compiled else ():
        compile_package(env_of[name])
    times: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    with ModelProcess() as model:
        def argv_of(name: str, prompt: str) -> list[str]:
            return _argv(name, model.base_url, prompt, cfg, tools)

        for rep in range(cfg.warmup + rounds):
            order = names if rep % 2 == 0 else names[::-1]  # interleaved, order alternating
            for name in order:
                seconds, used, peak = _one(model, argv_of, name, env_of[name], TTFT)
                if rep >= cfg.warmup:
                    times[name].append(seconds)
                    cpu[name].append(used)
                    rss[name].append(float(peak))
    got = {"ours": median(times["ours"]), "bare": median(times["bare"]),
           "rss": median(rss["ours"]), "rss_bare": median(rss["bare"]),
           "cpu": median(cpu["ours"]), "cpu_bare": median(cpu["bare"]),
           "rounds": rounds, "samples": times}
    if also is not None:
        got.update({"also": median(times["also"]), "rss_also": median(rss["also"]),
                    "cpu_also": median(cpu["also"])})
    return got


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--also", type=Path, help="another checkout's `agent-lsp run` beside")
    parser.add_argument("--no-compile", action="store_true",
                        help="measure the checkouts as they are (no compileall first)")
    args = parser.parse_args()
    cfg = Config.make(quick=False)
    got = measure(cfg, bench_env(cfg.work), args.rounds, args.also, not args.no_compile)
    mib = 1024 * 1024
    print(f"first request: ours {got['ours'] * 1000:.0f} ms, bare loop {got['bare'] * 1000:.0f} ms, "
          f"ratio {got['ours'] / got['bare']:.2f} (median of {got['rounds']} interleaved rounds)")
    print(f"CPU to the first request: ours {got['cpu'] * 1000:.0f} ms, bare loop "
          f"{got['cpu_bare'] * 1000:.0f} ms, ratio {got['cpu'] / got['cpu_bare']:.2f}")
    print(f"peak RSS: ours {got['rss'] / mib:.1f} MiB, bare loop {got['rss_bare'] / mib:.1f} MiB, "
          f"ratio {got['rss'] / got['rss_bare']:.2f}")
    if args.also is not None:
        print(f"{args.also}: first request {got['also'] * 1000:.0f} ms, ratio to the bare loop "
              f"{got['also'] / got['bare']:.2f}; CPU {got['cpu_also'] * 1000:.0f} ms, ratio "
              f"{got['cpu_also'] / got['cpu_bare']:.2f}; peak RSS {got['rss_also'] / mib:.1f} MiB, ratio "
              f"{got['rss_also'] / got['rss_bare']:.2f}")
    print("samples (ms):", {k: [round(v * 1000) for v in vs] for k, vs in got["samples"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
