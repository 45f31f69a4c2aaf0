"""Telemetry's cost per turn: the same K-turn headless run (50 KB read_file results) with
OpenTelemetry on (spans, events and metrics exported over OTLP/HTTP to a real receiver in a
process of its own) and off, interleaved, overhead per turn as in benchmarks/turns.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Config, make_files, median, tag
from benchmarks.model_process import REPO, ModelProcess
from benchmarks.turns import RESULT_CHARS, AllowAll, Sample, our_settings, tool_script


class Receiver:
    """agent_lsp.testing.otlp's receiver as a child process."""

    def __enter__(self) -> str:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen([sys.executable, "-m", "agent_lsp.testing.otlp"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env)
        assert self._proc.stdout is not None
        return self._proc.stdout.readline().strip()

    def __exit__(self, *exc: Any) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()


async def one(on: bool, model: ModelProcess, root: Path, files: list[str], k: int, cfg: Config, telemetry: Any) -> Sample:
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import RunOptions, Session, run_task

    key = tag(f"telemetry-{'on' if on else 'off'}-k{k}")
    model.add(key, tool_script(files, k, cfg.ttft))
    settings = our_settings(model.base_url, cfg.work, telemetry={"enabled": on})
    session = Session()
    t0, c0 = time.monotonic(), time.process_time()
    options = RunOptions(telemetry=telemetry.for_run(settings, run_id=key, session_id=session.id, model="m",
                                                     endpoint=model.base_url))
    report = await run_task(f"[{key}] Read the {k} parts one by one.", session=session, settings=settings,
                            workspace=DiskWorkspace([root]), approver=AllowAll(), emit=lambda _e: None, options=options)
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    served = model.log(key)
    model.forget(key)
    if str(report.stop_reason) != "done" or len(served) != k + 1:
        raise RuntimeError(f"telemetry {'on' if on else 'off'} K={k}: {report.stop_reason}, {len(served)} model calls")
    return Sample(wall, cpu, served)


async def measure(cfg: Config, model: ModelProcess) -> dict[str, Any]:
    """Medians of the overhead per turn (and CPU per turn) with telemetry on and off."""
    from agent_lsp.telemetry.hub import OtelTelemetry

    k = 10
    root = cfg.work / "ws-telemetry"
    files = make_files(root, k, RESULT_CHARS)
    saved = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    with Receiver() as endpoint:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint  # read once, when the exporter is made
        telemetry = OtelTelemetry()
        try:
            wall: dict[str, list[float]] = {"on": [], "off": []}
            cpu: dict[str, list[float]] = {"on": [], "off": []}
            runs = cfg.runs * 2  # the difference is small: twice the usual samples
            warmup = max(1, cfg.warmup)  # the SDK's import and providers are made once per process, not per turn
            for rep in range(warmup + runs):
                for name in ("off", "on") if rep % 2 else ("on", "off"):  # interleaved, order alternating
                    sample = await one(name == "on", model, root, files, k, cfg, telemetry)
                    if rep >= warmup:
                        wall[name].append(sample.per_turn)
                        cpu[name].append(sample.cpu_per_turn)
            telemetry.flush(1.0)
        finally:
            os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
            if saved is not None:
                os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = saved
    return {"k": k, "samples": len(wall["on"]), "on": median(wall["on"]), "off": median(wall["off"]),
            "cpu_on": median(cpu["on"]), "cpu_off": median(cpu["off"])}
