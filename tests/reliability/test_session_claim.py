"""Issue 21.9: one session id, one Session object. Two runs sent at once on a persisted session
(after a restart, so both go through the load path) must not both start: the second is refused
as busy, and the session keeps one history and every run's record."""

from __future__ import annotations

import asyncio
import json

import pytest
from pygls.exceptions import JsonRpcException

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from agent_lsp.agent.state.sessions import SessionError, SessionStore
from agent_lsp.settings import state_dir as current_state_dir
from tests.e2e.harness import start_editor
from tests.unit.kit import Events, ScriptedApprover, make_settings

pytestmark = pytest.mark.timeout(90)


def index_of(state_dir, workspace, session_id: str) -> dict:
    return json.loads((SessionStore(state_dir, workspace).dir / f"{session_id}.json").read_text())


async def test_two_runs_at_once_on_a_resumed_session_over_lsp_one_is_refused(model, workspace, state_dir):
    model.add("FIRST-GOAL", [{"text": "first answer"}, {"text": "slow", "ttft": 30}, {"text": "slow too", "ttft": 30}])
    init = {"model": "m", "baseUrl": model.base_url}
    first = await start_editor(workspace, "visual-studio-code", init_options=init)
    started = await first.run("FIRST-GOAL: hello")
    await first.wait_stop(started["runId"])
    await first.quit()

    editor = await start_editor(workspace, "visual-studio-code", init_options=init)
    try:
        results = await asyncio.gather(editor.run("one", sessionId=started["sessionId"]),
                                       editor.run("two", sessionId=started["sessionId"]), return_exceptions=True)
        ran = [r for r in results if isinstance(r, dict)]
        refused = [r for r in results if isinstance(r, JsonRpcException)]
        assert len(ran) == 1 and len(refused) == 1, results
        assert "still running" in str(refused[0]) and started["sessionId"] in str(refused[0])
        assert ran[0]["sessionId"] == started["sessionId"]
        await editor.wait_for(lambda: len(model.requests) >= 2, 10, "the accepted run's model call")
        assert await editor.execute("agentLsp.cancel", {"runId": ran[0]["runId"]}) is True
        assert (await editor.wait_stop(ran[0]["runId"]))["stopReason"] == "cancelled"
        await asyncio.sleep(0.5)
        assert len(model.requests) == 2, "the refused run never reached the model"
    finally:
        await editor.quit()
    runs = [r["runId"] for r in index_of(state_dir, workspace, started["sessionId"])["runs"]]
    assert runs == [started["runId"], ran[0]["runId"]], "one history: both runs' records are kept"


async def test_two_runs_at_once_on_a_resumed_session_in_process(model, workspace, state_dir):
    model.add("FIRST-GOAL", [{"text": "first answer"}, {"text": "slow", "ttft": 30}, {"text": "slow too", "ttft": 30}])
    settings = make_settings(model)
    roots = [workspace.resolve()]

    def ports() -> RunPorts:
        return RunPorts(DiskWorkspace(roots), ScriptedApprover(), Events())

    before = AgentHost()
    session, store = await before.open_session(roots, None)
    first = before.start(RunRequest("FIRST-GOAL: hello", session=session, store=store, settings=settings, ports=ports()))
    await asyncio.wait_for(first.task, 20)
    await before.aclose()
    assert current_state_dir() == state_dir

    host = AgentHost()  # a restart: the session is only on disk

    async def open_and_start(prompt: str):
        s, st = await host.open_session(roots, session.id)
        return host.start(RunRequest(prompt, session=s, store=st, settings=settings, ports=ports()))

    results = await asyncio.gather(open_and_start("one"), open_and_start("two"), return_exceptions=True)
    hosted = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    try:
        assert len(hosted) == 1 and len(refused) == 1, results
        assert isinstance(refused[0], SessionError) and "still running" in str(refused[0])
        # Opening again while it runs: the same object, still busy.
        with pytest.raises(SessionError, match="still running"):
            await host.open_session(roots, session.id)
        assert len(host.sessions) == 1
    finally:
        for run in hosted:
            host.cancel(run.id)
            await asyncio.wait_for(run.task, 10)
        await host.aclose()
    assert hosted[0].report.stop_reason == "cancelled"
    runs = [r["runId"] for r in index_of(state_dir, workspace, session.id)["runs"]]
    assert runs == [first.id, hosted[0].id]
