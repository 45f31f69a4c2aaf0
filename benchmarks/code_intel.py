"""Code intelligence (issue 23): "find every caller of Invoice.total and change them" on a generated
project with distractors (Receipt.total beside it, `total` in strings and comments, files that make
an Invoice without asking its total), done twice through the real agent loop against the scripted
model: once with find_references + rename_symbol (a real language server behind the
CodeIntelSource port), once scripted with search + read_file + edit_file. Reported: the bytes sent
to the model (every request body, and the tool results alone) of the first as a share of the
second (target <= 25%), the true references found by find_references (target 100%, 0 false), the
language server's cold start (its first complete answer) and the tool's cost over the server's
own answer.

    python benchmarks/code_intel.py [--files 2000] [--every 20] [--json FILE]

The language server is basedpyright (the test extra) started by agent-lsp itself
(`agent_lsp.langservers`, configured as `languageServers` would configure it)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace  # noqa: E402
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest  # noqa: E402
from agent_lsp.testing.scripted_model import ScriptedModelServer  # noqa: E402
from tests.unit.codeintel_kit import make_project  # noqa: E402
from tests.unit.kit import Events, ScriptedApprover, make_settings  # noqa: E402

MODELS_LINE = 5  # `    def total(self) -> int:` of Invoice in pkg/models.py
CHUNK = 100  # files per scripted search (the search tool shows at most 200 matches)


def body_bytes(body: dict[str, Any]) -> int:
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())


def tool_result_bytes(bodies: list[dict[str, Any]]) -> int:
    """The tool results the model received (each counted once: the last request holds them all)."""
    last = bodies[-1]["messages"] if bodies else []
    return sum(len(str(m.get("content", "")).encode()) for m in last if m.get("role") == "tool")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def started_servers(root: Path) -> Any:
    """basedpyright as agent-lsp starts it for `languageServers: {servers: {bp: …}}`."""
    import shutil

    from agent_lsp.langservers.manager import LanguageServers
    from agent_lsp.settings_schema import LanguageServersSettings

    exe = shutil.which("basedpyright-langserver", path=str(Path(sys.executable).parent))
    if exe is None:
        raise SystemExit("basedpyright is not installed (pip install basedpyright)")
    settings = {
        "auto": False,
        "servers": {"bp": {"command": [exe, "--stdio"], "extensions": [".py"]}},
    }
    return LanguageServers(LanguageServersSettings.model_validate(settings), [root])


async def first_answer(source: Any, root: Path, expected: int) -> tuple[float, float]:
    """(seconds from the first request, which starts the server, to its first complete
    references answer; seconds of one warm answer): a cold server answers from its open files
    only until it has read the project."""
    models = root / "pkg/models.py"
    params = {
        "textDocument": {"uri": models.as_uri()},
        "position": {"line": MODELS_LINE - 1, "character": 8},
        "context": {"includeDeclaration": False},
    }
    await source.sync(models, models.read_text())
    started = time.perf_counter()
    while len(await source.request("textDocument/references", params, models) or []) < expected:
        if time.perf_counter() - started > 300:
            raise RuntimeError("the language server found not every reference within 300 s")
        await asyncio.sleep(0.5)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    await source.request("textDocument/references", params, models)
    return cold, time.perf_counter() - started


async def tool_overhead(source: Any, root: Path, runs: int = 9) -> tuple[float, float]:
    """(median seconds of the server's own references answer, of the find_references tool on the
    same question: sync, position, the answer's files read and formatted)."""
    from agent_lsp.agent.tools.base import ToolContext
    from agent_lsp.agent.tools.codeintel.navigate import FindReferences
    from agent_lsp.agent.tools.codeintel.sources import CodeIntel
    from agent_lsp.agent.tools.paths import PathGuard

    ctx = ToolContext(workspace=DiskWorkspace([root]), paths=PathGuard([root]))
    ctx.code_intel = CodeIntel([source])
    tool = FindReferences()
    args = tool.parse({"path": "pkg/models.py", "line": MODELS_LINE, "symbol": "total"})
    models = root / "pkg/models.py"
    params = {
        "textDocument": {"uri": models.as_uri()},
        "position": {"line": MODELS_LINE - 1, "character": 8},
        "context": {"includeDeclaration": False},
    }
    raw, ours = [], []
    for _ in range(runs):
        started = time.perf_counter()
        await source.request("textDocument/references", params, models)
        raw.append(time.perf_counter() - started)
        started = time.perf_counter()
        await (await tool.prepare(args, ctx)).execute()
        ours.append(time.perf_counter() - started)
    return sorted(raw)[runs // 2], sorted(ours)[runs // 2]


async def run_script(
    model: ScriptedModelServer, root: Path, key: str, replies: list[dict[str, Any]], source: Any
) -> tuple[list[dict[str, Any]], float]:
    model.add(key, replies)
    host = AgentHost(code_intel=(lambda roots: [source]) if source is not None else None)
    try:
        session, store = await host.open_session([root], None)
        settings = make_settings(model, maxTurns=50, toolOutputLimit=1_000_000)
        started = time.perf_counter()
        hosted = host.start(
            RunRequest(
                f"{key}: find every caller of Invoice.total and rename it to grand_total",
                session,
                store,
                settings,
                RunPorts(DiskWorkspace([root]), ScriptedApprover(), Events()),
            )
        )
        await asyncio.wait_for(hosted.wait(), 900)
        elapsed = time.perf_counter() - started
        assert hosted.report is not None and hosted.report.stop_reason == "done", hosted.report
    finally:
        await host.aclose()
    return model.requests_for(key), elapsed


def search_script(root: Path, files: int, truth: dict[str, Any]) -> list[dict[str, Any]]:
    """search for Invoice chunk by chunk, read every file that names it, edit each true call."""
    searches = [
        call("search", pattern=r"\bInvoice\b", path="pkg", glob=f"mod_{start // CHUNK:02d}*.py")
        for start in range(0, files, CHUNK)
    ]
    naming = sorted(
        f"pkg/{p.name}" for p in (root / "pkg").glob("mod_*.py") if "Invoice" in p.read_text()
    )
    reads = [call("read_file", path="pkg/models.py"), *(call("read_file", path=r) for r in naming)]
    edits = [
        call(
            "edit_file",
            path="pkg/models.py",
            old_text="class Invoice:\n    def total(self)",
            new_text="class Invoice:\n    def grand_total(self)",
        )
    ]
    for rel in truth["callers"]:
        i = int(rel.removeprefix("pkg/mod_").removesuffix(".py"))
        edits.append(
            call(
                "edit_file",
                path=rel,
                old_text=f"invoice.total() + {i}",
                new_text=f"invoice.grand_total() + {i}",
            )
        )
    return [
        {"text": "", "tool_calls": searches},
        {"text": "", "tool_calls": reads},
        {"text": "", "tool_calls": edits},
        {"text": "renamed"},
    ]


def code_intel_script() -> list[dict[str, Any]]:
    where = {"path": "pkg/models.py", "line": MODELS_LINE, "symbol": "total"}
    return [
        {"text": "", "tool_calls": [call("find_references", **where)]},
        {"text": "", "tool_calls": [call("rename_symbol", **where, newName="grand_total")]},
        {"text": "renamed"},
    ]


def check_references(text: str, truth: dict[str, Any]) -> tuple[int, int, int]:
    """(true found, false found, true in all) from find_references' result."""
    found = {tuple(line.split(":")[:2]) for line in text.splitlines()[1:] if line and ":" in line}
    expected = {(rel, str(line)) for rel, line in truth["references"]}
    return len(found & expected), len(found - expected), len(expected)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict[str, Any] = {"files": args.files}
    with tempfile.TemporaryDirectory(prefix="agent-lsp-ci-bench-") as tmp:
        base = Path(tmp).resolve()
        intel_root, search_root = base / "intel", base / "search"
        truth = make_project(intel_root, args.files, args.every)
        make_project(search_root, args.files, args.every)
        servers = started_servers(intel_root)
        source = servers.sources()[0]
        try:
            cold, warm = await first_answer(source, intel_root, len(truth["references"]))
            raw_s, tool_s = await tool_overhead(source, intel_root)
            with ScriptedModelServer() as model:
                intel, intel_s = await run_script(
                    model, intel_root, "INTEL", code_intel_script(), source
                )
                search, search_s = await run_script(
                    model,
                    search_root,
                    "SEARCH",
                    search_script(search_root, args.files, truth),
                    None,
                )
            refs = next(m["content"] for m in intel[1]["messages"] if m.get("role") == "tool")
            true_found, false_found, expected = check_references(refs, truth)
            renamed = sum(
                "invoice.grand_total()" in (intel_root / r).read_text() for r in truth["callers"]
            )
            stray = sum(
                "grand_total" in p.read_text()
                for p in (intel_root / "pkg").glob("mod_*.py")
                if f"pkg/{p.name}" not in truth["callers"]
            )
        finally:
            await servers.aclose()
    out.update(
        intel_request_bytes=sum(map(body_bytes, intel)),
        search_request_bytes=sum(map(body_bytes, search)),
        intel_result_bytes=tool_result_bytes(intel),
        search_result_bytes=tool_result_bytes(search),
        intel_requests=len(intel),
        search_requests=len(search),
        true_references=expected,
        true_found=true_found,
        false_found=false_found,
        renamed=renamed,
        stray_renames=stray,
        cold_start_s=round(cold, 3),
        server_references_s=round(raw_s, 4),
        tool_references_s=round(tool_s, 4),
        warm_references_s=round(warm, 3),
        intel_run_s=round(intel_s, 3),
        search_run_s=round(search_s, 3),
    )
    share = out["intel_request_bytes"] / out["search_request_bytes"]
    result_share = out["intel_result_bytes"] / max(1, out["search_result_bytes"])
    print(f"project: {args.files} files, {expected} true references of Invoice.total")
    print(
        f"bytes sent to the model: find_references path {out['intel_request_bytes']:,} B in "
        f"{len(intel)} requests vs search+read_file {out['search_request_bytes']:,} B in "
        f"{len(search)} requests = {share:.1%} (target <= 25%)"
    )
    print(
        f"tool results alone: {out['intel_result_bytes']:,} B vs {out['search_result_bytes']:,} B"
        f" = {result_share:.1%}"
    )
    print(
        f"find_references: {true_found}/{expected} true references, {false_found} false "
        f"(target 100%, 0); rename_symbol renamed {renamed}/{expected} callers, "
        f"{stray} distractor files touched"
    )
    print(
        f"language server (started by agent-lsp): first complete answer {cold:.2f} s after the first "
        f"request started it (cold start), a warm references answer {warm * 1000:.0f} ms; whole runs: "
        f"{intel_s:.2f} s (code intel) vs {search_s:.2f} s (search)"
    )
    print(
        f"find_references tool {tool_s * 1000:.0f} ms vs the server's own answer "
        f"{raw_s * 1000:.0f} ms: {(tool_s - raw_s) * 1000:+.0f} ms (medians of 9; the tool also "
        "reads the answer's files to show each line)"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    ok = share <= 0.25 and true_found == expected and not false_found and not stray
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
