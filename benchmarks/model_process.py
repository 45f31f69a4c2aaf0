"""The scripted model server in a process of its own, driven over a pipe.

A real model is remote: its work must not compete with the runtime for the benchmark
process's GIL, so the scripted server (`agent_lsp.testing.scripted_model`) runs in a child
process. Its log times are `time.monotonic()`, which on Linux is one clock for every process
(CLOCK_MONOTONIC), so they compare directly with the benchmark's own `time.monotonic()`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Served:
    """One answered chat-completions request, as the model server saw it."""

    key: str
    t_start: float  # request parsed, answer about to start (ttft, then chunks)
    t_end: float | None  # last byte of the answer written
    status: int | None

    @property
    def seconds(self) -> float:
        return (self.t_end or self.t_start) - self.t_start


class ModelProcess:
    """Parent side: `add` scripts, `log`/`requests` read back, `forget` frees a key's records."""

    def __init__(self) -> None:
        # A plain subprocess with two pipes (not multiprocessing's spawn, which re-imports the
        # caller's __main__ and so breaks callers without a main guard).
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        code = f"from benchmarks.model_process import _serve; _serve({to_child_r}, {from_child_w})"
        self._proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(to_child_r, from_child_w),
                                      stdin=subprocess.DEVNULL, env=env)
        os.close(to_child_r)
        os.close(from_child_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(from_child_r, writable=False)
        self.pid = self._proc.pid
        self.base_url: str = self._call("base_url")

    def _call(self, *command: Any) -> Any:
        self._send.send(command)
        ok, value = self._recv.recv()
        if not ok:
            raise RuntimeError(f"model process: {value}")
        return value

    def add(self, key: str, replies: list[dict[str, Any]]) -> None:
        self._call("add", key, replies)

    def log(self, *keys: str) -> list[Served]:
        return [Served(*row) for row in self._call("log", keys)]

    def requests(self, *keys: str) -> list[dict[str, Any]]:
        """Request bodies of these keys, in arrival order."""
        return self._call("requests", keys)

    def remaining(self, key: str) -> int:
        return self._call("remaining", key)

    def forget(self, *keys: str) -> None:
        self._call("forget", keys)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._call("stop")
                self._proc.wait(5)
            except (EOFError, OSError, RuntimeError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait(5)
        self._send.close()
        self._recv.close()

    def __enter__(self) -> ModelProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(read_fd: int, write_fd: int) -> None:
    """Child side: one ScriptedModelServer, answering commands until `stop` or EOF."""
    conn_in, conn_out = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    class Server(ScriptedModelServer):
        # The public API has no way to drop old records; long benchmarks would keep every
        # multi-megabyte request body otherwise. (Candidate for a public `forget(key)`.)
        def forget(self, keys: tuple[str, ...]) -> None:
            with self._lock:
                self._requests = [(k, b) for k, b in self._requests if k not in keys]
                self._log = [e for e in self._log if e.key not in keys]

        def requests_of(self, keys: tuple[str, ...]) -> list[dict[str, Any]]:
            with self._lock:  # several keys in their arrival order (`requests_for` takes one)
                return [body for k, body in self._requests if k in keys]

    server = Server().start()
    try:
        while True:
            try:
                command, *args = conn_in.recv()
            except (EOFError, OSError):
                return
            try:
                if command == "stop":
                    conn_out.send((True, None))
                    return
                conn_out.send((True, _handle(server, command, args)))
            except Exception as exc:  # reported to the parent, which raises it
                conn_out.send((False, f"{type(exc).__name__}: {exc}"))
    finally:
        server.stop()


def _handle(server: Any, command: str, args: list[Any]) -> Any:
    if command == "base_url":
        return server.base_url
    if command == "add":
        server.add(args[0], args[1])
        return None
    if command == "log":
        keys = set(args[0])
        return [(e.key, e.t_start, e.t_end, e.status) for e in server.log if e.key in keys]
    if command == "requests":
        return server.requests_of(tuple(args[0]))
    if command == "remaining":
        return server.remaining(args[0])
    if command == "forget":
        server.forget(tuple(args[0]))
        return None
    raise ValueError(f"unknown command {command!r}")
