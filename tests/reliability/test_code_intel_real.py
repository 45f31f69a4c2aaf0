"""Code intelligence with a real language server (basedpyright, from PyPI) behind the
CodeIntelSource port, through the host and the scripted model, on a generated project with
distractors (a same-named method on another class, the name in strings and comments):
find_references lists exactly the true uses, rename_symbol changes exactly those (one approval,
one apply), and a rewind restores every file."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from tests.unit.codeintel_kit import LanguageServerSource, make_project
from tests.unit.kit import (
    Events,
    ScriptedApprover,
    call,
    last_tool_results,
    make_settings,
    tools_reply,
)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        shutil.which("basedpyright-langserver", path=str(Path(sys.executable).parent)) is None
        and shutil.which("basedpyright-langserver") is None,
        reason="basedpyright is not installed (pip install basedpyright)",
    ),
]


async def test_references_and_rename_are_exact_where_search_is_not(model, tmp_path: Path):
    root = (tmp_path / "proj").resolve()
    truth = make_project(root, files=40, every=10)
    source = await LanguageServerSource(root).start()
    await source.warm(root / "pkg/models.py", 4, 8)
    host = AgentHost(code_intel=lambda roots: [source])
    approver = ScriptedApprover()
    try:
        session, store = await host.open_session([root], None)
        model.add("CALLERS", [
            tools_reply(call("find_references", id="refs", path="pkg/models.py", line=5, symbol="total"),
                        call("search", id="grep", pattern="total")),
            tools_reply(call("rename_symbol", id="ren", path="pkg/models.py", line=5, symbol="total",
                             newName="grand_total")),
            {"text": "renamed"},
        ])
        hosted = host.start(RunRequest("CALLERS of Invoice.total: rename it", session=session, store=store,
                            settings=make_settings(model), ports=RunPorts(DiskWorkspace([root]), approver, Events())))
        await asyncio.wait_for(hosted.task, 150)
        assert hosted.report is not None and hosted.report.stop_reason == "done", hosted.report
        results = last_tool_results(model.requests_for("CALLERS")[1])
        found = [line.split(": ", 1)[0] for line in results["refs"].splitlines()[1:] if line]
        expected = [f"{rel}:{line}:{len('    return invoice.') + 1}" for rel, line in truth["references"]]
        assert found == expected, results["refs"]
        assert results["refs"].splitlines()[0] == f"{len(expected)} references in {len(expected)} files"
        assert results["grep"].count("total") > 3 * len(expected), "a text search also finds the distractors"

        assert len(approver.requests) == 1 and len(approver.requests[0].files or []) == len(expected) + 1
        for rel in truth["callers"]:
            text = (root / rel).read_text()
            assert "invoice.grand_total()" in text and "receipt.total()" in text and "the total is" in text
        models = (root / "pkg/models.py").read_text()
        assert models.count("def grand_total") == 1 and models.count("def total") == 1, "Receipt.total stays"
        untouched = sorted(p for p in (root / "pkg").glob("mod_*.py") if f"pkg/{p.name}" not in truth["callers"])
        assert all("grand_total" not in p.read_text() for p in untouched)

        result = await host.rewind([root], DiskWorkspace([root]), hosted.id)
        assert len(result.restored) == len(expected) + 1
        assert "grand_total" not in (root / "pkg/models.py").read_text()
    finally:
        await host.aclose()
        await source.stop()


async def test_an_emoji_line_and_a_library_outside_the_workspace(model, tmp_path: Path):
    root = (tmp_path / "proj").resolve()
    root.mkdir()
    (root / "a.py").write_text('import os\n\n\ndef here() -> str:\n    return "🎉 here"\n\n\nx = "🎉"; y = here(); z = os.getcwd()\n')
    source = await LanguageServerSource(root).start()
    await source.warm(root / "a.py", 3, 4)
    host = AgentHost(code_intel=lambda roots: [source])
    try:
        session, store = await host.open_session([root], None)
        model.add("LIB", [
            tools_reply(call("find_definition", id="def", path="a.py", line=8, symbol="here"),
                        call("find_definition", id="lib", path="a.py", line=8, symbol="getcwd"),
                        call("hover", id="hov", path="a.py", line=8, symbol="here")),
            {"text": "seen"},
        ])
        hosted = host.start(RunRequest("LIB: where is getcwd", session=session, store=store, settings=make_settings(model),
                            ports=RunPorts(DiskWorkspace([root]), ScriptedApprover(), Events())))
        await asyncio.wait_for(hosted.task, 120)
        results = last_tool_results(model.requests_for("LIB")[1])
        assert results["def"] == "a.py:4:5: def here() -> str:"
        assert "def here() -> str" in results["hov"]
        where = results["lib"].split(":", 1)[0]
        assert Path(where).is_absolute() and not Path(where).is_relative_to(root), results["lib"]
        assert "getcwd" in results["lib"]
        assert Path(where).resolve() in session.spill_files, "readable by read_file for the session"
    finally:
        await host.aclose()
        await source.stop()
