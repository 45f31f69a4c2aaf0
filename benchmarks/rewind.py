"""Issue 12 through the real server: rewind of a run that touched 50 files.

A run whose scripted model makes 50 `edit_file` calls, each on another file (the client applies
every edit to disk, as our editor clients save after an agent edit); then `agentLsp.rewind
{runId}`: the time from sending that executeCommand to the client receiving the rewind's one
`workspace/applyEdit` (target: under 300 ms), and to the command's answer (the rewind's own
checkpoint and the session's history note written). Each repetition checks that the files are
back as they were, so the next run edits the same files again.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.checkpoints import edit_script, source_files
from benchmarks.common import Config, median, tag
from benchmarks.lsp_client import LspSession
from benchmarks.model_process import ModelProcess


async def measure(cfg: Config, model: ModelProcess, env: dict[str, str]) -> dict[str, Any]:
    root = (cfg.work / "ws-rewind").resolve()
    count = 10 if cfg.quick else 50
    files = source_files(root, count)
    pristine = {f: (root / f).read_text(encoding="utf-8") for f in files}
    init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}, "maxTurns": 200}
    to_edit: list[float] = []
    to_answer: list[float] = []
    restored: list[int] = []
    async with LspSession(root, env, init, edits="disk") as lsp:
        for rep in range(cfg.warmup + cfg.runs):
            key = tag("rewind")
            model.add(key, edit_script(files, cfg.ttft))
            trace = await lsp.run(f"[{key}] Edit the {count} modules.")
            model.forget(key)
            report = trace.report
            if report.get("stopReason") != "done" or len(report.get("editedFiles", [])) != count or not report.get("rewindable"):
                raise RuntimeError(f"rewind: the run stopped {report.get('stopReason')} with "
                                   f"{len(report.get('editedFiles', []))} files edited, rewindable={report.get('rewindable')}")
            if any((root / f).read_text(encoding="utf-8") == pristine[f] for f in files):
                raise RuntimeError("rewind: the client did not apply the run's edits to disk")
            edits_before = len(lsp.edit_times)
            t0 = time.monotonic()
            result = await lsp.command("agentLsp.rewind", {"runId": trace.run_id})
            t1 = time.monotonic()
            if len(lsp.edit_times) != edits_before + 1:
                raise RuntimeError(f"rewind: {len(lsp.edit_times) - edits_before} applyEdit requests, expected one")
            if result.get("conflicts") or result.get("notRestorable") or len(result.get("restored", [])) != count:
                raise RuntimeError(f"rewind: {len(result.get('restored', []))} restored, conflicts {result.get('conflicts')}, "
                                   f"not restorable {result.get('notRestorable')}")
            if any((root / f).read_text(encoding="utf-8") != pristine[f] for f in files):
                raise RuntimeError("rewind: the files are not back as they were")
            if rep >= cfg.warmup:
                to_edit.append(lsp.edit_times[-1] - t0)
                to_answer.append(t1 - t0)
                restored.append(len(result["restored"]))
    return {"files": count, "to_edit": median(to_edit), "to_answer": median(to_answer),
            "max_to_edit": max(to_edit), "restored": min(restored)}
