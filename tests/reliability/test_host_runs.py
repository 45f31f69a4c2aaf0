"""Issue 32, the host's side of a run's edges (every front end goes through it): a run cancelled
before its task first ran (a shutdown or a SIGTERM right after it was started) still ends with a
`cancelled` stop and a report; a run started once the host is closing is cancelled as it begins;
the host's list of finished runs keeps ids and reports, never a session and its history."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from pathlib import Path

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from agent_lsp.agent.messages import CancelCause, StopCause, StopReason
from tests.unit.kit import Events, ScriptedApprover, make_settings

pytestmark = pytest.mark.timeout(60)
SHUTDOWN = CancelCause(StopCause.SHUTDOWN)


def start(host: AgentHost, roots: list[Path], settings, prompt: str, session, store, events: Events):
    ports = RunPorts(DiskWorkspace(roots), ScriptedApprover(), events)
    return host.start(RunRequest(prompt, session=session, store=store, settings=settings, ports=ports))


def stops(events: Events) -> list:
    return events.of("stop")


async def test_a_run_cancelled_before_its_task_ran_still_reports(model, workspace):
    model.add([{"text": "never asked"}])
    host = AgentHost()
    roots = [workspace.resolve()]
    try:
        session, store = await host.open_session(roots, None)
        events = Events()
        hosted = start(host, roots, make_settings(model), "hello", session, store, events)
        host.cancel_every(SHUTDOWN)  # before the run's task took its first step
        await asyncio.wait_for(hosted.task, 20)

        report = hosted.report
        assert report is not None and report.stop_reason == StopReason.CANCELLED
        assert report.stop_cause == StopCause.SHUTDOWN
        assert len(stops(events)) == 1
        assert hosted.id not in host.active and session.running is None
        lines = Path(report.transcript).read_text().splitlines()
        assert json.loads(lines[-1])["type"] == "stop"
        assert model.requests == []
    finally:
        await host.aclose()


async def test_a_run_started_while_the_host_closes_is_cancelled_as_it_begins(model, workspace):
    model.add([{"text": "never asked"}])
    host = AgentHost()
    roots = [workspace.resolve()]
    try:
        host.cancel_every(SHUTDOWN)  # the process is going away; a run request was on its way
        session, store = await host.open_session(roots, None)
        events = Events()
        hosted = start(host, roots, make_settings(model), "late", session, store, events)
        await asyncio.wait_for(hosted.task, 20)

        assert hosted.report is not None and hosted.report.stop_cause == StopCause.SHUTDOWN
        assert len(stops(events)) == 1 and model.requests == []
    finally:
        await host.aclose()


async def test_finished_runs_keep_their_reports_but_not_their_sessions(model, workspace):
    model.add([{"text": "x" * 1000, "repeat": 3}])
    host = AgentHost(keep_sessions=0)  # idle sessions leave memory at once
    roots = [workspace.resolve()]
    settings = make_settings(model)
    try:
        session, store = await host.open_session(roots, None)
        hosted = start(host, roots, settings, "remember me", session, store, Events())
        await asyncio.wait_for(hosted.task, 20)
        run_id, session_id = hosted.id, session.id
        gone = weakref.ref(session)
        del session, hosted
        gc.collect()

        finished = host.finished[run_id]
        assert finished.session_id == session_id and finished.report is not None
        assert finished.report.final_text == "x" * 1000
        assert not hasattr(finished, "session")
        assert gone() is None, "a finished run still holds its session and its history"
    finally:
        await host.aclose()
