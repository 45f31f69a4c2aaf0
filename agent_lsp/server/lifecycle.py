"""The lifecycle family: initialize (the client's capabilities), initialized (the core warmed
up, the configuration pulled), didChangeConfiguration, shutdown and exit."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types

from agent_lsp.frontend import leave_after, shut_down, stop_runs
from agent_lsp.server.agent_server import AgentServer, EditorLogHandler
from agent_lsp.server.capabilities import ClientCaps


def initialize(ls: AgentServer, params: types.InitializeParams) -> None:
    ls.caps = ClientCaps.from_params(
        params.capabilities, params.client_info.name if params.client_info else None
    )
    ls.init_options = params.initialization_options  # resolved once `initialize` is answered
    logging.getLogger("agent_lsp").addHandler(EditorLogHandler(ls, asyncio.get_running_loop()))


async def initialized(ls: AgentServer, params: types.InitializedParams) -> None:
    # the core off the loop (the model SDK after it, in the background); then:
    await ls.warm.wait_core()
    ls.config  # noqa: B018 - resolve initializationOptions now, problems shown to the user
    await ls.pull_configuration()


async def did_change_configuration(
    ls: AgentServer, params: types.DidChangeConfigurationParams
) -> None:
    pushed = params.settings.get("agentLsp") if isinstance(params.settings, dict) else None
    if ls.caps.can_pull_configuration:
        await ls.pull_configuration()
    elif isinstance(pushed, dict):
        ls.show_problems(ls.config.update(workspace_config=pushed))
        ls.settings_replaced()


async def shutdown(ls: AgentServer, *args: Any) -> None:
    ls.shutdown_asked = True
    await shut_down(ls._runs.host if ls._runs is not None else None)


def exit_(ls: AgentServer, *args: Any) -> None:
    ls.connection_closed = True  # pygls closes stdout right after this handler
    ls.exit_asked = True
    if ls._runs is not None:  # an exit without a shutdown first: the runs stop `shutdown` too
        from agent_lsp.agent.messages import CancelCause, StopCause

        stop_runs(ls._runs.host, CancelCause(StopCause.SHUTDOWN))
    # pygls waits for its stdin reader thread on exit: do not let that keep us alive
    leave_after(1.0, ls.exit_code)


def register(server: AgentServer) -> None:
    server.feature(types.INITIALIZE)(initialize)
    server.feature(types.INITIALIZED)(initialized)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(types.SHUTDOWN)(shutdown)
    server.feature(types.EXIT)(exit_)
