"""The lifecycle every front end (the language server, ACP, the terminal) shares, written once:
the warm-up (the core and the model SDK imported off the event loop once the client has its
answer), the user's own settings sources (read again when they change), the shutdown (runs
cancelled, MCP servers and model clients closed, transcripts written by the runs' own ends)
and the last rites before the process leaves (MCP server process groups killed, streams
flushed). Not part of the core: it knows the MCP integration's process registry. Imported
before `initialize` is answered: nothing heavy (pydantic, the settings model) at its top."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_lsp.agent.host import AgentHost
    from agent_lsp.agent.loop.prompt_plan import AllowedToolsConsent, ModelLister
    from agent_lsp.agent.messages import CancelCause
    from agent_lsp.settings import Settings

log = logging.getLogger(__name__)

SDK_MODULES = ("openai", "httpcore2", "httpcore")
SHUTDOWN_DEADLINE = 1.5  # for the runs to end, then again for the MCP servers to close
# the exit's export of pending spans and metrics waits at most this (Decision 43)
TELEMETRY_FLUSH = 1.0


# -- warm-up ---------------------------------------------------------------------------------
class WarmUp:
    """The front end's core modules, then the model SDK, imported in a thread once the client
    has its `initialize` answer. Imported lazily by the first run instead, they would stall
    the event loop for 0.5-4 s: no cancel, no progress, no approval answer handled meanwhile,
    and request timeouts firing across the stall. With tool_schemas the main toolset's JSON
    schemas (pydantic, ~5 ms a tool) are built too, once."""

    def __init__(
        self,
        core: tuple[str, ...],
        sdk: tuple[str, ...] = SDK_MODULES,
        *,
        tool_schemas: bool = False,
        name: str = "agent-lsp-warm-up",
    ):
        self.modules = core
        self.sdk_modules = sdk
        self.tool_schemas = tool_schemas
        self.name = name
        self.core: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.sdk: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.started = False

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        threading.Thread(target=self._load, name=self.name, daemon=True).start()

    def _load(self) -> None:
        _import_all(self.modules)
        if self.tool_schemas:
            try:
                from agent_lsp.agent.tools.base import ToolBox
                from agent_lsp.agent.tools.toolsets import main_tools

                ToolBox(main_tools(diagnostics=True)).schemas()
            except Exception as exc:
                log.debug("warm-up of the tool schemas failed: %s", exc)
        self.core.set_result(None)
        _import_all(self.sdk_modules)
        # What start-up built lives as long as the process: out of the collector's sight, a
        # full collection no longer walks it (50-95 ms each, in the middle of 20 runs' turns).
        gc.freeze()
        self.sdk.set_result(None)

    async def wait_core(self) -> None:
        self.start()
        if not self.core.done():
            await asyncio.shield(asyncio.wrap_future(self.core))

    async def wait_sdk(self) -> None:
        """Awaited before a run's first model call, which would otherwise import the SDK on the
        loop."""
        self.start()
        if not self.sdk.done():
            await asyncio.shield(asyncio.wrap_future(self.sdk))


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the code that needs it reports the problem
            log.debug("warm-up import of %s failed: %s", name, exc)


# -- the user's own settings sources ---------------------------------------------------------
class UserSources:
    """The trusted user settings file (CONTRACT Decision 1) and the environment, read again
    whenever either changed (the file's mtime and size, the variables' values): a run or a
    session started after the user edited the file sees the edit, in every front end."""

    def __init__(self) -> None:
        self.path = Path()  # the file's path: known after the first refresh()
        self.file: dict[str, Any] = {}
        self.file_problems: list[str] = []
        self.env: dict[str, Any] = {}
        self._key: Any = None

    def refresh(self) -> bool:
        """Read the sources again if they changed since the last look; True when they did
        (the first look included)."""
        from agent_lsp.settings import (
            ENVIRONMENT,
            TELEMETRY_ENV,
            from_environment,
            from_user_file,
            user_settings_path,
        )

        path = user_settings_path()
        try:
            stat = path.stat()
            stamp: Any = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        key = (
            str(path),
            stamp,
            tuple(os.environ.get(n) for n in (*ENVIRONMENT, TELEMETRY_ENV, "OPENAI_BASE_URL")),
        )
        if key == self._key:
            return False
        self._key = key
        self.path = path
        self.file, self.file_problems = from_user_file(path)
        self.env = from_environment()
        return True


_user = UserSources()
_resolved: list[tuple[Settings, list[str]]] = []


def user_settings(log_problems: bool = True) -> tuple[Settings, list[str]]:
    """The settings of a front end without initializationOptions (ACP, `agent-lsp rewind`):
    the user's settings file, then the environment; resolved again only when either changed
    (a new session sees an edited file). The problems are logged once, when first met."""
    from agent_lsp.settings import resolve

    if _user.refresh() or not _resolved:
        settings, more = resolve(_user.file, _user.env)
        if log_problems:
            for problem in _user.file_problems + more:
                log.warning("%s", problem)
        _resolved[:] = [(settings, _user.file_problems + more)]
    return _resolved[0]


def model_lister(host: AgentHost, settings: Settings) -> ModelLister:
    """The endpoint's model list, for a prompt file's `claude-*` model (is it one of the
    endpoint's?), asked only when no `modelAliases` entry maps it."""

    async def models() -> list[str]:
        listing = await host.list_models(settings)
        return list(listing.get("models") or [])

    return models


def allowed_tools_consent(host: AgentHost, roots: list[Path]) -> AllowedToolsConsent | None:
    """Consent to a project command's `allowed-tools`, asked like the project's allow rules
    (Decision 30) through the host's permission source; None when it cannot ask."""
    ask = getattr(host.permissions, "allowed_tools", None)
    if ask is None:
        return None

    async def consent(entries: list[str], origin: str) -> set[str]:
        return set(await ask(roots, entries, origin))

    return consent


# -- shutdown and last rites -----------------------------------------------------------------
def stop_runs(host: AgentHost | None, cause: CancelCause) -> None:
    """Cancel every run in flight now, with its cause (the process is going away)."""
    if host is not None:
        host.cancel_every(cause)


async def shut_down(
    host: AgentHost | None,
    cause: CancelCause | None = None,
    deadline: float | None = SHUTDOWN_DEADLINE,
) -> None:
    """The client went away or asked us to stop: every run cancelled (each writes its report
    and transcript as it ends), then the MCP servers, model clients and the language servers
    we started closed. With a deadline, each step waits at most that long."""
    if host is None:
        return
    if cause is None:
        from agent_lsp.agent.messages import CancelCause, StopCause

        cause = CancelCause(StopCause.SHUTDOWN)
    tasks = host.cancel_every(cause)
    if tasks:
        await asyncio.wait(tasks, timeout=deadline)
    try:  # the SessionEnd hooks of the sessions used here (killed at the deadline)
        await asyncio.wait_for(host.end_sessions("other"), deadline)
    except TimeoutError:
        log.warning("SessionEnd hooks took longer than %ss: stopped", deadline)
    try:  # MCP server processes end with us
        await asyncio.wait_for(host.aclose(), deadline)
    except TimeoutError:
        log.warning("closing the MCP servers took longer than %ss", deadline)
    close_sources = getattr(host.code_intel, "aclose", None)
    if close_sources is not None:  # the language servers we started: shutdown, exit, killed
        try:  # (past the deadline, last_rites and each server's reaper end them)
            await asyncio.wait_for(close_sources(), deadline)
        except TimeoutError:
            log.warning("closing the language servers took longer than %ss", deadline)
    if host.telemetry is not None:  # the runs' spans and metrics go out (at most TELEMETRY_FLUSH s)
        await asyncio.to_thread(host.telemetry.flush, TELEMETRY_FLUSH)


def last_rites() -> None:
    """MCP server process groups and the language servers we started end with us (os._exit
    skips the atexit hooks that would), and telemetry that was on exports what is pending (at
    most TELEMETRY_FLUSH s)."""
    process = sys.modules.get("agent_lsp.mcp.process")
    if process is not None:
        try:
            process.kill_live_groups()
        except Exception:  # pragma: no cover - best effort on the way out
            pass
    servers = sys.modules.get("agent_lsp.langservers.process")  # language servers we started
    if servers is not None:
        try:
            servers.kill_live()
        except Exception:  # pragma: no cover - best effort on the way out
            pass
    otel = sys.modules.get("agent_lsp.telemetry.otel")
    if otel is not None:
        try:
            otel.flush_all(TELEMETRY_FLUSH)
        except Exception:  # pragma: no cover - best effort on the way out
            pass


def leave(code: int = 0) -> None:
    """End the process now: last rites, streams flushed, then os._exit. Tearing down the
    interpreter (thousands of pydantic models) costs seconds of CPU on a busy machine, and the
    client is waiting for us to be gone; a reader thread would keep us alive anyway."""
    last_rites()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the client closed its end
            pass
    os._exit(code)


def leave_after(delay: float, code: int = 0) -> threading.Timer:
    """A watchdog: whatever happens next, the process is gone `delay` seconds from now. Only in
    a process an entry point owns (Decision 71's switch, `keyguard.seal_process`): a server
    served in a test's own process ends with its connection, not with the test's process."""
    from agent_lsp.agent.exec.keyguard import sealed

    timer = threading.Timer(delay, leave, (code,))
    if not sealed():
        return timer  # never started
    timer.daemon = True
    timer.start()
    return timer


def exit_on_ctrl_c() -> None:
    """Started by hand in a terminal: one Ctrl-C ends the process cleanly (130, no traceback)."""
    signal.signal(signal.SIGINT, lambda *_: leave(130))


@contextlib.contextmanager
def on_signals(handlers: dict[signal.Signals, Callable[[], object]]) -> Iterator[None]:
    """Signal handlers on the running event loop for the block's duration (where the platform
    has them)."""
    loop = asyncio.get_running_loop()
    for signum, handler in handlers.items():
        try:
            loop.add_signal_handler(signum, handler)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        yield
    finally:
        for signum in handlers:
            try:
                loop.remove_signal_handler(signum)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
