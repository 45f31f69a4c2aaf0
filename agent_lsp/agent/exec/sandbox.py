"""The bubblewrap sandbox for run_command: a read-only root, writable workspace folders (in
`workspace-write` mode only, their `.git` read-only), a private /tmp, minimal /dev and /proc, its
own PID namespace (every process dies with the command), no network unless allowed (and then no
unix sockets either: the runtime folders masked and, through the seccomp filter, no AF_UNIX
socket at all), secrets hidden. The mounts themselves are planned in sandbox_mounts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.exec import seccomp
from agent_lsp.agent.exec.keyguard import child_env
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.agent.exec.sandbox_mounts import (
    DEFAULT_HIDE,
    HOST_SOCKET_VARS,
    CannotHide,
    expand_hidden,
    host_sockets,
    plan_mounts,
    runtime_dirs,
)

__all__ = [
    "DEFAULT_HIDE",
    "CannotHide",
    "Confined",
    "SandboxPolicy",
    "SandboxUnavailable",
    "bwrap_argv",
    "confine",
    "explain_blocked",
    "expand_hidden",
    "host_sockets",
    "probe",
    "reset_probe",
    "runtime_dirs",
    "setup_failure",
]
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt install bubblewrap`, "
    "Fedora: `dnf install bubblewrap`, Arch: `pacman -S bubblewrap`) "
    "so that `bwrap` is on the server's PATH"
)
USERNS_HINT = (
    "bwrap could not create its namespaces: allow unprivileged user namespaces "
    "(`sysctl kernel.unprivileged_userns_clone=1`, "
    "or on Ubuntu 24.04+ an AppArmor profile for bwrap), "
    "or set `sandbox.mode` to `off` in your own settings"
)


class SandboxUnavailable(Exception):
    """The sandbox cannot be set up; the message names the fix. Nothing runs unconfined."""


@dataclass
class Confined:
    """A command line to start and the descriptors the child must get (`pass_fds`); `close()`
    once the child has started (or could not)."""

    argv: list[str]
    fds: tuple[int, ...] = ()

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = ()

    async def start(
        self, cwd: Path, env: dict[str, str], *, stdin: int, stderr: int
    ) -> asyncio.subprocess.Process:
        """The command, leading a session (a group) of its own, its stdout a pipe; the
        descriptors are closed here once it has them (or could not start: OSError).

        A cancel while it starts: asyncio's own clean-up of an interrupted start kills only
        the wrapper (reaper or bwrap), and what it had started would run on. So the start is
        finished whatever cancels come, the whole group killed, and the cancel raised."""
        starting = asyncio.ensure_future(self.spawn(cwd, env, stdin=stdin, stderr=stderr))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            await _through_cancels(starting)
            if not starting.cancelled() and starting.exception() is None:
                proc = starting.result()
                with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await _through_cancels(asyncio.ensure_future(proc.wait()))
            raise
        finally:
            self.close()

    async def spawn(
        self, cwd: Path, env: dict[str, str], *, stdin: int, stderr: int
    ) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=cwd,
            env=env,
            pass_fds=self.fds,
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )


async def _through_cancels(task: asyncio.Future[Any]) -> None:
    """Waits for `task` to end; cancels of the caller meanwhile do not cut the wait short."""
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)


@dataclass(frozen=True)
class SandboxPolicy:
    mode: str  # read-only | workspace-write
    network: bool
    roots: tuple[Path, ...]
    hide: tuple[Path, ...] = field(default_factory=tuple)
    runtime: tuple[Path, ...] = field(default_factory=tuple)  # masked with the network off
    # named by the environment; masked with the network off
    sockets: tuple[Path, ...] = field(default_factory=tuple)
    # agent-lsp's own programs a command needs (the debugger's interpreter and adapter), shown
    # read-only where the private /tmp would hide them (a checkout or a venv under /tmp)
    tools: tuple[Path, ...] = field(default_factory=tuple)

    @property
    def writable(self) -> tuple[Path, ...]:
        return self.roots if self.mode == "workspace-write" else ()

    def describe(self) -> str:
        where = (
            "the workspace folders writable but .git"
            if self.mode == "workspace-write"
            else "everything read-only"
        )
        net = "network allowed" if self.network else "no network, no host sockets"
        return f"sandboxed: bubblewrap, {self.mode} ({where}, private /tmp, {net})"


_probe: asyncio.Future[str | None] | None = None


async def probe() -> str | None:
    """None when bwrap works here, else the reason with its fix. Checked once per process."""
    global _probe
    if _probe is None:
        _probe = asyncio.ensure_future(_run_probe())
    return await asyncio.shield(_probe)


def reset_probe() -> None:
    global _probe
    _probe = None


async def _run_probe() -> str | None:
    bwrap = find_program("bwrap")
    if bwrap is None:
        return (
            f"the command sandbox needs bubblewrap, and `bwrap` is not on the PATH: {INSTALL_HINT}"
        )
    try:
        proc = await asyncio.create_subprocess_exec(
            bwrap,
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "true",
            env=child_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 10)
    except (OSError, TimeoutError) as exc:
        return f"bwrap could not be started ({exc}): {INSTALL_HINT}"
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip().splitlines()
        return f"{USERNS_HINT} (bwrap said: {detail[-1] if detail else f'exit {proc.returncode}'})"
    return None


async def confine(policy: SandboxPolicy, argv: list[str], cwd: Path) -> Confined:
    """The bwrap command line with, the network off, the seccomp filter's descriptor (made last,
    with no await after it: a cancel cannot leak it). CannotHide when a secret or host socket
    cannot be hidden, SandboxUnavailable when the filter cannot be built (then nothing may
    run)."""
    if not policy.network:
        try:
            await asyncio.to_thread(seccomp.program)  # built once per process, off the loop
        except seccomp.SeccompUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from None
    wrapped = await asyncio.to_thread(bwrap_argv, policy, argv, cwd)
    if policy.network:
        return Confined(wrapped)
    # Masking covers the known places only; the filter covers a socket anywhere (/var/tmp).
    fd = seccomp.filter_fd()
    return Confined([wrapped[0], "--seccomp", str(fd), *wrapped[1:]], (fd,))


def bwrap_argv(policy: SandboxPolicy, argv: list[str], cwd: Path) -> list[str]:
    """The bwrap command line without its seccomp filter (`confine` adds it); CannotHide when a
    secret or host socket cannot be hidden (then nothing may run). Looks at the filesystem: call
    it off the event loop."""
    bwrap = find_program("bwrap") or "/usr/bin/bwrap"
    out = [
        bwrap,
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    if not policy.network:
        # A filesystem socket needs no write permission and no network: the host's services
        # (session bus, docker, ssh agent) are cut by masking them, and their variables go.
        out.append("--unshare-net")
        for name in HOST_SOCKET_VARS:
            out += ["--unsetenv", name]
    out += plan_mounts(
        network=policy.network,
        roots=policy.roots,
        writable=policy.writable,
        hide=policy.hide,
        runtime=policy.runtime,
        sockets=policy.sockets,
        tools=policy.tools,
    ).args()
    out += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd), "--", *argv]
    return out


def setup_failure(output: str) -> str | None:
    """bwrap's own complaint when it could not build the sandbox (it then never started the
    command), else None."""
    first = output.lstrip().split("\n", 1)[0]
    return first if first.startswith("bwrap: Can't ") else None


_READ_ONLY = re.compile(r"read-only file system", re.IGNORECASE)
_DENIED = re.compile(r"(?:permission denied|operation not permitted)", re.IGNORECASE)
_NO_NETWORK = re.compile(
    r"network is unreachable|connection refused|could not resolve|name or service not known|"
    r"temporary failure in name resolution|no address associated|"
    r"failed to establish a new connection|couldn't connect to server|"
    r"getaddrinfo|nodename nor servname",
    re.IGNORECASE,
)
_PATH = re.compile(r"(/[^\s'\":]+)")
# The seccomp filter's EACCES on socket(AF_UNIX) reads "Permission denied" (C, Go, Python's
# PermissionError [Errno 13]); a line or traceback about a socket says which denial it was.
_EACCES = re.compile(r"permission denied|\[errno 13\]|\beacces\b", re.IGNORECASE)
_SOCKET = re.compile(r"socket|\bunix\b|\.sock\b|af_unix|af_local|forkserver", re.IGNORECASE)
NO_UNIX_SOCKETS = (
    "blocked by the sandbox: with the network off (sandbox.network is false) a command cannot "
    'open unix sockets (socket(AF_UNIX) fails with EACCES, "Permission denied"), so local '
    "services (docker, a database's socket, an ssh agent) and Python's multiprocessing "
    "forkserver are out of reach"
)


def explain_blocked(output: str, policy: SandboxPolicy) -> str | None:
    """Plain words for the model when the sandbox (probably) blocked something, so it asks the
    user instead of retrying blindly."""
    notes = []
    if _READ_ONLY.search(output) or any(
        _outside(p, policy)
        for line in output.splitlines()
        if _DENIED.search(line) and (policy.network or not _SOCKET.search(line))
        for p in _PATH.findall(line)
    ):
        where = (
            "only the workspace folders and /tmp are writable"
            if policy.mode == "workspace-write"
            else "nothing but /tmp is writable (sandbox.mode is read-only)"
        )
        notes.append(f"blocked by the sandbox: a write outside the allowed places failed ({where})")
    if not policy.network and _NO_NETWORK.search(output):
        notes.append(
            "blocked by the sandbox: the command has no network and no unix sockets "
            "(sandbox.network is false)"
        )
    if not policy.network and _EACCES.search(output) and _SOCKET.search(output):
        notes.append(NO_UNIX_SOCKETS)
    if not notes:
        return None
    return (
        "; ".join(notes)
        + ". Ask the user if the command really needs this; do not retry it unchanged."
    )


def _outside(raw: str, policy: SandboxPolicy) -> bool:
    path = Path(raw)
    if str(path).startswith("/tmp"):
        return False
    return not any(path == root or path.is_relative_to(root) for root in policy.writable)
