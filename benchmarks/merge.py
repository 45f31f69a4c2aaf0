"""Co-editing: the three-way merge an edit goes through when the file changed while it
waited, on a 5,000-line file with 20 hunks changed by the user and 20 by the agent.

    python benchmarks/merge.py [--runs R]

Times `agent_lsp.agent.fs.merge.resolve` (merge3 with patiencediff's matcher, Decision 82), the
function every workspace calls at apply time, and checks the merged text holds every change of
both sides. For comparison it also times merge3 with its default matcher (difflib's).
Target: <= 20 ms. Standalone: imports only the package itself.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_lsp.agent.fs.merge import resolve, split_lines  # noqa: E402

LINES = 5_000
HUNKS = 20  # per side


def texts(lines: int = LINES, hunks: int = HUNKS) -> tuple[str, str, str]:
    """(base, the user's text, the agent's result): each side replaces 3 lines with 4 in its own
    `hunks` places, the two sides' places interleaved and never adjacent."""
    base = [f"    value_{i} = compute({i}, factor={i % 7})  # line {i + 1}\n" for i in range(lines)]
    step = lines // hunks
    user, agent = list(base), list(base)
    # from the end, so earlier indices stay valid
    for k in reversed(range(hunks)):
        at_agent, at_user = k * step + step // 2, k * step + step // 5
        agent[at_agent : at_agent + 3] = [f"    agent_{k}_{j} = 1\n" for j in range(4)]
        user[at_user : at_user + 3] = [f"    user_{k}_{j} = 2\n" for j in range(4)]
    return "".join(base), "".join(user), "".join(agent)


def _time(fn: Any, runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU seconds of `fn` (CPU: what a loaded machine does not inflate)."""
    fn()  # warm-up (imports, caches)
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def measure(runs: int = 20) -> dict[str, Any]:
    base, user, agent = texts()
    resolution = resolve(base, user, agent)
    if resolution.text is None:
        raise RuntimeError("merge: the disjoint hunks conflicted")
    merged = resolution.text
    for k in range(HUNKS):
        if f"agent_{k}_3" not in merged or f"user_{k}_3" not in merged:
            raise RuntimeError(f"merge: hunk {k} of a side is missing from the merged text")
    if len(resolution.lines) != HUNKS:
        raise RuntimeError(f"merge: {len(resolution.lines)} agent hunks located, expected {HUNKS}")
    ours, ours_cpu = _time(lambda: resolve(base, user, agent), runs)

    def plain() -> None:
        from merge3 import Merge3

        list(Merge3(split_lines(base), split_lines(user), split_lines(agent)).merge_regions())

    return {"lines": LINES, "hunks": HUNKS, "merge": ours, "merge_cpu": ours_cpu,
            "plain": _time(plain, max(3, runs // 4))[0], "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    m = measure(args.runs)
    print(f"| merge of a {m['lines']:,}-line file, {m['hunks']} user + {m['hunks']} agent hunks "
          f"| {m['merge'] * 1000:.2f} ms ({m['merge_cpu'] * 1000:.2f} ms CPU; difflib's matcher: "
          f"{m['plain'] * 1000:.2f} ms) | <= 20 ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
