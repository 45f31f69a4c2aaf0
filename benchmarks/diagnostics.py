"""Issue 13: what the editor's diagnostics add to an edit, through the real server.

Two servers side by side on the same workspace: one whose client advertises
`experimental.agentLsp.diagnostics: true` and answers `agentLsp/diagnostics` at once (one
warning per file asked about), one whose client does not advertise it. Each runs the same N
`edit_file` calls (each on another file; the client answers `workspace/applyEdit` with
`applied: true` without touching the disk, so the script runs again on the same files), runs
interleaved. Per edit: the time between the model's answer holding the call and the next
request; the figure is the difference of the medians (target: <= 5 ms).
"""

from __future__ import annotations

from typing import Any

from benchmarks.checkpoints import edit_script, source_files
from benchmarks.common import Config, cpu_seconds, median, tag
from benchmarks.lsp_client import LspSession
from benchmarks.model_process import ModelProcess
from benchmarks.turns import turn_gaps

WARNING = {"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 5}}, "severity": 2,
           "source": "bench-lint", "code": "W001", "message": "constant redefined"}


async def measure(cfg: Config, model: ModelProcess, env: dict[str, str]) -> dict[str, Any]:
    root = (cfg.work / "ws-diagnostics").resolve()
    count = 5 if cfg.quick else 30
    files = source_files(root, count)
    init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}, "maxTurns": 200}
    per_edit: dict[str, list[float]] = {"with": [], "without": []}
    cpu: dict[str, list[float]] = {"with": [], "without": []}
    async with LspSession(root, env, init, edits="ack", diagnostics=WARNING) as answering, \
            LspSession(root, env, init, edits="ack") as silent:
        warmup = max(1, cfg.warmup)  # even in quick mode: a server's first run pays one-time costs (~50 ms an edit)
        for rep in range(warmup + cfg.runs):
            order = (("with", answering), ("without", silent)) if rep % 2 == 0 else (("without", silent), ("with", answering))
            for variant, lsp in order:
                key = tag(f"diag-{variant}")
                model.add(key, edit_script(files, cfg.ttft))
                asked = lsp.diagnostics_asked
                c0 = cpu_seconds(lsp.pid)
                trace = await lsp.run(f"[{key}] Edit the {count} modules.")
                c1 = cpu_seconds(lsp.pid)
                served = model.log(key)
                model.forget(key)
                report = trace.report
                if report.get("stopReason") != "done" or len(served) != count + 1:
                    raise RuntimeError(f"diagnostics/{variant}: {report.get('stopReason')}, {len(served)} model calls")
                if variant == "with" and lsp.diagnostics_asked - asked != count:
                    raise RuntimeError(f"diagnostics: the server asked {lsp.diagnostics_asked - asked} times for {count} edits")
                if rep >= warmup:
                    per_edit[variant] += turn_gaps(trace.t_sent, served, trace.t_stop)[1:-1]
                    cpu[variant].append((c1 - c0) / count)
    return {"edits": count, "with": median(per_edit["with"]), "without": median(per_edit["without"]),
            "cpu_with": median(cpu["with"]), "cpu_without": median(cpu["without"]), "samples": len(per_edit["with"])}
