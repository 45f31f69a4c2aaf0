"""Issue 22: "the last rewindable run" is decided once, in the host (CONTRACT "Rewind", Decision
17: the newest finished run with a file it can restore, not rewound). The LSP code action asks it
for the workspace; ACP's `/rewind` without an id asks it for its own session's runs."""

from __future__ import annotations

import asyncio

import pytest

from agent_lsp.agent.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts
from tests.unit.kit import Events, ScriptedApprover, call, make_settings, tools_reply

pytestmark = pytest.mark.timeout(90)


async def test_the_last_rewindable_run_of_the_workspace_and_of_one_session(model, workspace, state_dir):
    model.add("EDIT-A", [tools_reply(call("write_file", path="a.txt", content="a\n")), {"text": "wrote a"}])
    model.add("EDIT-B", [tools_reply(call("write_file", path="b.txt", content="b\n")), {"text": "wrote b"}])
    settings = make_settings(model)
    roots = [workspace.resolve()]
    host = AgentHost()
    try:
        reports = {}
        for prompt in ("EDIT-A", "EDIT-B"):  # two sessions of one workspace, B's run the newer
            session, store = await host.open_session(roots, None)
            hosted = host.start(prompt, session=session, store=store, settings=settings,
                                ports=RunPorts(DiskWorkspace(roots), ScriptedApprover(), Events()))
            assert hosted.task is not None
            await asyncio.wait_for(hosted.task, 20)
            assert hosted.report is not None and hosted.report.rewindable
            reports[prompt] = hosted.report
        a, b = reports["EDIT-A"], reports["EDIT-B"]
        assert await host.last_rewindable(roots) == (b.run_id, 1), "the workspace's newest run: the code action"
        assert await host.last_rewindable(roots, session_id=a.session_id) == (a.run_id, 1), "ACP /rewind in session A"

        await host.rewind(roots, DiskWorkspace(roots), a.run_id)
        assert await host.last_rewindable(roots, session_id=a.session_id) is None, "a rewound run is not offered again"
        assert await host.last_rewindable(roots) == (b.run_id, 1)
    finally:
        await host.aclose()
