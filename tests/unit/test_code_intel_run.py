"""The code-intel tools in runs, through the host seam (AgentHost.code_intel): offered when a
source exists and fixed at the session's first run, the read-only ones in plan mode and in
sub-agents, the system prompt steering symbols to them; rename_symbol is ONE approval whose
event lists every file's diff, one apply, and one rewind that restores every file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_lsp.agent.events import ApprovalEvent
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from agent_lsp.agent.ports import EditOutcome, FileChange
from tests.unit.codeintel_kit import RecordedSource
from tests.unit.kit import Events, ScriptedApprover, call, make_settings, tools_reply

pytestmark = pytest.mark.timeout(60)

READ_INTEL = {"find_definition", "find_references", "hover", "symbols", "call_hierarchy"}


class CountingWorkspace(DiskWorkspace):
    """A DiskWorkspace that counts its multi-file applies."""

    def __init__(self, roots: list[Path]):
        super().__init__(roots)
        self.applied_all: list[list[Path]] = []

    async def apply_all(self, changes: list[FileChange], *, label: str) -> EditOutcome:
        self.applied_all.append([c.path for c in changes])
        return await super().apply_all(changes, label=label)


async def finish(hosted) -> None:
    await asyncio.wait_for(hosted.task, 30)
    assert hosted.report is not None and hosted.report.stop_reason == "done", hosted.report


def tool_names(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request["tools"]}


async def test_offered_with_a_source_fixed_for_the_session_and_steered_in_the_prompt(model, tmp_path: Path):
    root = (tmp_path / "proj").resolve()
    RecordedSource.write_project(root)
    sources: list = [RecordedSource(root)]
    host = AgentHost(code_intel=lambda roots: list(sources))
    try:
        session, store = await host.open_session([root], None)
        model.add("FIRST", [tools_reply(call("delegate", task="SUB: who calls area?")), {"text": "ok"},
                            {"text": "1. rename"}])  # the follow-up in plan mode
        model.add("SUB", [{"text": "nobody"}])
        settings = make_settings(model)
        await finish(host.start(RunRequest("FIRST", session=session, store=store, settings=settings,
                                ports=RunPorts(DiskWorkspace([root]), ScriptedApprover(), Events()))))
        first = model.requests_for("FIRST")[0]
        assert READ_INTEL | {"rename_symbol"} <= tool_names(first)
        assert "Use these for code symbols" in first["messages"][0]["content"]
        assert "Use search for text" in first["messages"][0]["content"]
        sub = model.requests_for("SUB")[0]
        assert tool_names(sub) == {"read_file", "list_files", "search"} | READ_INTEL
        assert "use search for text" in sub["messages"][0]["content"]

        sources.clear()  # the source went away: the session keeps its tool list (prompt cache)
        await finish(host.start(RunRequest("PLAN", session=session, store=store, settings=settings, mode="plan",
                                ports=RunPorts(DiskWorkspace([root]), ScriptedApprover(), Events()))))
        plan = model.requests_for("FIRST")[-1]
        assert plan["messages"][-1]["content"].startswith("PLAN")
        assert READ_INTEL <= tool_names(plan) and "rename_symbol" not in tool_names(plan)

        other, other_store = await host.open_session([root], None)
        model.add("NONE", [{"text": "ok"}])
        await finish(host.start(RunRequest("NONE", session=other, store=other_store, settings=settings,
                                ports=RunPorts(DiskWorkspace([root]), ScriptedApprover(), Events()))))
        none = model.requests_for("NONE")[0]
        assert not (READ_INTEL & tool_names(none)) and "code symbols" not in none["messages"][0]["content"]
    finally:
        await host.aclose()

    fresh = AgentHost(code_intel=lambda roots: [])  # a later process, where no source answers
    try:
        resumed, resumed_store = await fresh.open_session([root], session.id)
        assert resumed is not session and resumed.code_intel is True, "the session's tool list is in its index"
        model.add("FIRST", [{"text": "again"}])
        await finish(fresh.start(RunRequest("AGAIN", session=resumed, store=resumed_store, settings=settings,
                                 ports=RunPorts(DiskWorkspace([root]), ScriptedApprover(), Events()))))
        assert READ_INTEL | {"rename_symbol"} <= tool_names(model.requests_for("FIRST")[-1])
    finally:
        await fresh.aclose()


async def test_rename_is_one_approval_with_every_files_diff_one_apply_and_one_rewind(model, tmp_path: Path):
    root = (tmp_path / "proj").resolve()
    RecordedSource.write_project(root)
    shapes, use = root / "pkg/shapes.py", root / "pkg/use.py"
    before = shapes.read_text(), use.read_text()
    host = AgentHost(code_intel=lambda roots: [RecordedSource(root)])
    workspace = CountingWorkspace([root])
    approver = ScriptedApprover()
    events = Events()
    try:
        session, store = await host.open_session([root], None)
        model.add("RENAME", [tools_reply(call("rename_symbol", path="pkg/shapes.py", line=8, symbol="area",
                                              newName="surface")), {"text": "renamed"}])
        hosted = host.start(RunRequest("RENAME Circle.area", session=session, store=store, settings=make_settings(model),
                            ports=RunPorts(workspace, approver, events)))
        await finish(hosted)
        assert len(approver.requests) == 1
        request = approver.requests[0]
        assert request.tool == "rename_symbol" and request.uri is None
        assert [f["uri"] for f in request.files or []] == [shapes.as_uri(), use.as_uri()]
        assert "-    def area(self) -> float:" in request.detail and "+print(\"area\", c.surface(), s.area())" in request.detail
        pending = [e for e in events if isinstance(e, ApprovalEvent) and e.state == "pending"]
        assert len(pending) == 1 and [f["uri"] for f in pending[0].files] == [shapes.as_uri(), use.as_uri()]
        assert workspace.applied_all == [[shapes, use]]
        assert "c.surface()" in use.read_text() and "def surface" in shapes.read_text()
        assert hosted.report.edited_files == [shapes.as_uri(), use.as_uri()]

        result = await host.rewind([root], DiskWorkspace([root]), hosted.id)
        assert sorted(result.restored) == sorted([shapes, use])
        assert (shapes.read_text(), use.read_text()) == before
    finally:
        await host.aclose()
