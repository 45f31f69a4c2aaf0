"""A language server agent-lsp starts itself, asked through its code-intel source.

On a generated project (N modules, each calling into a shared `core.py` with a distractor class
holding a same-named method), per server: the cold start (a new source: process start,
initialize, the file opened, and the first `textDocument/definition` answered) and the warm
requests after it (definition, references, hover; medians of R rounds). Each cold start is a new
process (`--cold N` of them, median reported). Servers: basedpyright and ty from the test extra,
each skipped (and said so) when it is not installed.

    python benchmarks/langserver_cold.py [--quick] [--files N] [--rounds R] [--cold N] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_lsp.langservers.manager import LanguageServers  # noqa: E402
from agent_lsp.settings_schema import LanguageServersSettings  # noqa: E402

SERVERS = {"basedpyright": ["basedpyright-langserver", "--stdio"], "ty": ["ty", "server"]}
CORE = '''\
class Engine:
    def run(self, value: int) -> int:
        return value * 2


class Decoy:
    def run(self, value: int) -> int:
        return value - 1


def engine() -> Engine:
    return Engine()
'''
MODULE = '''\
from core import Decoy, engine


def step_{i}(value: int) -> int:
    # run is named in this comment
    label = "run"
    other = Decoy().run(value)
    return engine().run(value) + other + len(label)
'''


def project(root: Path, files: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "core.py").write_text(CORE)
    for i in range(files):
        (root / f"mod_{i:04d}.py").write_text(MODULE.format(i=i))
    return root / "mod_0000.py"


def at(path: Path, line: int, column: int, **more: Any) -> dict[str, Any]:
    return {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": column}, **more}


async def one_server(name: str, command: list[str], root: Path, target: Path, rounds: int, colds: int) -> dict[str, Any]:
    settings = LanguageServersSettings.model_validate(
        {"auto": False, "servers": {name: {"command": command, "extensions": [".py"]}}})
    definition = at(target, 7, 20)  # `run` of engine().run(value)
    cold: list[float] = []
    warm: dict[str, list[float]] = {"definition": [], "references": [], "hover": []}
    references = 0
    for attempt in range(colds):
        manager = LanguageServers(settings, [root], request_timeout=120, start_timeout=120)
        (source,) = manager.sources()
        try:
            started = time.perf_counter()
            found = await source.request("textDocument/definition", definition, target)
            cold.append(time.perf_counter() - started)
            if not found:
                raise RuntimeError(f"{name}: no definition found")
            if attempt == colds - 1:
                asks = {"definition": ("textDocument/definition", definition),
                        "references": ("textDocument/references", {**definition, "context": {"includeDeclaration": False}}),
                        "hover": ("textDocument/hover", definition)}
                for _ in range(rounds):
                    for kind, (method, params) in asks.items():
                        t0 = time.perf_counter()
                        answer = await source.request(method, params, target)
                        warm[kind].append(time.perf_counter() - t0)
                        if kind == "references":
                            references = len(answer or [])
        finally:
            await manager.aclose()
    return {"server": name, "cold_s": statistics.median(cold), "cold_all_s": cold,
            **{f"warm_{k}_ms": statistics.median(v) * 1000 for k, v in warm.items()}, "references": references}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--files", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--cold", type=int)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    files = args.files or (20 if args.quick else 500)
    rounds = args.rounds or (3 if args.quick else 20)
    colds = args.cold or (1 if args.quick else 3)
    here = Path(sys.executable).parent
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="langserver-bench-") as work:
        root = Path(work) / "proj"
        target = project(root, files)
        for name, (program, *rest) in SERVERS.items():
            found = shutil.which(program, path=str(here)) or shutil.which(program)
            if found is None:
                rows.append({"server": name, "skipped": f"{program} is not installed"})
                continue
            rows.append(await one_server(name, [found, *rest], root, target, rounds, colds))
    print(f"language servers started by agent-lsp: {files + 1} modules, {colds} cold start(s), {rounds} warm rounds")
    for row in rows:
        if "skipped" in row:
            print(f"  {row['server']:<13} skipped: {row['skipped']}")
            continue
        print(f"  {row['server']:<13} cold start to the first definition {row['cold_s']:.2f} s; warm: "
              f"definition {row['warm_definition_ms']:.1f} ms, references {row['warm_references_ms']:.1f} ms "
              f"({row['references']} found), hover {row['warm_hover_ms']:.1f} ms")
    if args.json:
        args.json.write_text(json.dumps({"files": files, "rounds": rounds, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
