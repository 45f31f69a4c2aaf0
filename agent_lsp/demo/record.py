"""Re-record the demo's bundled session: `python -m agent_lsp.demo.record`.

Runs the real agent core on a copy of the sample workspace against the scripted
OpenAI-compatible server, then keeps the run's transcript as `session.jsonl` (paths of the
temporary copy replaced by `<workspace>`), which `replay:` re-serves offline."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import Session, run_task
from agent_lsp.agent.ports import Decision
from agent_lsp.demo import TASK
from agent_lsp.settings import Settings
from agent_lsp.testing.scripted_model import ScriptedModelServer

HERE = Path(__file__).parent

SCRIPT = [
    {
        "text": "I'll start by looking at the project and the code under test.",
        "tool_calls": [
            {"name": "list_files", "arguments": {}},
            {"name": "read_file", "arguments": {"path": "stats.py"}},
        ],
        "chunk_size": 6,
        "chunk_delay": 0.02,
    },
    {
        "text": "Let me run the tests to see the failure.",
        "tool_calls": [{"name": "run_command", "arguments": {"command": "python3 -m unittest -q"}}],
        "chunk_size": 6,
    },
    {
        "text": "`mean()` divides by `len(values) - 1`, "
        "which is the sample-variance denominator, not the "
        "mean's: for [2, 4, 6] it returns 6 instead of 4. Fixing the denominator.",
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {
                    "path": "stats.py",
                    "old_text": "return sum(values) / (len(values) - 1)",
                    "new_text": "return sum(values) / len(values)",
                },
            }
        ],
        "chunk_size": 6,
    },
    {
        "text": "Now the tests again.",
        "tool_calls": [{"name": "run_command", "arguments": {"command": "python3 -m unittest -q"}}],
        "chunk_size": 6,
    },
    {
        "text": "Fixed. `mean()` in stats.py divided by `len(values) - 1`; "
        "it now divides by `len(values)`, "
        "and both tests pass (`python3 -m unittest -q`).",
        "chunk_size": 6,
    },
]


async def record(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer() as model:
        root = Path(tmp) / "sample"
        shutil.copytree(HERE / "sample", root)
        model.add(TASK[:20], SCRIPT)

        class Yes:
            async def ask(self, request):
                return Decision.ALLOW

        settings = Settings(
            model="gpt-4.1-mini", base_url=model.base_url, transcript_dir=str(Path(tmp) / "runs")
        )
        report = await run_task(
            TASK,
            session=Session(),
            settings=settings,
            workspace=DiskWorkspace([root]),
            approver=Yes(),
            emit=lambda event: None,
            env={"OPENAI_API_KEY": "recording"},
        )
        if report.stop_reason != "done":
            raise SystemExit(f"recording failed: {report.summary}")
        text = Path(report.transcript).read_text(encoding="utf-8")
        out.write_text(
            text.replace(str(root.resolve()), "<workspace>").replace(tmp, "<tmp>"), encoding="utf-8"
        )
        print(f"recorded {len(text.splitlines())} transcript lines to {out}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(record(HERE / "session.jsonl"))
