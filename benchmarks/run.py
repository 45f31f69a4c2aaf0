"""Run every benchmark and compare each figure with its target: what agent-lsp adds on top of the
model (per turn, start-up, streaming, sub-agents, concurrency, sessions) and what checkpoints,
rewind, search, diagnostics, session resume, ACP, MCP and the sandbox cost.

    python benchmarks/run.py            # full: medians of >= 5 runs, verdicts, writes RESULTS.md
    python benchmarks/run.py --quick    # smoke: one run each, no verdicts, < 1 minute
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable; and `import acp` must find
    here = str(Path(__file__).resolve().parent)  # the ACP SDK, not benchmarks/acp.py in the script's folder
    sys.path[:] = [p for p in sys.path if p not in ("", here)]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import (  # noqa: E402
    checkpoints,
    concurrency,
    delegation,
    diagnostics,
    first_request,
    merge,
    resume,
    rewind,
    sandbox,
    session,
    startup,
    streaming,
    telemetry,
    turns,
)
from benchmarks.common import REPO, Config, Row, bench_env, median, ms, verdict  # noqa: E402
from benchmarks.lsp_client import LspSession  # noqa: E402
from benchmarks.model_process import ModelProcess  # noqa: E402

MIB = 1024 * 1024
ANALYSIS = "## Analysis"  # RESULTS.md keeps everything from this heading on when regenerated
FIGURES = ("turns", "lsp", "startup", "first_request", "streaming", "delegation", "concurrency", "session", "checkpoints", "snapshots",
           "rewind", "search", "diagnostics", "resume", "acp", "mcp", "sandbox", "telemetry", "merge")
USAGE_NOTE = "usage events on (one `usage` event per model call, as every run emits)"


def _ratio(measured: float, allowed: float) -> float:
    return measured / allowed if allowed > 0 else float("inf")


# -- rows per figure ---------------------------------------------------------------------
def turn_rows(h: dict[str, Any], cfg: Config) -> list[Row]:
    rows = []
    for k in cfg.turn_counts:
        m = h[f"k{k}"]
        cpu = h[f"k{k}_cpu"]
        floor, ours, peer = m["floor"], m["ours"], m.get("peer")
        rows.append(Row(f"overhead/turn headless, K={k}, 50 KB results", f"{ms(ours)} (floor {ms(floor)})",
                        "<= floor + 1 ms", _ratio(ours, floor + 0.001),
                        note=f"CPU/turn: ours {ms(cpu['ours'])}, floor {ms(cpu['floor'])}"
                             + (f", peer {ms(cpu['peer'])}" if "peer" in cpu else "")
                             + f" (CPU ratio to floor + 1 ms: {_ratio(cpu['ours'], cpu['floor'] + 0.001):.2f}); {USAGE_NOTE}"))
        if peer is None:
            rows.append(Row(f"overhead/turn headless, K={k}, vs peer", "n/a", "< peer", None,
                            note=h["peer_problem"] or ""))
        else:
            rows.append(Row(f"overhead/turn headless, K={k}, vs peer", f"{ms(ours)} (peer {ms(peer)})",
                            "< peer", _ratio(ours, peer)))
    return rows


def lsp_rows(lsp: dict[str, Any], cfg: Config) -> list[Row]:
    rows = []
    for k in cfg.turn_counts:
        ours, base = lsp[f"k{k}"], lsp[f"k{k}_headless"]
        cpu, base_cpu = lsp[f"k{k}_cpu"], lsp[f"k{k}_headless_cpu"]
        rows.append(Row(f"overhead/turn through LSP, K={k}", f"{ms(ours)} (headless, paired runs: {ms(base)})",
                        "<= headless + 3 ms", _ratio(ours, base + 0.003),
                        note=f"server CPU/turn {ms(cpu)}, headless in-process CPU/turn {ms(base_cpu)} "
                             f"(CPU ratio to headless + 3 ms: {_ratio(cpu, base_cpu + 0.003):.2f}); {USAGE_NOTE}, "
                             "each also an `agentLsp/stream` notification and in the progress message"))
    return rows


def startup_rows(s: dict[str, Any]) -> list[Row]:
    servers = "the test servers of tests/mcp/setup.sh" if s["mcp_installed"] else "declared by command name (not installed)"
    return [Row("spawn -> initialize answered", f"{ms(s['ours'])} (bare pygls {ms(s['bare'])})",
                "<= 1.15 x bare server", _ratio(s["ours"], 1.15 * s["bare"])),
            Row("RSS after initialize (settled)",
                f"{s['rss'] / MIB:.1f} MiB ({s['rss_at_answer'] / MIB:.1f} MiB at the answer; bare pygls {s['rss_bare'] / MIB:.1f} MiB)",
                "<= 80 MB (read as MiB)", _ratio(s["rss"], 80 * MIB)),
            Row("spawn -> initialize answered, 3 MCP servers configured",
                f"{ms(s['mcp'])} (bare pygls {ms(s['bare'])}; no MCP servers: {ms(s['ours'])})",
                "<= 1.15 x bare server", _ratio(s["mcp"], 1.15 * s["bare"]),
                note=f"`mcpServers` in initializationOptions: everything, time, git ({servers}); "
                     f"{s['mcp_children']} child process(es) once the server settled after `initialized` "
                     f"(servers start lazily, at the first run that needs tools); settled RSS {s['rss_mcp'] / MIB:.1f} MiB")]


def first_request_rows(f: dict[str, Any]) -> list[Row]:
    how = (f"median of {f['rounds']} interleaved rounds (order alternating), fresh processes, no MCP "
           "servers or hooks, the package byte-compiled as pip installs it")
    return [Row("`agent-lsp run`: spawn -> first model request", f"{ms(f['ours'])} (bare openai-SDK loop {ms(f['bare'])})",
                "<= 1.0 x bare loop", _ratio(f["ours"], f["bare"]),
                note=f"{how}; CPU at the first request: ours {ms(f['cpu'])}, bare loop {ms(f['cpu_bare'])} "
                     f"({_ratio(f['cpu'], f['cpu_bare']):.2f})"),
            Row("`agent-lsp run`: peak RSS (whole run)", f"{f['rss'] / MIB:.1f} MiB (bare loop {f['rss_bare'] / MIB:.1f} MiB)",
                "<= 1.1 x bare loop", _ratio(f["rss"], 1.1 * f["rss_bare"]), note=how)]


def streaming_rows(s: dict[str, Any]) -> list[Row]:
    return [Row("streaming 20,000 chars at 1 ms/chunk: notifications/s",
                f"{s['rate']:.1f}/s ({s['events']:.0f} text events over {s['span']:.2f} s; busiest 1 s: {s['window_max']})",
                "<= 30/s per run", _ratio(s["rate"], 30)),
            Row("streaming: text identical", "yes" if s["identical"] else "NO", "identical",
                ok=s["identical"]),
            Row("streaming: last delta after the model's last chunk", ms(s["last_delay"]), "<= 50 ms",
                _ratio(s["last_delay"], 0.050))]


def delegation_rows(d: dict[str, Any]) -> list[Row]:
    return [Row("4 delegate calls, sub-agent model call 300 ms: wall",
                f"{ms(d['four'])} (one sub-agent: {ms(d['one'])}; sub-agent starts within {ms(d['start_spread'])})",
                "<= 1.3 x one sub-agent", _ratio(d["four"], 1.3 * d["one"]))]


def concurrency_rows(c: dict[str, Any]) -> list[Row]:
    return [Row(f"20 concurrent runs x {c['turns']} turns: all finish",
                f"{', '.join(map(str, c['done']))} of 20 done per round",
                "all finish", ok=c["all_done"]),
            Row("20 concurrent runs: p99 overhead/turn",
                f"{ms(c['p99'])} (p50 {ms(c['p50'])}, pooled p99 {ms(c['p99_pooled'])}, max {ms(c['max'])}; {c['samples']} turns)",
                "<= 50 ms (issue 25)", _ratio(c["p99"], 0.050),
                note=f"p99 of the runs' first gaps (the command to the first model request) "
                     f"{ms(c['start_p99'])}, of the gaps between model calls {ms(c['between_p99'])}; "
                     f"server CPU {ms(c['cpu_per_turn'])} per model call; the server process was busy "
                     f"{c['busy'] * 100:.0f}% of each round's wall time (one event loop: near 100% means queueing); "
                     f"the scripted model server {c['model_busy'] * 100:.0f}%"),
            Row("20 concurrent runs: p99 overhead/turn vs the bare SDK",
                f"{ms(c['p99'])} (20 bare openai-SDK loops sharing one client in one process: {ms(c['floor']['p99'])})",
                "<= floor", _ratio(c["p99"], c["floor"]["p99"]),
                note=f"floor, same rounds in the same minutes: p50 {ms(c['floor']['p50'])} (ours {ms(c['p50'])}), "
                     f"first gaps p99 {ms(c['floor']['start_p99'])}, gaps between model calls p99 "
                     f"{ms(c['floor']['between_p99'])}, CPU {ms(c['floor']['cpu_per_turn'])} per model call "
                     "(benchmarks/floor_fanout.py)"),
            Row("peak RSS with 20 concurrent runs", f"{c['peak_rss'] / MIB:.1f} MiB "
                f"({c['rss_initialized'] / MIB:.1f} MiB before the runs)", "<= 150 MB (read as MiB)",
                _ratio(c["peak_rss"], 150 * MIB))]


def session_rows(s: dict[str, Any]) -> list[Row]:
    ours, floor = s["ours"], s["floor"]
    share = ours["extend_share"]
    return [Row(f"long session ({s['turns']} x 60 KB reads): request bytes",
                f"{ours['bytes'] / 1e6:.2f} MB = {s['ratio'] * 100:.1f}% of the floor's {floor['bytes'] / 1e6:.2f} MB "
                f"({ours['requests']} requests, {ours['compactions']} compaction(s))",
                "<= 15% of the floor's", _ratio(s["ratio"], 0.15)),
            Row("long session: requests extending the previous one unchanged",
                f"{share * 100:.1f}%: {ours['extends']} of {ours['requests'] - 1}; not extending: "
                f"{ours['after_compaction']} right after a compaction, {ours['after_squeeze']} right after a squeeze, "
                f"{ours['broken']} other", ">= 95%", _ratio(0.95, share) if share else float("inf"),
                note="a request right after a compaction or a squeeze counts as not extending; \"other\" would be a "
                     "prompt-cache break with no reason"),
            Row("long session: cached-token share (byte-identical prefix of the previous request)",
                f"{ours['cached_share'] * 100:.1f}% of all request bytes (the floor: {floor['cached_share'] * 100:.1f}%)",
                "(reported)", None,
                note="what a provider prompt cache holding the previous request could serve; compaction requests "
                     "count in the total; the request seen as the tools then the messages, compact JSON")]


def checkpoint_rows(c: dict[str, Any]) -> list[Row]:
    extra = c["checkpoints"] - c["plain"]
    return [Row(f"checkpoint cost per edit ({c['edits']} edit_file calls, each a new file)",
                f"{extra * 1000:+.2f} ms ({ms(c['checkpoints'])} per edit with checkpoints, {ms(c['plain'])} without)",
                "<= 2 ms over an edit without", _ratio(c["checkpoints"], c["plain"] + 0.002),
                note=f"in-process run_task on a DiskWorkspace, runs interleaved, median of {c['samples']} edits each; "
                     f"CPU per edit {ms(c['cpu_checkpoints'])} vs {ms(c['cpu_plain'])}; the run's close (the checkpoint's "
                     f"final save and prune) {ms(c['close_checkpoints'])} vs {ms(c['close_plain'])}")]


def snapshot_rows(c: dict[str, Any]) -> list[Row]:
    if c.get("skipped"):
        return [Row("change detection around a command (git repo)", f"skipped: {c['skipped']}", "<= 1.5 x git status", None)]
    files = f"{c['files']:,}"
    return [Row(f"change detection, snapshot before a command ({files}-file git repo)",
                f"{ms(c['before'])} (git status {ms(c['status'])}; cold first snapshot {ms(c['cold'])})",
                "<= 1.5 x git status", _ratio(c["before"], 1.5 * c["status"]),
                note=f"Snapshotter.take() with a warm state dir; the cold one copies the repository's "
                     f"{c['index_bytes'] / 1e6:.1f} MB index first (once per workspace and state dir); repo made in {c['made']:.1f} s"),
            Row(f"change detection, snapshot + diff after a command ({files}-file git repo)",
                f"{ms(c['after'])} (git status {ms(c['status'])}; {c['changes']} changes found)",
                "<= 1.5 x git status", _ratio(c["after"], 1.5 * c["status"]),
                note="Snapshotter.changes(before): a snapshot, diff-tree, and the old content of each changed file kept")]


def rewind_rows(r: dict[str, Any]) -> list[Row]:
    return [Row(f"rewind of a run that touched {r['files']} files: command -> applyEdit",
                f"{ms(r['to_edit'])} (slowest {ms(r['max_to_edit'])}; command answered after {ms(r['to_answer'])}; "
                f"{r['restored']} files restored)", "< 300 ms", _ratio(r["to_edit"], 0.300))]


def merge_rows(m: dict[str, Any]) -> list[Row]:
    return [Row(f"co-editing merge of a {m['lines']:,}-line file, {m['hunks']} user + {m['hunks']} agent hunks",
                f"{ms(m['merge'])} ({ms(m['merge_cpu'])} CPU; merge3's default difflib matcher {ms(m['plain'])})",
                "<= 20 ms", _ratio(m["merge"], 0.020),
                note=f"agent_lsp.agent.fs.merge.resolve, median of {m['runs']} runs (issue 35, Decision 82)")]


def search_rows(s: dict[str, Any]) -> list[Row]:
    f = s["figures"]
    files = f"{s['files']:,}"
    rows = []
    for name, label in (("search_rare", "rare pattern, full scan"), ("search_common", "common pattern, capped")):
        m = f[name]
        rows.append(Row(f"search on {files} files, {label}: our tool",
                        f"{ms(m['ours'] / 1000)} (bare rg --json {ms(m['bare'] / 1000)}; old walk + re {ms(m['old'] / 1000)})",
                        "<= 1.5 x bare rg", _ratio(m["ours"], 1.5 * m["bare"]),
                        note=f"{m['shown']} lines shown; bare rg printed {m['printed']} matches; the old path "
                             f"(searched at most 20,000 files) found {m['old_hits']}"))
    m = f["list_files"]
    rows.append(Row(f"list_files on {files} files: our tool",
                    f"{ms(m['ours'] / 1000)} (bare rg --files {ms(m['bare'] / 1000)}; old walk, stopped at 501: {ms(m['old'] / 1000)})",
                    "<= 1.5 x bare rg --files", _ratio(m["ours"], 1.5 * m["bare"]),
                    note=f"tree of {files} files (+{s['ignored']} ignored) made in {s['made']:.0f} s; {s['rg']}; "
                         f"medians of {s['runs']} interleaved runs (the old Python path: {s['old_runs']})"))
    return rows


def diagnostics_rows(d: dict[str, Any]) -> list[Row]:
    extra = d["with"] - d["without"]
    return [Row("diagnostics after an edit (the client answers at once)",
                f"{extra * 1000:+.2f} ms ({ms(d['with'])} per edit with `agentLsp/diagnostics`, {ms(d['without'])} without)",
                "<= 5 ms over the edit alone", _ratio(d["with"], d["without"] + 0.005),
                note=f"through LSP, two servers side by side, runs interleaved, median of {d['samples']} edits each; "
                     f"server CPU per edit {ms(d['cpu_with'])} vs {ms(d['cpu_without'])}")]


def resume_rows(r: dict[str, Any]) -> list[Row]:
    return [Row(f"resume a {r['turns']}-turn session in a fresh server: run -> first model request",
                f"{ms(r['resume'])} (a new session as a fresh server's first run: {ms(r['new'])}; the resume in a "
                f"server warmed by one run: {ms(r['warm_resume'])})", "<= 200 ms", _ratio(r["resume"], 0.200),
                note=f"the session: {r['entries']} history entries, {r['transcript_bytes'] / 1e6:.2f} MB of transcript, "
                     f"{r['compactions']} squeeze/compaction event(s) while it was made; the fresh server had settled "
                     "(background imports done) before the command")]


def mcp_rows(m: dict[str, Any]) -> list[Row]:
    if m.get("skipped"):
        return [Row("MCP tool call through the agent vs the mcp SDK", f"skipped: {m['skipped']}", "<= 5 ms more", None)]
    extra = m["ours"] - m["direct"]
    return [Row(f"MCP tool call through the agent vs the mcp SDK ({m['server']} {m['tool']})",
                f"{extra * 1000:+.2f} ms ({ms(m['ours'])} vs {ms(m['direct'])} per call)", "<= 5 ms more",
                _ratio(m["ours"], m["direct"] + 0.005),
                note=f"McpTool.prepare + execute via McpManager against ClientSession.call_tool on its own connection to "
                     f"a second copy of the server, calls alternating, median of {m['calls']} each (benchmarks/mcp_call.py)")]


def sandbox_rows(s: dict[str, Any]) -> list[Row]:
    if s.get("skipped"):
        return [Row("sandbox start-up per command (bwrap)", f"skipped: {s['skipped']}", "<= unconfined + 30 ms", None)]
    extra = s["sandbox"] - s["off"]
    return [Row("sandbox start-up per command (bwrap, workspace-write, `true`)",
                f"{extra * 1000:+.2f} ms ({ms(s['sandbox'])} sandboxed, {ms(s['off'])} unconfined under the reaper; "
                f"bare exec {ms(s['bare'])})", "<= unconfined + 30 ms", _ratio(s["sandbox"], s["off"] + 0.030),
                note=f"CommandRunner.run, median of {s['commands']} commands each, interleaved command by command; the "
                     f"process's first sandboxed command (with the one-time bwrap probe) took {ms(s['first'])}")]


def telemetry_rows(t: dict[str, Any]) -> list[Row]:
    extra = t["on"] - t["off"]
    return [Row(f"telemetry on: overhead per turn, K={t['k']} with 50 KB results",
                f"{extra * 1000:+.2f} ms ({ms(t['on'])} on, {ms(t['off'])} off)", "<= off + 2 ms",
                _ratio(t["on"], t["off"] + 0.002),
                note=f"headless run_task, OTLP/HTTP to a receiver in its own process, runs interleaved, median of "
                     f"{t['samples']} each; CPU per turn {ms(t['cpu_on'])} on, {ms(t['cpu_off'])} off")]


# -- the run -----------------------------------------------------------------------------
async def measure(cfg: Config, only: set[str], log: Any) -> tuple[list[Row], dict[str, Any]]:
    """Every selected figure; one that fails becomes a failed row and the others still run."""
    env = bench_env(cfg.work)
    os.environ.update({k: env[k] for k in ("AGENT_LSP_STATE_DIR", "OPENAI_API_KEY")})
    for name in [k for k in os.environ if k.startswith("AGENT_LSP_") and k != "AGENT_LSP_STATE_DIR"] + ["OPENAI_BASE_URL"]:
        os.environ.pop(name, None)
    rows: list[Row] = []
    raw: dict[str, Any] = {}

    async def figure(name: str, measure_it: Any, to_rows: Any) -> None:
        if name not in only:
            return
        t0, c0 = time.monotonic(), time.process_time()
        log(f"-- {name} ...")
        try:
            raw[name] = await measure_it()
            rows.extend(to_rows(raw[name]))
        except Exception as exc:  # reported in the table; the exit code says so
            log(f"   {name} failed: {type(exc).__name__}: {exc}")
            rows.append(Row(f"{name}: FAILED", f"{type(exc).__name__}: {exc}", "runs", ok=False, data={"failed": True}))
        log(f"   {name}: {time.monotonic() - t0:.1f} s ({time.process_time() - c0:.1f} s CPU in this process)")

    async def blocking(fn: Any, *args: Any) -> Any:  # nothing else runs meanwhile
        return fn(*args)

    with ModelProcess() as model:
        await figure("turns", lambda: turns.headless(cfg, model), lambda r: turn_rows(r, cfg))
        await figure("startup", lambda: blocking(startup.measure, cfg, env), startup_rows)
        # Issue 33: `agent-lsp run` to its first model request against a bare openai-SDK loop
        await figure("first_request", lambda: blocking(first_request.measure, cfg, env), first_request_rows)
        if "lsp" in only or "streaming" in only:
            root = cfg.work / "ws-turns"
            init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}, "maxTurns": 200}
            turns.make_files(root, max(cfg.turn_counts), turns.RESULT_CHARS)
            async with LspSession(root, env, init) as lsp:
                await figure("lsp", lambda: turns.through_lsp(cfg, model, lsp), lambda r: lsp_rows(r, cfg))
                await figure("streaming", lambda: streaming.measure(cfg, model, lsp), streaming_rows)
        await figure("delegation", lambda: delegation.measure(cfg, model), delegation_rows)
        await figure("concurrency", lambda: concurrency.measure(cfg, model, env), concurrency_rows)
        await figure("session", lambda: session.measure(cfg, model), session_rows)
        # Issue 12: checkpoints, change detection, rewind
        await figure("checkpoints", lambda: checkpoints.checkpoint_cost(cfg, model), checkpoint_rows)
        await figure("snapshots", lambda: snapshot_figures(cfg), snapshot_rows)
        await figure("rewind", lambda: rewind.measure(cfg, model, env), rewind_rows)
        # Issue 13: search and list_files on ripgrep; editor diagnostics after an edit
        await figure("search", lambda: asyncio.to_thread(search_figures, cfg), search_rows)  # its own event loop
        await figure("diagnostics", lambda: diagnostics.measure(cfg, model, env), diagnostics_rows)
        # Issue 14: resuming a long session (usage events and token economy: see turns, lsp, session)
        await figure("resume", lambda: resume.measure(cfg, model, env), resume_rows)
        # Issue 25: OpenTelemetry on against off, per turn
        await figure("telemetry", lambda: telemetry.measure(cfg, model), telemetry_rows)
        # ---- Issue 16 (ACP front end): the figures of benchmarks/acp.py (written apart) join here ----
        await figure("acp", lambda: acp_figures(cfg, model, env), lambda r: acp_rows(r, cfg))
    # Issue 15: an MCP tool call (the MCP start-up figure is in `startup`); issue 17: the sandbox
    await figure("mcp", lambda: mcp_figures(cfg), mcp_rows)
    await figure("sandbox", lambda: sandbox_figures(cfg), sandbox_rows)
    # Issue 35: the three-way merge of an edit with the user's changes made meanwhile
    await figure("merge", lambda: blocking(merge.measure, 3 if cfg.quick else 20), merge_rows)
    return [verdict(r, cfg.quick) for r in rows], raw


# ---- Issue 16 (ACP front end): benchmarks/acp.py is written apart; run.py only calls its entry
# points `per_turn(cfg, model, env)` and `startup(cfg, env)` and turns their results into rows.
async def acp_figures(cfg: Config, model: ModelProcess, env: dict[str, str]) -> dict[str, Any]:
    try:
        from benchmarks import acp
    except Exception as exc:  # being written: say so instead of failing the whole run
        return {"skipped": f"benchmarks/acp.py cannot be imported ({type(exc).__name__}: {exc})"}
    if not (callable(getattr(acp, "per_turn", None)) and callable(getattr(acp, "startup", None))):
        return {"skipped": "benchmarks/acp.py has no per_turn/startup entry points yet"}
    # ACP has no initializationOptions: the settings come from the user's settings file
    settings = cfg.work / "acp-settings.json"
    settings.write_text(json.dumps({"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"},
                                    "maxTurns": 200, "transcriptDir": str(cfg.work / "transcripts")}))
    acp_env = {**env, "AGENT_LSP_SETTINGS": str(settings)}
    per_turn = await acp.per_turn(cfg, model, acp_env)
    start = acp.startup(cfg, acp_env)  # blocking, as `startup`: nothing else runs meanwhile
    return {"turns": per_turn, "startup": start}


def acp_rows(a: dict[str, Any], cfg: Config) -> list[Row]:
    if a.get("skipped"):
        return [Row("ACP front end (issue 16)", f"skipped: {a['skipped']}", "see benchmarks/acp.py", None)]
    rows = []
    for k in cfg.turn_counts:
        m, c = a["turns"][f"k{k}"], a["turns"][f"k{k}_cpu"]
        rows.append(Row(f"overhead/turn through ACP, K={k}", f"{ms(m['acp'])} (LSP, same runs interleaved: {ms(m['lsp'])})",
                        "<= LSP + 1 ms", _ratio(m["acp"], m["lsp"] + 0.001),
                        note=f"agent CPU/turn: ACP {ms(c['acp'])}, LSP {ms(c['lsp'])}; with reads through the client's "
                             f"fs/read_text_file (a round trip per read, no target): {ms(m['acp_fs'])} (CPU {ms(c['acp_fs'])})"))
    st = a["startup"]
    rows.append(Row("spawn -> initialize answered, `agent-lsp acp`", f"{ms(st['acp'])} (`agent-lsp serve`: {ms(st['lsp'])})",
                    "<= 1.15 x LSP", _ratio(st["acp"], 1.15 * st["lsp"]),
                    note=f"settled RSS: ACP {st['rss_acp'] / MIB:.1f} MiB, LSP {st['rss_lsp'] / MIB:.1f} MiB"))
    return rows


async def snapshot_figures(cfg: Config) -> dict[str, Any]:
    if shutil.which("git") is None:
        return {"skipped": "git is not on the PATH"}
    return await checkpoints.change_detection(cfg)


def search_figures(cfg: Config) -> dict[str, Any]:
    from benchmarks import search

    files = 2_000 if cfg.quick else 100_000
    return search.measure(files, cfg.runs, old_runs=cfg.runs if cfg.quick else 2)


async def mcp_figures(cfg: Config) -> dict[str, Any]:
    """benchmarks/mcp_call.py on server-everything's echo (or mcp-server-time); skipped, saying
    so, when tests/mcp/setup.sh has not installed them."""
    from benchmarks import mcp_call

    server = next((name for name in ("everything", "time") if os.access(mcp_call.SERVERS[name][0], os.X_OK)), None)
    if server is None:
        return {"skipped": f"the MCP test servers are not installed (run `bash tests/mcp/setup.sh`; looked in {mcp_call.CACHE})"}
    calls, warmup = (20, 5) if cfg.quick else (200, 20)
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 - the direct connection's server stderr
        ours, direct = await mcp_call.measure(server, calls, warmup, devnull)
    return {"server": server, "tool": mcp_call.SERVERS[server][2], "calls": calls,
            "ours": median(ours) / 1000, "direct": median(direct) / 1000}


async def sandbox_figures(cfg: Config) -> dict[str, Any]:
    if problem := await sandbox.bwrap_problem():
        return {"skipped": problem}
    return await sandbox.measure(cfg)


def machine() -> dict[str, str]:
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    commit = "?"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                timeout=5).stdout.strip() or "?"
        if subprocess.run(["git", "status", "--porcelain", "--", "agent_lsp"], cwd=REPO, capture_output=True,
                          text=True, timeout=5).stdout.strip():
            commit += " + uncommitted changes in agent_lsp/"
    except (OSError, subprocess.SubprocessError):
        pass
    versions = {}
    for dist in ("openai", "pygls", "openai-agents"):
        try:
            from importlib.metadata import version

            versions[dist] = version(dist)
        except Exception:
            versions[dist] = "not installed"
    return {"cpus": str(os.cpu_count()), "memory": mem, "python": platform.python_version(),
            "platform": platform.platform(), "commit": commit,
            "versions": ", ".join(f"{k} {v}" for k, v in versions.items())}


def table(rows: list[Row]) -> str:
    out = ["| figure | measured | target | ratio | verdict |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        mark = {True: "met", False: "**missed**", None: "-"}[r.ok]
        out.append(f"| {r.figure} | {r.measured} | {r.target} | {ratio} | {mark} |")
    return "\n".join(out)


def notes(rows: list[Row]) -> str:
    return "\n".join(f"- {r.figure}: {r.note}" for r in rows if r.note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run of each, no verdicts (CI smoke test)")
    parser.add_argument("--runs", type=int, help="repetitions per figure (full mode: at least 5)")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(FIGURES)}")
    parser.add_argument("--json", type=Path, help="also write the raw measurements here")
    parser.add_argument("--results", type=Path, default=Path(__file__).with_name("RESULTS.md"),
                        help="where the full mode writes its table (default: benchmarks/RESULTS.md)")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)
    only = set(FIGURES) if not args.only else {f.strip() for f in args.only.split(",")}
    if unknown := only - set(FIGURES):
        parser.error(f"unknown figure(s): {', '.join(sorted(unknown))}")
    cfg = Config.make(args.quick, args.runs)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    load_before = os.getloadavg()
    started = time.monotonic()
    try:
        rows, raw = asyncio.run(measure(cfg, only, log))
    finally:
        shutil.rmtree(cfg.work, ignore_errors=True)
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()
    info = machine()
    command = "python benchmarks/run.py" + (" --quick" if args.quick else "") + \
              (f" --runs {args.runs}" if args.runs else "") + (f" --only {args.only}" if args.only else "")
    print(table(rows))
    if n := notes(rows):
        print("\n" + n)
    missed = [r.figure for r in rows if r.ok is False]
    print(f"\n{len(rows)} figures in {elapsed:.0f} s; load average {load_before[0]:.1f} -> {load_after[0]:.1f}"
          + ("" if cfg.quick else f"; missed: {len(missed)}"))
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "raw": raw, "rows": [r.__dict__ for r in rows]},
                                        default=str, indent=1))
    if not cfg.quick and not args.no_write:
        write_results(args.results, rows, info, command, elapsed, load_before, load_after, cfg)
    return 1 if any(r.data.get("failed") for r in rows) else 0


def write_results(path: Path, rows: list[Row], info: dict[str, str], command: str, elapsed: float,
                  load_before: tuple[float, ...], load_after: tuple[float, ...], cfg: Config) -> None:
    today = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines = [
        "# Benchmark results (issues 5, 12-17)", "",
        f"- command: `{command}` ({elapsed:.0f} s)",
        f"- date: {today}; commit {info['commit']}",
        f"- machine: {info['cpus']} CPUs, {info['memory']} memory, Python {info['python']}, {info['platform']}",
        f"- versions: {info['versions']}",
        f"- load average (1 min) before / after: {load_before[0]:.1f} / {load_after[0]:.1f} "
        "(other work shared the machine; wall-clock figures carry that noise)",
        f"- medians of {cfg.runs} runs after {cfg.warmup} warm-up run(s); fixed TTFT {cfg.ttft * 1000:.0f} ms "
        f"({cfg.concurrent_ttft * 1000:.0f} ms for the concurrent runs)",
        "- ratio = measured / allowed: 1.00 or less meets the target", "",
        table(rows), "",
    ]
    if n := notes(rows):
        lines += ["Notes:", n, ""]
    # The hand-written analysis (causes of misses, profiles) is kept across regenerations.
    old = path.read_text() if path.exists() else ""
    if ANALYSIS in old:
        lines += [ANALYSIS + old.split(ANALYSIS, 1)[1].rstrip("\n"), ""]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
