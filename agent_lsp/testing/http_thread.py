"""An HTTP/1.1 server on 127.0.0.1 in a background thread with its own event loop: the
plumbing under the scripted model (start, stop, connections kept alive, dropped on stop)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any, Self

from agent_lsp.testing.sse import HttpRequest, Responder, read_request


class ThreadedHttpServer:
    """Subclasses answer each request in ``_dispatch``."""

    def __init__(self, host: str, port: int, *, name: str) -> None:
        self._host, self._port, self._name = host, port, name
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}

    async def _dispatch(
        self, req: HttpRequest, resp: Responder, reader: asyncio.StreamReader
    ) -> None:
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (known once started when constructed with ``port=0``)."""
        if not self._port:
            raise RuntimeError(f"{self._name}: server not started")
        return self._port

    @property
    def open_connections(self) -> int:
        """Client connections open now (kept alive between requests until the client closes)."""
        return len(self._conns)

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError(f"{self._name}: server already started")
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(ready, failure), name=self._name, daemon=True
        )
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            server = loop.run_until_complete(
                asyncio.start_server(self._serve, self._host, self._port)
            )
        except BaseException as err:  # re-raised by start()
            failure.append(err)
            loop.close()
            ready.set()
            return
        self._port = server.sockets[0].getsockname()[1]
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            for task, writer in list(self._conns.items()):
                writer.transport.abort()
                task.cancel()
            loop.run_until_complete(asyncio.gather(*self._conns, return_exceptions=True))
            loop.close()

    # -- HTTP --------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = writer
        try:
            while (req := await read_request(reader)) is not None:
                resp = Responder(writer, f"req_scripted_{next(self._ids)}", req.keep_alive)
                await self._dispatch(req, resp, reader)
                if not resp.keep_alive:
                    break
        except (
            ConnectionError,
            ValueError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass  # client went away or spoke garbage: drop the connection
        except asyncio.CancelledError:
            pass  # stop(): end quietly (asyncio logs cancelled connection callbacks otherwise)
        finally:
            self._conns.pop(task, None)
            writer.close()
