"""Shared pieces: the benchmark's knobs, sample workspaces, statistics and result rows."""

from __future__ import annotations

import os
import statistics
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
API_KEY = "sk-bench-" + "0123456789abcdef" * 3


@dataclass
class Config:
    """How much to measure: `quick` is a smoke run (one repetition, no verdicts)."""

    quick: bool = False
    runs: int = 5  # repetitions whose median is reported
    warmup: int = 1
    ttft: float = 0.01  # fixed time-to-first-token of every scripted reply (seconds)
    # 20 runs share one server process: with a TTFT near zero that figure would measure only
    # CPU saturation; 200 ms is a fast hosted model's time to first token.
    concurrent_ttft: float = 0.2
    turn_counts: tuple[int, ...] = (10, 50)
    concurrent_turns: int = 10
    session_turns: int = 30
    session_settings: dict[str, Any] = field(default_factory=dict)  # extra settings of our runtime
    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="agent-lsp-bench-")))

    @classmethod
    def make(cls, quick: bool, runs: int | None = None) -> Config:
        if quick:
            # Every code path once, at a fraction of the sizes (a small context window so the
            # short session still compacts).
            return cls(quick=True, runs=runs or 1, warmup=0, turn_counts=(3,), concurrent_turns=2,
                       session_turns=10, session_settings={"contextWindow": 20000})
        return cls(runs=max(5, runs or 5))


def tag(prefix: str) -> str:
    """A unique routing key for the scripted model (a substring of the first user message)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_files(root: Path, count: int, target_chars: int, prefix: str = "part") -> list[str]:
    """`count` distinct text files whose `read_file` output (numbered lines) is about
    `target_chars` characters. Returns their workspace-relative paths."""
    width = 57
    lines = max(1, target_chars // (width + 1 + len(str(target_chars // width)) + 1))
    filler = "the quick brown fox jumps over the lazy dog 0123456789 " * 2
    names = []
    for index in range(count):
        name = f"data/{prefix}{index:03d}.txt"
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"{prefix} {index:03d} line {n:05d} {filler}"[:width] + "\n" for n in range(lines))
        path.write_text(body, encoding="utf-8")
        names.append(name)
    return names


def read_numbered(root: Path, rel: str) -> str:
    """The baselines' read_file: the same numbered-lines text our `read_file` returns."""
    lines = (root / rel).read_text(encoding="utf-8").splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i + 1:>{width}}\t{line}" for i, line in enumerate(lines))


def bench_env(work: Path) -> dict[str, str]:
    """Environment for our code (in-process and server subprocesses): an isolated state dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_LSP_", "OPENAI_"))}
    # A key of a real key's length, so the secret redaction on every event runs as for users.
    env.update({"AGENT_LSP_STATE_DIR": str(work / "state"), "OPENAI_API_KEY": API_KEY,
                "PYTHONUNBUFFERED": "1"})
    return env


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], pct: float) -> float:
    """Linear-interpolated percentile (pct in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * pct / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux /proc; no psutil needed)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


@dataclass
class Row:
    """One line of the results table: a measured figure against its target.

    `ratio` = measured / allowed (<= 1.0 meets the target); None where the figure has no
    numeric target (an informational row). `ok` is the verdict (None in quick mode)."""

    figure: str
    measured: str
    target: str
    ratio: float | None = None
    ok: bool | None = None
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def verdict(row: Row, quick: bool) -> Row:
    if quick:
        row.ok = None
    elif row.ok is None and row.ratio is not None:
        row.ok = row.ratio <= 1.0
    return row
