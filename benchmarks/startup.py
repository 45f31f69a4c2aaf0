"""Start-up: spawn -> `initialize` answered, against a bare pygls server; RSS after initialize;
and the same with three MCP servers configured (issue 15: they start lazily, at the first run
that needs tools, so `initialize` must not wait for them)."""

from __future__ import annotations

from typing import Any

from benchmarks.common import Config, median
from benchmarks.lsp_client import (
    BARE_ARGV,
    INITIALIZE,
    SERVER_ARGV,
    spawn_initialize,
    with_init_options,
)


def mcp_servers() -> tuple[dict[str, Any], bool]:
    """Three stdio MCP servers in the `mcpServers` shape users know: the test servers of
    tests/mcp/setup.sh when installed (else the same declarations with bare command names:
    nothing starts them at `initialize` either way). Returns (servers, installed)."""
    from benchmarks.mcp_call import CACHE

    venv, npm = CACHE / "venv" / "bin", CACHE / "npm" / "node_modules" / ".bin"
    everything, time_server, git_server = npm / "mcp-server-everything", venv / "mcp-server-time", venv / "mcp-server-git"
    installed = all(p.exists() for p in (everything, time_server, git_server))
    return ({"everything": {"command": str(everything) if installed else "mcp-server-everything", "args": ["stdio"]},
             "time": {"command": str(time_server) if installed else "mcp-server-time"},
             "git": {"command": str(git_server) if installed else "mcp-server-git", "args": ["--repository", "."]}},
            installed)


def measure(cfg: Config, env: dict[str, str]) -> dict[str, Any]:
    cwd = cfg.work / "ws-startup"
    cwd.mkdir(parents=True, exist_ok=True)
    servers, installed = mcp_servers()
    with_mcp = with_init_options({**INITIALIZE["params"]["initializationOptions"], "mcpServers": servers})
    names = ("bare", "ours", "mcp")
    times: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[int]] = {n: [] for n in names}
    at_answer: dict[str, list[int]] = {n: [] for n in names}
    children: list[int] = []
    runs = cfg.runs if cfg.quick else cfg.runs + 2  # cheap: two more samples steady the median
    for rep in range(cfg.warmup + runs):
        for name, argv, init in (("bare", BARE_ARGV, None), ("ours", SERVER_ARGV, None),
                                 ("mcp", SERVER_ARGV, with_mcp)):  # interleaved
            started = spawn_initialize(argv, env, cwd, init)
            if rep >= cfg.warmup:
                times[name].append(started.seconds)
                rss[name].append(started.rss_settled)
                at_answer[name].append(started.rss_at_answer)
                if name == "mcp":
                    children.append(started.children)
    return {"ours": median(times["ours"]), "bare": median(times["bare"]), "mcp": median(times["mcp"]),
            "rss": median([float(r) for r in rss["ours"]]), "rss_bare": median([float(r) for r in rss["bare"]]),
            "rss_mcp": median([float(r) for r in rss["mcp"]]),
            "rss_at_answer": median([float(r) for r in at_answer["ours"]]),
            "mcp_children": max(children, default=0), "mcp_installed": installed,
            "samples": times}
