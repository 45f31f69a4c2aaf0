"""The standalone benchmarks that run in process (verify, steer) still run end to end against
today's API (a smoke test: no performance thresholds), with the functional facts their figures
rest on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bench(name: str, tmp_path: Path) -> dict:
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / name), "--runs", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_the_steer_benchmark_lands_the_steer_without_an_added_model_call(tmp_path):
    figures = bench("steer.py", tmp_path)
    assert figures["model calls without / with a steer (target: equal)"] == "[2] / [2]"
    assert figures["the steer landed in request (the one after the command's result)"] == [2]


def test_the_verify_benchmark_runs_no_second_check(tmp_path):
    figures = bench("verify.py", tmp_path)
    assert figures["checks run with verify when the agent checked"] == 1
