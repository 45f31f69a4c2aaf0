"""A pre-imported parent for the tests' `python -m agent_lsp` processes (CONTRACT Decision 71).

A short CLI or ACP test spends most of its process's second importing (the front ends, the
openai SDK, pygls, lsprotocol). The fork server is a process of its own that imports them
before any thread or loop exists, then forks one child per invocation. The child takes the
caller's stdio (passed over a unix socket with SCM_RIGHTS), argv, working directory and
environment, and runs the normal entry point (`agent_lsp.__main__`: `seal_process`, the exit
code, atexit and stdio flushed as an interpreter's exit does).

The launcher (this file run as `python -I -S tests/forkserver.py SOCKET ARGS...`: standard
library only, a few milliseconds) stands where the `python -m agent_lsp` process stood: it hands
its stdio over, forwards SIGTERM/SIGINT/SIGHUP to the child, and ends with the child's status (a
death by signal is repeated on itself). When the launcher goes away first (a timeout's kill),
the server kills the child; when the server's parent (the pytest worker) dies, the server ends
and kills what it started.

What a forked child does not reproduce, so the tests that check it keep a real process
(tests/conftest.py: FORK_FILES, PROCESS_TESTS): start-up itself, `/proc/<pid>/environ` and
`cmdline` (they are the server's), signals sent to a process group, a controlling terminal.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

_INT = struct.Struct("!i")
_LEN = struct.Struct("!I")
_PR_SET_PDEATHSIG = 1


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


# ---- the launcher: the process the test started ----

def launch(path: str, args: list[str]) -> None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = json.dumps({"argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(conn, [_LEN.pack(len(request))], [0, 1, 2])
    conn.sendall(request)
    pid = _INT.unpack(_recv_exact(conn, _INT.size))[0]

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    # The child holds the stdio now: the reader sees EOF when the child closes it, not later.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        status = _INT.unpack(_recv_exact(conn, _INT.size))[0]
    except EOFError:
        os._exit(70)  # the server went away
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) != signal.SIGKILL:  # SIGKILL's handler cannot be set (OSError)
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


# ---- the server: imports once, forks per invocation ----

PREIMPORT = (
    "agent_lsp.cli", "agent_lsp.cli_parser", "agent_lsp.terminal.run", "agent_lsp.terminal.stream",
    "agent_lsp.terminal.sessions", "agent_lsp.acp.main", "agent_lsp.acp.agent", "agent_lsp.server",
    "openai", "pygls.server", "lsprotocol.types",
)


def serve(path: str) -> None:
    import importlib
    import selectors
    import threading

    _die_with_parent()
    for name in PREIMPORT:
        importlib.import_module(name)
    if threading.active_count() != 1:  # Decision 71: fork only before any thread exists
        raise SystemExit(f"forkserver: {threading.active_count()} threads after the imports")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("accept", None))
    live: dict[int, tuple[socket.socket, int]] = {}  # pid -> (connection, pidfd)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            for key, _ in sel.select():
                _on_event(key.data, sel, listener, live)
    finally:
        for pid in live:
            _kill(pid)


def _on_event(data: tuple[str, object], sel, listener: socket.socket,
              live: dict[int, tuple[socket.socket, int]]) -> None:
    import selectors

    kind, pid = data
    if kind == "accept":
        conn, _ = listener.accept()
        started = _start(conn, listener)
        if started is None:
            conn.close()
            return
        pidfd = os.pidfd_open(started)
        live[started] = (conn, pidfd)
        sel.register(conn, selectors.EVENT_READ, ("caller", started))
        sel.register(pidfd, selectors.EVENT_READ, ("exited", started))
        return
    assert isinstance(pid, int)
    conn, pidfd = live[pid]
    if kind == "caller":  # the launcher is gone (killed): its child goes too
        if conn.recv(1) == b"":
            sel.unregister(conn)
            _kill(pid)
        return
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(_INT.pack(status))
    except OSError:
        pass
    if _registered(sel, conn):
        sel.unregister(conn)
    sel.unregister(pidfd)
    conn.close()
    os.close(pidfd)
    del live[pid]


def _registered(sel, conn: socket.socket) -> bool:
    try:
        sel.get_key(conn)
    except KeyError:
        return False
    return True


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _start(conn: socket.socket, listener: socket.socket) -> int | None:
    try:
        head, fds, _flags, _addr = socket.recv_fds(conn, _LEN.size, 3)
        head += _recv_exact(conn, _LEN.size - len(head))
        request = json.loads(_recv_exact(conn, _LEN.unpack(head)[0]))
    except (OSError, EOFError, ValueError):
        return None
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    pid = os.fork()
    if pid == 0:
        _child(fds, request)
    for fd in fds:
        os.close(fd)
    conn.sendall(_INT.pack(pid))
    return pid


def _child(fds: list[int], request: dict) -> None:
    """In the forked child: become `python -m agent_lsp ARGS` started by the caller."""
    code = 1
    try:
        for signum in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # what exec after a close_fds Popen leaves
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _reopen_stdio(bool(request["env"].get("PYTHONUNBUFFERED")))
        code = _run_main(request["argv"])
    finally:
        os._exit(code)


def _reopen_stdio(unbuffered: bool) -> None:
    """sys.std* on the caller's fds, made as the interpreter makes them (PYTHONUNBUFFERED: stdout
    and stderr write through, so a write to a pipe whose reader left fails at once)."""
    import io

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        raw = open(fd, "rb" if fd == 0 else "wb", buffering=0 if unbuffered and fd else -1,
                   closefd=False)
        new = io.TextIOWrapper(raw, encoding=old.encoding, errors=old.errors,  # type: ignore[arg-type]
                               line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
                               write_through=unbuffered and fd != 0)
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)


def _run_main(argv: list[str]) -> int:
    import atexit
    import runpy
    import threading
    import traceback

    sys.argv = ["-m", *argv]
    try:
        runpy.run_module("agent_lsp", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught error
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter's exit: join threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _die_with_parent() -> None:
    import ctypes

    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        raise SystemExit(0)


# ---- the pytest side: one server per pytest process, started on first use ----

PYTHON_M_AGENT_LSP = [sys.executable, "-m", "agent_lsp"]
_state: dict[str, object] = {"active": False, "server": None, "folder": None}


def activate(on: bool) -> None:
    _state["active"] = on


def rewrite(argv: list[str]) -> list[str]:
    """`python -m agent_lsp ARGS` through the fork server when the running test may use it
    (tests/conftest.py turns it on per test); any other command line as it is."""
    if not _state["active"] or list(argv[:3]) != PYTHON_M_AGENT_LSP:
        return argv
    return [sys.executable, "-I", "-S", __file__, _socket(), *argv[3:]]


def _socket() -> str:
    import subprocess
    import tempfile
    import time

    if _state["server"] is None:
        folder = tempfile.mkdtemp(prefix="agent-lsp-fork-")
        path = os.path.join(folder, "s")
        log = open(os.path.join(folder, "log"), "wb")  # noqa: SIM115 - the server's lifetime
        server = subprocess.Popen([sys.executable, "-P", __file__, "--serve", path],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                server.wait()
                with open(os.path.join(folder, "log")) as failed:
                    raise RuntimeError(f"the fork server did not start: {failed.read()[-2000:]}")
            time.sleep(0.02)
        _state.update(server=server, folder=folder, path=path)
    return str(_state["path"])


def running_pid() -> int | None:
    """The server's pid if this pytest process started one (test infrastructure, not a leak)."""
    server = _state["server"]
    return None if server is None else int(server.pid)  # type: ignore[attr-defined]


def server_pid() -> int:
    """The server's pid (started if it was not)."""
    _socket()
    return int(_state["server"].pid)  # type: ignore[attr-defined]


def children_of(pid: int) -> list[int]:
    """The live children a process forked (Linux's /proc children list)."""
    try:
        found = (open(f"/proc/{pid}/task/{pid}/children").read()).split()  # noqa: SIM115
    except OSError:
        return []
    return [int(child) for child in found]


def leftover_children(within: float) -> list[str]:
    """The children this pytest process's fork server still runs after up to `within` seconds
    (forked for an earlier test that is over: a server that outlived its editor), each killed
    and named by its pid and working directory (a child's cmdline is the server's); [] when
    none is left or no server was started."""
    import time

    server = running_pid()
    if server is None:
        return []
    deadline = time.monotonic() + within
    while (left := children_of(server)) and time.monotonic() < deadline:
        time.sleep(0.05)
    named = []
    for pid in left:
        try:
            where = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            where = "?"
        _kill(pid)
        named.append(f"pid {pid} in {where}")
    return named


def stop() -> None:
    """The server and its folder (at the end of the pytest process)."""
    import shutil

    server = _state["server"]
    if server is not None:
        server.terminate()  # type: ignore[attr-defined]
        server.wait(30)  # type: ignore[attr-defined]
        shutil.rmtree(str(_state["folder"]), ignore_errors=True)
        _state.update(server=None, folder=None)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        launch(sys.argv[1], sys.argv[2:])
