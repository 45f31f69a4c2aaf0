"""A just-started server is not asked a workspace-wide question (references, rename, symbols,
call hierarchy) before it has read the workspace (issue 23): it says so by `$/progress` or, the
pyright family, by its "Found N source files" log line; a server that says nothing is asked at
once (after a short grace), and one that never finishes is asked anyway after a bounded wait.
With the real servers: a cold basedpyright (and ty) finds every reference of a symbol used
across a generated project on its very first request, each time with a fresh server."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from agent_lsp.langservers import readiness
from tests.langservers.conftest import at, only_on_path, servers, where
from tests.langservers.test_lifecycle import fake
from tests.unit.codeintel_kit import make_project
from tests.unit.kit import (
    Events,
    ScriptedApprover,
    call,
    last_tool_results,
    make_settings,
    tools_reply,
)

pytestmark = pytest.mark.timeout(180)

REFS = {"context": {"includeDeclaration": False}}


@pytest.mark.parametrize("mode", ["indexing", "pyright"])
async def test_references_wait_until_the_server_has_read_the_workspace(project, mode):
    manager = servers(project, fake(mode))
    (source,) = manager.sources()
    app = project / "app.py"
    try:
        started = time.monotonic()
        found = await source.request("textDocument/references", at(app, 5, "greet", **REFS), app)
        assert where(found) == [("app.py", 5, "")], "answered before the server read the workspace"
        assert 1.0 < time.monotonic() - started < 10
        started = time.monotonic()  # ready once: no more waiting
        assert await source.request("textDocument/references", at(app, 5, "greet", **REFS), app)
        assert time.monotonic() - started < 1
    finally:
        await manager.aclose()


async def test_a_question_about_one_file_does_not_wait(project):
    manager = servers(project, fake("endless"))
    (source,) = manager.sources()
    app = project / "app.py"
    try:
        started = time.monotonic()
        assert await source.request("textDocument/hover", at(app, 5, "greet"), app) == {"contents": "[]"}
        assert time.monotonic() - started < 5
    finally:
        await manager.aclose()


async def test_a_server_that_never_finishes_reading_is_asked_after_a_bounded_wait(project, monkeypatch, caplog):
    monkeypatch.setattr(readiness, "INDEX_WAIT", 1.0)
    manager = servers(project, fake("endless"))
    (source,) = manager.sources()
    app = project / "app.py"
    try:
        started = time.monotonic()
        assert await source.request("textDocument/references", at(app, 5, "greet", **REFS), app) == []
        assert 0.9 < time.monotonic() - started < 5
        assert "still reading the workspace" in caplog.text and "may be incomplete" in caplog.text
        started = time.monotonic()  # the budget is spent: the next question is asked at once
        assert await source.request("textDocument/references", at(app, 5, "greet", **REFS), app) == []
        assert time.monotonic() - started < 0.5
    finally:
        await manager.aclose()


async def test_the_model_is_told_when_an_answer_came_before_the_server_read_the_workspace(project, model, monkeypatch):
    monkeypatch.setattr(readiness, "INDEX_WAIT", 1.0)
    manager = servers(project.resolve(), fake("endless"))
    host = AgentHost(code_intel=lambda roots: manager.sources())
    model.add("REFS", [tools_reply(call("find_references", "c1", path="app.py", line=5, symbol="greet"),
                                   call("find_definition", "c2", path="app.py", line=5, symbol="greet")), {"text": "done"}])
    try:
        session, store = await host.open_session([project.resolve()], None)
        hosted = host.start(RunRequest("REFS: who calls greet?", session=session, store=store, settings=make_settings(model),
                            ports=RunPorts(DiskWorkspace([project.resolve()]), ScriptedApprover(), Events())))
        await asyncio.wait_for(hosted.task, 60)
        results = last_tool_results(model.requests_for("REFS")[1])
    finally:
        await host.aclose()
        await manager.aclose()
    assert results["c1"].startswith("the language server found no references to `greet`"), results
    assert "(note: language server `fake` was still reading the workspace when it answered: the answer may be incomplete)" in results["c1"]
    assert "note:" not in results["c2"], "a question about one file does not wait, and is not doubted"


async def test_a_server_that_says_nothing_is_asked_after_a_short_grace(project):
    manager = servers(project, fake("quiet"))
    (source,) = manager.sources()
    app = project / "app.py"
    try:
        started = time.monotonic()
        assert where(await source.request("textDocument/references", at(app, 5, "greet", **REFS), app))
        assert time.monotonic() - started < readiness.GRACE + 3
    finally:
        await manager.aclose()


@pytest.mark.parametrize(("program", "args"), [("basedpyright-langserver", ["--stdio"]), ("ty", ["server"])])
async def test_a_cold_server_finds_every_reference_on_its_first_request(tmp_path, program, args):
    path_env = only_on_path(tmp_path, program)
    command = [str(tmp_path / "bin" / program), *args]
    times = []
    for attempt in range(4):  # a fresh server each time, so a flaky partial answer would show
        root = (tmp_path / f"proj{attempt}").resolve()
        truth = make_project(root, files=150, every=25)
        manager = servers(root, {"auto": False, "servers": {"s": {"command": command, "extensions": [".py"]}}},
                          path_env=path_env)
        (source,) = manager.sources()
        models = root / "pkg/models.py"
        try:
            started = time.monotonic()
            found = await source.request("textDocument/references", at(models, 5, "total", **REFS), models)
            times.append(round(time.monotonic() - started, 2))
        finally:
            await manager.aclose()
        got = sorted((loc["uri"].removeprefix(root.as_uri() + "/"), loc["range"]["start"]["line"] + 1)
                     for loc in found or [])
        assert got == sorted(truth["references"]), f"attempt {attempt}: {len(got)} of {len(truth['references'])}"
    print(f"{program} cold first references: {times} s", file=sys.stderr)
