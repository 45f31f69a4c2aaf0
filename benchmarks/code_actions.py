"""Code actions beside a streaming run: 50 `textDocument/codeAction` requests sent at
once while a run streams 20,000 characters, with 100 checkpointed runs (20 files each) in the
workspace's state. Reported: the longest gap between two `agentLsp/stream` events of the run
with the code actions, beside the same run without them, and the code actions' answer time.

    python benchmarks/code_actions.py [--runs 3] [--checkpoints 100] [--actions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bench_env, median, tag  # noqa: E402
from benchmarks.lsp_client import LspSession  # noqa: E402
from benchmarks.model_process import ModelProcess  # noqa: E402
from benchmarks.streaming import CHUNK_CHARS, CHUNK_DELAY, stream_text  # noqa: E402

FILES_PER_RUN = int(os.environ.get("BENCH_FILES_PER_RUN", "20"))


def checkpointed_runs(state: Path, root: Path, count: int) -> None:
    """`count` finished runs that each changed FILES_PER_RUN files, as their manifests."""
    from agent_lsp.agent.state.checkpoints import CheckpointStore, FileRecord, Manifest

    store = CheckpointStore(state, [root])
    now = time.time()
    for i in range(count):
        manifest = Manifest(f"r-bench{i:04d}", f"s-bench{i % 10}", now - count + i, finished=True)
        for j in range(FILES_PER_RUN):
            path = str(root / f"pkg{j}" / f"mod{i}.py")
            manifest.files[path] = FileRecord(path, before=f"{i:040x}", after=f"{j:040x}")
        store.save(manifest)


async def runs_that_edit(lsp: LspSession, model: ModelProcess, root: Path, count: int) -> None:
    """`count` real runs through the server, each editing one file (checkpointed as users get)."""
    for i in range(count):
        (root / f"mod{i}.py").write_text(f"VALUE = {i}\n")
        key = tag("edit")
        model.add(key, [{"tool_calls": [{"name": "edit_file", "arguments": {
            "path": f"mod{i}.py", "old_text": f"VALUE = {i}", "new_text": f"VALUE = {i + 1}"}}]},
            {"text": "edited"}])
        await lsp.run(f"[{key}] Edit mod{i}.py.")
        model.forget(key)


def longest_gap(trace: Any) -> float:
    times = [t for t, e in trace.events if e["kind"] in ("text", "usage", "stop")]
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


async def code_actions(lsp: LspSession, uri: str, count: int) -> float:
    """`count` code-action requests at once; seconds until the last is answered."""
    from lsprotocol import types

    where = types.Range(types.Position(0, 0), types.Position(1, 0))
    params = types.CodeActionParams(types.TextDocumentIdentifier(uri), where, types.CodeActionContext([]))
    began = time.monotonic()
    await asyncio.gather(*(lsp.client.text_document_code_action_async(params) for _ in range(count)))
    return time.monotonic() - began


async def one_run(lsp: LspSession, model: ModelProcess, uri: str, actions: int) -> dict[str, float]:
    key = tag("code-actions")
    model.add(key, [{"text": stream_text(), "chunk_size": CHUNK_CHARS, "chunk_delay": CHUNK_DELAY, "ttft": 0.01}])
    trace = await lsp.start_run(f"[{key}] Write a long answer.")
    answered = 0.0
    if actions:
        for _ in range(12_000):  # at most a minute for the first text
            if any(e["kind"] == "text" for _, e in trace.events):
                break
            await asyncio.sleep(0.005)
        answered = await code_actions(lsp, uri, actions)
    await asyncio.wait_for(trace.stopped.wait(), 120)
    model.forget(key)
    return {"gap": longest_gap(trace), "answered": answered}


async def measure(
    runs: int, checkpoints: int, actions: int, warm: bool = True, real: bool = False
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="agent-lsp-bench-actions-"))
    root = (work / "ws").resolve()
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    env = bench_env(work)
    os.environ["AGENT_LSP_STATE_DIR"] = env["AGENT_LSP_STATE_DIR"]
    from agent_lsp.settings import state_dir

    if not real:
        checkpointed_runs(state_dir(), root, checkpoints)
    model = ModelProcess()
    try:
        init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}}
        async with LspSession(root, env, init, edits="disk") as lsp:
            uri = (root / "calc.py").as_uri()
            if real:
                await runs_that_edit(lsp, model, root, checkpoints)
            if warm:
                await code_actions(lsp, uri, 1)  # the manifests read once
            await one_run(lsp, model, uri, 0)  # warm-up
            plain, busy = [], []
            for _ in range(runs):  # interleaved
                plain.append(await one_run(lsp, model, uri, 0))
                busy.append(await one_run(lsp, model, uri, actions))
    finally:
        model.close()
    return {
        "checkpoints": checkpoints, "actions": actions, "runs": runs,
        "gap_without_ms": median([r["gap"] for r in plain]) * 1000,
        "gap_with_ms": median([r["gap"] for r in busy]) * 1000,
        "gap_with_max_ms": max(r["gap"] for r in busy) * 1000,
        "answered_ms": median([r["answered"] for r in busy]) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--actions", type=int, default=50)
    parser.add_argument("--real", action="store_true", help="the checkpoints made by real runs")
    parser.add_argument("--cold", action="store_true", help="no code action before the first run")
    args = parser.parse_args()
    result = asyncio.run(measure(args.runs, args.checkpoints, args.actions, not args.cold, args.real))
    print(
        f"{result['actions']} code actions beside a streaming run, {result['checkpoints']} checkpointed runs: "
        f"longest stream gap {result['gap_with_ms']:.0f} ms (max {result['gap_with_max_ms']:.0f}; "
        f"{result['gap_without_ms']:.0f} ms without them); all answered in {result['answered_ms']:.0f} ms "
        f"(median of {result['runs']})"
    )


if __name__ == "__main__":
    main()
