"""The ACP front end (`agent-lsp acp`) against the LSP one (`agent-lsp serve`), in the same run:

    python benchmarks/acp.py            # medians of >= 5 runs, verdicts
    python benchmarks/acp.py --quick    # one run each, small sizes, no verdicts

- overhead per turn: the K-turn script of `turns.py` (each turn reads a ~50 KB file) through
  `agentLsp.run` on `agent-lsp serve` (pygls client, `lsp_client.py`) and through
  `session/new` + `session/prompt` on `agent-lsp acp` (the official Python SDK's client), the
  runs interleaved (the order alternating run by run); target: ACP <= LSP + 1 ms. The notes give
  each server's CPU per turn, which background load moves less than wall time. A third row (no
  target) has the client offer `fs/read_text_file`, so every read is a round trip to it.
- start-up: spawn -> `initialize` answered, `agent-lsp acp` (raw newline-delimited JSON-RPC)
  against `agent-lsp serve` (raw LSP framing, `lsp_client.spawn_initialize`), interleaved;
  target: ACP <= 1.15 x LSP.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(HERE.parent))

from benchmarks.common import Config, bench_env, cpu_seconds, median, ms, rss_bytes, tag  # noqa: E402
from benchmarks.lsp_client import SERVER_ARGV, LspSession, settled_rss, spawn_initialize  # noqa: E402
from benchmarks.model_process import ModelProcess  # noqa: E402
from benchmarks.turns import RESULT_CHARS, make_files, overhead, tool_script  # noqa: E402

ACP_ARGV = [sys.executable, "-m", "agent_lsp", "acp"]
MIB = 1024 * 1024


def load_sdk() -> Any:
    """The ACP SDK (`import acp`), never this file: a script run from this folder (this one, or
    `benchmarks/run.py`) puts the folder on sys.path, where `acp` would find acp.py."""
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    try:
        from agent_lsp.acp import sdk

        return sdk.load()
    finally:
        sys.path[:] = saved


class BenchClient:
    """The client side of the Python SDK's ClientSideConnection: allows everything, reads the
    disk for `fs/read_text_file` (offered only in the fs variant), counts the updates."""

    def __init__(self) -> None:
        self.updates = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id))

    async def read_text_file(self, path: str, session_id: str, **kwargs: Any) -> Any:
        from acp.schema import ReadTextFileResponse

        return ReadTextFileResponse(content=await asyncio.to_thread(Path(path).read_text, encoding="utf-8"))

    async def write_text_file(self, content: str, path: str, session_id: str, **kwargs: Any) -> Any:
        await asyncio.to_thread(Path(path).write_text, content, encoding="utf-8")
        return None


class AcpAgentProcess:
    """`agent-lsp acp` as a subprocess, initialized (with or without the client's fs)."""

    def __init__(self, root: Path, env: dict[str, str], fs: bool):
        self.root, self.env, self.fs = root, env, fs
        self.client = BenchClient()
        self.conn: Any = None
        self.pid = 0
        self._spawn: Any = None

    async def __aenter__(self) -> AcpAgentProcess:
        acp = load_sdk()
        from acp.schema import ClientCapabilities, FileSystemCapabilities

        self._spawn = acp.spawn_agent_process(self.client, *ACP_ARGV, env=self.env, cwd=self.root,
                                              transport_kwargs={"stderr": subprocess.DEVNULL, "limit": 50 * MIB})
        self.conn, process = await self._spawn.__aenter__()
        self.pid = process.pid
        caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=self.fs, write_text_file=self.fs))
        await asyncio.wait_for(self.conn.initialize(protocol_version=1, client_capabilities=caps), 30)
        return self

    async def run(self, prompt: str) -> tuple[float, dict[str, Any]]:
        """(wall from session/new sent to the prompt's answer, the run report)."""
        from acp.schema import TextContentBlock

        t0 = time.monotonic()
        session = await self.conn.new_session(cwd=str(self.root), mcp_servers=[])
        response = await asyncio.wait_for(self.conn.prompt(session_id=session.session_id,
                                                           prompt=[TextContentBlock(type="text", text=prompt)]), 300)
        return time.monotonic() - t0, (response.field_meta or {}).get("agentLsp", {}).get("report", {})

    async def __aexit__(self, *exc: object) -> None:
        await self._spawn.__aexit__(None, None, None)


async def per_turn(cfg: Config, model: ModelProcess, env: dict[str, str]) -> dict[str, Any]:
    root = cfg.work / "ws-acp"
    files = make_files(root, max(cfg.turn_counts), RESULT_CHARS)
    init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}, "maxTurns": 200}
    out: dict[str, Any] = {}
    async with LspSession(root, env, init) as lsp, AcpAgentProcess(root, env, fs=False) as disk, \
            AcpAgentProcess(root, env, fs=True) as editor:
        for index, k in enumerate(cfg.turn_counts):
            samples: dict[str, list[float]] = {"lsp": [], "acp": [], "acp_fs": []}
            cpu: dict[str, list[float]] = {"lsp": [], "acp": [], "acp_fs": []}
            warmup = cfg.warmup if index == 0 else 0
            for rep in range(warmup + cfg.runs):
                order = ("lsp", "acp", "acp_fs") if rep % 2 == 0 else ("acp_fs", "acp", "lsp")
                for name in order:  # interleaved, alternating: background load hits all alike
                    key = tag(f"{name}-k{k}")
                    model.add(key, tool_script(files, k, cfg.ttft))
                    prompt = f"[{key}] Read the {k} parts one by one."
                    pid = lsp.pid if name == "lsp" else disk.pid if name == "acp" else editor.pid
                    c0 = cpu_seconds(pid)
                    if name == "lsp":
                        trace = await lsp.run(prompt)
                        wall, report = trace.t_stop - trace.t_sent, trace.report
                    else:
                        wall, report = await (disk if name == "acp" else editor).run(prompt)
                    c1 = cpu_seconds(pid)
                    served = model.log(key)
                    model.forget(key)
                    if report.get("stopReason") != "done" or len(served) != k + 1:
                        raise RuntimeError(f"{name} K={k}: {report.get('stopReason')}, {len(served)} model calls")
                    if rep >= warmup:
                        samples[name].append(overhead(wall, served))
                        cpu[name].append((c1 - c0) / len(served))
            out[f"k{k}"] = {name: median(v) for name, v in samples.items()}
            out[f"k{k}_cpu"] = {name: median(v) for name, v in cpu.items()}
            out[f"k{k}_samples"] = samples
    return out


def _ndjson_initialize(env: dict[str, str], cwd: Path) -> tuple[float, int, int]:
    """Spawn `agent-lsp acp`, time until its initialize answer is read; (seconds, RSS at the
    answer, settled RSS). stdin closed afterwards: the agent exits on its own."""
    t0 = time.monotonic()
    proc = subprocess.Popen(ACP_ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}}}}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise EOFError("the agent closed stdout before answering initialize")
            if json.loads(line).get("id") == 0:
                break
        seconds = time.monotonic() - t0
        at_answer = rss_bytes(proc.pid)
        settled = settled_rss(proc.pid)
        proc.stdin.close()
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return seconds, at_answer, settled


def startup(cfg: Config, env: dict[str, str]) -> dict[str, Any]:
    cwd = cfg.work / "ws-startup"
    cwd.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {"acp": [], "lsp": []}
    rss: dict[str, list[float]] = {"acp": [], "lsp": []}
    runs = cfg.runs if cfg.quick else cfg.runs + 4  # cheap: more samples steady the median
    for rep in range(cfg.warmup + runs):
        lsp = spawn_initialize(SERVER_ARGV, env, cwd)  # interleaved
        acp_seconds, _, acp_rss = _ndjson_initialize(env, cwd)
        if rep >= cfg.warmup:
            times["lsp"].append(lsp.seconds)
            times["acp"].append(acp_seconds)
            rss["lsp"].append(float(lsp.rss_settled))
            rss["acp"].append(float(acp_rss))
    return {"acp": median(times["acp"]), "lsp": median(times["lsp"]), "rss_acp": median(rss["acp"]),
            "rss_lsp": median(rss["lsp"]), "samples": times}


def table(turns: dict[str, Any] | None, start: dict[str, Any] | None, cfg: Config) -> str:
    def verdict(ratio: float) -> str:
        return "n/a (quick)" if cfg.quick else "met" if ratio <= 1.0 else "missed"

    rows = ["| figure | ACP | LSP | target | ratio | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for k in cfg.turn_counts if turns else ():
        m, c = turns[f"k{k}"], turns[f"k{k}_cpu"]
        ratio = m["acp"] / (m["lsp"] + 0.001)
        rows.append(f"| overhead/turn, K={k}, 50 KB reads (disk) | {ms(m['acp'])} (CPU {ms(c['acp'])}) | "
                    f"{ms(m['lsp'])} (CPU {ms(c['lsp'])}) | <= LSP + 1 ms | {ratio:.2f} | {verdict(ratio)} |")
        rows.append(f"| overhead/turn, K={k}, reads through the client's fs/read_text_file | {ms(m['acp_fs'])} "
                    f"(CPU {ms(c['acp_fs'])}) | {ms(m['lsp'])} | (none: a round trip per read) | | |")
    if start:
        ratio = start["acp"] / (1.15 * start["lsp"])
        rows.append(f"| spawn -> initialize answered | {ms(start['acp'])} | {ms(start['lsp'])} | <= 1.15 x LSP | "
                    f"{ratio:.2f} ({start['acp'] / start['lsp']:.2f} x LSP) | {verdict(ratio)} |")
        rows.append(f"| RSS after initialize (settled) | {start['rss_acp'] / MIB:.1f} MiB | {start['rss_lsp'] / MIB:.1f} MiB | "
                    "(none) | | |")
    return "\n".join(rows)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run each, small sizes, no verdicts")
    parser.add_argument("--runs", type=int, help="repetitions (full mode: at least 5)")
    parser.add_argument("--only", default="turns,startup", help="turns,startup (default both)")
    parser.add_argument("--json", type=Path, help="write the raw measurements here")
    args = parser.parse_args(argv)
    cfg = Config.make(args.quick, args.runs)
    env = bench_env(cfg.work)
    only = set(args.only.split(","))
    turns = start = None
    with ModelProcess() as model:
        settings = cfg.work / "acp-settings.json"  # ACP has no initializationOptions: the user's file
        settings.write_text(json.dumps({"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"},
                                        "maxTurns": 200, "transcriptDir": str(cfg.work / "transcripts")}))
        env["AGENT_LSP_SETTINGS"] = str(settings)
        if "turns" in only:
            print("-- overhead per turn (LSP, ACP, ACP with client fs, interleaved) ...", file=sys.stderr)
            turns = await per_turn(cfg, model, env)
    if "startup" in only:
        print("-- spawn -> initialize (LSP, ACP, interleaved) ...", file=sys.stderr)
        start = await asyncio.to_thread(startup, cfg, env)
    print(table(turns, start, cfg))
    if args.json:
        args.json.write_text(json.dumps({"turns": turns, "startup": start}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
