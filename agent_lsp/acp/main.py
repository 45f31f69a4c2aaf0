"""`agent-lsp acp`: the agent over the Agent Client Protocol on stdio (newline-delimited JSON-RPC,
through the official SDK). stdout is the protocol; every log line goes to stderr."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sys
from typing import Any

from agent_lsp.frontend import exit_on_ctrl_c, leave, leave_after, on_signals

TTY_HINT = (
    "agent-lsp acp speaks the Agent Client Protocol on stdin/stdout "
    "and is meant to be started by an editor "
    "(Zed, JetBrains, agent-shell, codecompanion: see `agent-lsp acp --help`). In a terminal, try "
    '`agent-lsp run "TASK"` or `agent-lsp demo`. Ctrl-C exits.'
)
EXIT_DEADLINE = 2.0  # once the client is gone, the process is gone within this


def serve_acp() -> int:
    """Serve until the client closes stdin (or SIGTERM/SIGHUP), then end the process with the
    exit code (0; 130 on Ctrl-C)."""
    if sys.stdin.isatty():
        print(TTY_HINT, file=sys.stderr)
        exit_on_ctrl_c()
    level = os.environ.get("AGENT_LSP_LOG_LEVEL", "WARNING").upper()
    logging.getLogger().setLevel(getattr(logging, level, logging.WARNING))
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, format="agent-lsp: %(message)s")
    for noisy in ("httpx", "httpx2", "openai", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        code = asyncio.run(_serve())
    except KeyboardInterrupt:
        code = 130
    # Everything is closed and flushed (runs cancelled, transcripts written, MCP servers ended):
    # leave now, the editor is waiting for us to be gone.
    leave(code)
    return code  # not reached


async def _serve() -> int:
    from agent_lsp.acp import sdk

    acp = sdk.load()
    from agent_lsp.acp.agent import AcpAgent

    agent = AcpAgent()
    main = asyncio.current_task()

    def on_signal(name: str) -> None:
        agent.signalled(name)  # the turns in flight stop `signal`, not `shutdown`
        main.cancel()  # type: ignore[union-attr]

    with on_signals(
        {s: functools.partial(on_signal, s.name) for s in (signal.SIGTERM, signal.SIGHUP)}
    ):
        return await _until_gone(acp, agent)


async def _until_gone(acp: Any, agent: Any) -> int:
    try:
        # Our own stdio streams, with a filter in front of the SDK's reader: a frame it cannot
        # take (a batch, a scalar, not JSON) is answered here and the connection stays.
        from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
        from acp.stdio import stdio_streams

        from agent_lsp.acp.frames import filtered

        reader, writer = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
        await acp.run_agent(
            agent, writer, filtered(reader, writer, DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
        )
    except asyncio.CancelledError:
        pass
    finally:
        leave_after(EXIT_DEADLINE)  # the client is gone: whatever happens next, do not outlive it
        await agent.shutdown()
    return 0
