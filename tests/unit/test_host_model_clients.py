"""The host's model clients (issue 32): one per endpoint and model, shared by runs; a client the
newest configuration no longer wants is closed (its connections with it) once no run uses it."""

from __future__ import annotations

import asyncio

from agent_lsp.agent.host import AgentHost, RunHandle
from agent_lsp.agent.state.session import Session
from agent_lsp.testing.scripted_model import ScriptedModelServer
from tests.unit.kit import make_settings


async def listed(host: AgentHost, settings) -> None:
    """A GET /models through the host's client for `settings` (opens its connection)."""
    await host.list_models(settings)


async def test_a_replaced_endpoints_client_is_closed_and_the_current_one_kept(model):
    host = AgentHost()
    old = make_settings(model)
    await listed(host, old)
    first = host.model_for(old)
    assert model.open_connections == 1
    with ScriptedModelServer() as other:
        new = make_settings(other)
        await host.reconfigure(new)
        assert await wait_closed(model), "the replaced endpoint's connection is closed"
        assert host.model_for(old) is not first  # made again if asked for
        await listed(host, new)
        kept = host.model_for(new)
        await host.reconfigure(new)
        assert host.model_for(new) is kept and other.open_connections == 1
        await host.aclose()


async def test_a_client_a_run_uses_or_a_live_session_names_stays(model):
    host = AgentHost()
    old = make_settings(model)
    busy = host.model_for(old, "busy")
    session = Session(model="chosen")
    host.sessions[session.id] = (session, None)  # type: ignore[assignment]
    chosen = host.model_for(old, "chosen")
    host.active["r-1"] = RunHandle("r-1", Session(), model=busy)  # type: ignore[arg-type]
    await host.reconfigure(old.model_copy(update={"model": "other"}))
    assert host.model_for(old, "busy") is busy  # in use by a running run
    assert host.model_for(old, "chosen") is chosen  # a live session's model
    del host.active["r-1"]
    await host.retire_unused()  # what a run's end does
    assert host.model_for(old, "busy") is not busy


async def wait_closed(server: ScriptedModelServer) -> bool:
    for _ in range(200):
        if server.open_connections == 0:
            return True
        await asyncio.sleep(0.02)
    return False
