"""Issue 14: resuming a 200-turn session in a fresh server process.

The session is made once, in-process, by the same host code the server runs (`AgentHost`, a
scripted model, 200 `read_file` turns of ~3 KB each; the session's own squeezes and
compactions happen as they would), so its index and transcripts are exactly what the server
writes. Then, per repetition, a fresh `agent-lsp serve` process is started and left to settle
(its background imports done, as when an editor has been open a moment), and `agentLsp.run
{prompt, sessionId}` is sent: the figure is the time from sending that command to the scripted
model receiving the run's first request (target: <= 200 ms). For context, in a second fresh
server: the same for a run that starts a new session (what any first run of a process costs),
then the resume in that server once warmed by that run (what loading the session costs).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from benchmarks.common import Config, make_files, median, tag
from benchmarks.lsp_client import LspSession, settled_rss
from benchmarks.model_process import ModelProcess
from benchmarks.turns import AllowAll

READ_CHARS = 3_000
SUMMARY = "Summary: the files read so far hold numbered lines of filler text; nothing to fix."


def session_script(files: list[str], turns: int, note: str) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = [
        {"text": f"{note} reading {i + 1}.", "tool_calls": [{"name": "read_file", "arguments": {"path": files[i % len(files)]}}]}
        for i in range(turns)]
    replies.append({"text": f"{note} Read them all."})
    return replies


async def make_session(model: ModelProcess, root: Path, turns: int) -> tuple[str, tuple[str, str], dict[str, Any]]:
    """A persisted session of `turns` model turns; returns (sessionId, its routing keys: the
    prompt's and the compaction requests', facts)."""
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
    from agent_lsp.settings import Settings

    files = make_files(root, min(turns, 100), READ_CHARS, prefix="notes")
    key = tag("resume")
    note = f"[{key}-note]"  # in every assistant text: routes the compaction requests
    model.add(key, session_script(files, turns, note))
    model.add(note, [{"text": SUMMARY, "repeat": 50}])
    settings = Settings.model_validate({"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"},
                                        "maxTurns": turns + 10})
    host = AgentHost()
    events: list[str] = []
    session, store = await host.open_session([root], None)
    run = host.start(RunRequest(f"[{key}] Read the notes one by one.", session, store, settings,
                                RunPorts(DiskWorkspace([root]), AllowAll(), lambda e: events.append(e.kind))))
    await run.wait()
    await host.aclose()
    report = run.report
    if report is None or str(report.stop_reason) != "done" or report.turns != turns + 1:
        raise RuntimeError(f"resume: making the session stopped {report and report.stop_reason} after "
                           f"{report and report.turns} turns: {report and report.summary}")
    transcript = sum(Path(r.transcript).stat().st_size for r in session.runs)
    served = model.log(key, note)
    model.forget(key, note)
    return session.id, (key, note), {"entries": len(session.history), "transcript_bytes": transcript,
                             "compactions": events.count("compaction"), "requests": len(served)}


async def first_request(model: ModelProcess, lsp: LspSession, keys: tuple[str, ...], prompt: str, **more: Any) -> float:
    """Seconds from sending `agentLsp.run` to the model receiving the run's first request (a
    compaction request, routed to the second key, counts too)."""
    model.add(keys[0], [{"text": "Resumed: nothing more to do."}])
    trace = await lsp.run(prompt, **more)
    served = model.log(*keys)
    model.forget(*keys)
    if trace.report.get("stopReason") != "done" or not served:
        raise RuntimeError(f"resume: the run stopped {trace.report.get('stopReason')} ({trace.report.get('summary')})")
    return min(s.t_start for s in served) - trace.t_sent


def settle(pid: int) -> None:
    """Until the server's RSS has not moved for a second (its background imports of the core
    and the model SDK are done), at most 15 s."""
    settled_rss(pid, stable=1.0, limit=15.0)


async def measure(cfg: Config, model: ModelProcess, env: dict[str, str]) -> dict[str, Any]:
    turns = 20 if cfg.quick else 200
    root = (cfg.work / "ws-resume").resolve()
    root.mkdir(parents=True, exist_ok=True)
    session_id, keys, facts = await make_session(model, root, turns)
    init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}, "maxTurns": turns + 10}
    times: dict[str, list[float]] = {"resume": [], "new": [], "warm_resume": []}

    async def resumed(lsp: LspSession) -> float:
        model.add(keys[1], [{"text": SUMMARY}])  # should the resumed history need compacting
        return await first_request(model, lsp, keys, "Go on where you left off.", sessionId=session_id)

    for rep in range(cfg.warmup + cfg.runs):
        got: dict[str, float] = {}
        # (a) the resume as the first run of a fresh server (the figure)
        async with LspSession(root, env, init) as lsp:
            await asyncio.to_thread(settle, lsp.pid)
            got["resume"] = await resumed(lsp)
        # (b) a new session as the first run of a fresh server (what any first run costs), then
        # (c) the resume in that server, now warmed by one run (what the session itself costs)
        async with LspSession(root, env, init) as lsp:
            await asyncio.to_thread(settle, lsp.pid)
            other = tag("resume-new")
            got["new"] = await first_request(model, lsp, (other,), f"[{other}] A new question.")
            got["warm_resume"] = await resumed(lsp)
        if rep >= cfg.warmup:
            for name, seconds in got.items():
                times[name].append(seconds)
    return {"turns": turns, **{name: median(v) for name, v in times.items()}, **facts}
