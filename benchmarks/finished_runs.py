"""Memory a long-lived host keeps for its last finished runs: 100 runs, each in its own
session whose history holds a ~100 KB prompt, on a host that keeps no idle session; the figure is
the size of every object reachable from the host's finished-run list (a deep sizeof, stopping at
modules, classes and functions), against the size of the histories those runs had.
(Process-wide allocation would also count the shared model client's bounded encoding cache and
the in-process scripted model's log, which are not this list's.)
Runs on its own: `python benchmarks/finished_runs.py [--runs 100] [--prompt-kb 100]`."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace  # noqa: E402
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest  # noqa: E402
from agent_lsp.agent.ports import Answer, ApprovalRequest, Decision  # noqa: E402
from agent_lsp.settings import Settings  # noqa: E402
from agent_lsp.testing.scripted_model import ScriptedModelServer  # noqa: E402
from benchmarks.common import API_KEY  # noqa: E402


class Deny:
    async def ask(self, request: ApprovalRequest) -> Answer:
        return Answer(Decision.DENY)


async def measure(runs: int, prompt_kb: int, root: Path) -> tuple[int, int]:
    """(bytes reachable from the finished-run list, bytes of prompts in the runs' histories)."""
    with ScriptedModelServer() as model:
        model.add([{"text": "ok", "repeat": runs}])
        settings = Settings.model_validate({"model": "m", "baseUrl": model.base_url})
        host = AgentHost(keep_sessions=0)
        prompt = "x" * (prompt_kb * 1000)
        try:
            for i in range(runs):
                await one_run(host, [root], settings, f"{i} {prompt}")
            gc.collect()
            assert len(host.finished) == runs
            kept = deep_size(host.finished)
        finally:
            await host.aclose()
    return kept, runs * len(prompt)


SHARED = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def deep_size(root: object) -> int:
    """sys.getsizeof over everything reachable from `root`, each object once."""
    seen: set[int] = set()
    todo = [root]
    total = 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, SHARED):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


async def one_run(host: AgentHost, roots: list[Path], settings: Settings, prompt: str) -> None:
    session, store = await host.open_session(roots, None)
    ports = RunPorts(DiskWorkspace(roots), Deny(), lambda event: None)
    await host.start(RunRequest(prompt, session, store, settings, ports)).wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--prompt-kb", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agent-lsp-bench-"))
    os.environ.update({"AGENT_LSP_STATE_DIR": str(work / "state"), "OPENAI_API_KEY": API_KEY})
    root = work / "ws"
    root.mkdir()
    kept, history = asyncio.run(measure(args.runs, args.prompt_kb, root))
    print(f"{args.runs} finished runs ({history / 1e6:.1f} MB of prompts in their histories): "
          f"the finished-run list holds {kept / 1e6:.3f} MB ({100 * kept / history:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
