"""The real server in the test's own process (CONTRACT Decision 71): the same server object
`agent-lsp serve` builds (`create_server`), served by pygls over real JSON-RPC pipes (os.pipe,
Content-Length framing, both directions) on its own thread and event loop, so a test pays no
interpreter start and no imports. It looks like the asyncio subprocess the harness otherwise
holds (stdin, stdout, stderr, pid, returncode, wait, terminate, kill), so the Editor and
pytest-lsp's client use it unchanged; stderr carries what `agent-lsp serve` would log there.

What it is not: a process. The process-wide effects (key scrub, non-dumpable, the exit watchdog)
stay off here (`keyguard.seal_process` is the entry points' switch), and the tests of start-up,
signals, stdin close, orphans, the sandbox, the key scrub and exit codes keep a subprocess
(tests/e2e/conftest.py names them)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from typing import Any

from pygls.io_ import run_async

LOG_FORMAT = "%(asctime)s agent-lsp %(levelname)s %(name)s: %(message)s"  # server/main.py's
NOISY = ("pygls", "httpx", "httpx2", "openai", "httpcore")  # WARNING and up, as serve() sets


class _StderrLines(logging.Handler):
    """The log records `agent-lsp serve` would write to its stderr, as lines on a reader."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter(LOG_FORMAT))
        self.loop = loop
        self.reader = reader
        self.closed = False

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] in NOISY and record.levelno < logging.WARNING:
            return
        try:
            line = (self.format(record) + "\n").encode("utf-8", "replace")
            self.loop.call_soon_threadsafe(self._feed, line)
        except Exception:  # the test's loop is gone: nobody reads these lines any more
            pass

    def _feed(self, line: bytes) -> None:
        if not self.closed:
            self.reader.feed_data(line)


class InProcessServer:
    """One agent-lsp server on a thread, talked to through two pipes."""

    _alive = 0  # servers running in this process: agent_lsp logs at INFO while any is
    _level = logging.NOTSET

    def __init__(self) -> None:
        from agent_lsp.server.server import create_server

        self.server = create_server()
        self.pid = os.getpid()
        self.returncode: int | None = None
        self.stdin: Any = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._done = asyncio.Event()

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        to_server, from_client = os.pipe()
        from_server, to_client = os.pipe()
        self.stdout = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(self.stdout),
                                     os.fdopen(from_server, "rb", buffering=0))
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            os.fdopen(from_client, "wb", buffering=0))
        self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        self.stderr = asyncio.StreamReader()
        self._log = _StderrLines(loop, self.stderr)
        logging.getLogger().addHandler(self._log)
        if InProcessServer._alive == 0:
            InProcessServer._level = logging.getLogger("agent_lsp").level
            logging.getLogger("agent_lsp").setLevel(logging.INFO)
        InProcessServer._alive += 1
        server_in, server_out = os.fdopen(to_server, "rb"), os.fdopen(to_client, "wb")
        threading.Thread(target=self._serve, args=(server_in, server_out), daemon=True,
                         name="agent-lsp in-process server").start()

    def _serve(self, server_in: Any, server_out: Any) -> None:
        try:
            self.server.start_io(server_in, server_out)  # returns at stdin's EOF or after exit
        except BaseException:  # as a process would: logged to stderr, then gone
            logging.getLogger("agent_lsp.tests.inprocess").exception("the server failed")
        finally:
            for stream in (server_in, server_out):
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
            with contextlib.suppress(RuntimeError):  # the test's loop is closed already
                self._loop.call_soon_threadsafe(self._ended)

    def _ended(self) -> None:
        self.returncode = 0 if self.server.protocol._shutdown else 1  # as pygls's exit code
        logging.getLogger().removeHandler(self._log)
        ours = logging.getLogger("agent_lsp")
        for handler in list(ours.handlers):  # the server's window/logMessage handler
            if getattr(handler, "ls", None) is self.server:
                ours.removeHandler(handler)
        InProcessServer._alive -= 1
        if InProcessServer._alive == 0:
            ours.setLevel(InProcessServer._level)
        self._log.closed = True
        if self.stderr is not None:
            self.stderr.feed_eof()
        self._done.set()

    async def wait(self) -> int:
        await self._done.wait()
        assert self.returncode is not None
        return self.returncode

    def terminate(self) -> None:
        """The only way to stop a thread: its input ends (the server stops at EOF)."""
        if self.stdin is not None and not self.stdin.is_closing():
            self.stdin.close()

    kill = terminate


async def connect(client: Any) -> InProcessServer:
    """Serve a new in-process server to pytest-lsp's `client`, as `client.start_io` would a
    process."""
    server = InProcessServer()
    await server.start()
    client._server = server
    client.protocol.set_writer(server.stdin)
    client._async_tasks.extend([
        asyncio.create_task(run_async(stop_event=client._stop_event, reader=server.stdout,
                                      protocol=client.protocol, error_handler=client.report_server_error)),
        asyncio.create_task(client._server_exit()),
    ])
    return server
