"""The seccomp filter bwrap loads (`--seccomp FD`) for a sandboxed command with the network off
(CONTRACT Decisions 62 and 67): `socket(AF_UNIX, …)` fails with EACCES, so no host service is
reachable over a filesystem socket wherever it lies (seccomp cannot read `connect`'s address, so
the socket itself is refused; `socketpair` stays). io_uring, which can open sockets without the
`socket` system call, is refused as a kernel with io_uring disabled refuses it (EPERM). Built with
libseccomp's bindings (`pyseccomp` over the system's libseccomp2), never hand-written BPF."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import tempfile
import threading

INSTALL_HINT = (
    "install libseccomp2 (Debian/Ubuntu: `apt install libseccomp2`, Fedora: `dnf install "
    "libseccomp`, Arch: `pacman -S libseccomp`) and the Python package `pyseccomp` in "
    "agent-lsp's environment (`pip install pyseccomp`); or, to let commands reach the network "
    "and local services, set `sandbox.network` to true in your own settings"
)
# 32-bit programs on a 64-bit kernel get the same rules (else libseccomp kills them outright).
_COMPAT = {"X86_64": ("X86", "X32"), "AARCH64": ("ARM",)}

_lock = threading.Lock()
_program: bytes | None = None
_problem: str | None = None


class SeccompUnavailable(Exception):
    """The filter cannot be built here; the message names the fix."""


def program() -> bytes:
    """The filter as BPF, built once per process; SeccompUnavailable when libseccomp or its
    bindings are missing."""
    global _program, _problem
    with _lock:
        if _program is None and _problem is None:
            try:
                _program = _build()
            except Exception as exc:  # noqa: BLE001 - an ImportError, OSError or ctypes' own
                _problem = f"{type(exc).__name__}: {exc}"
        if _program is None:
            raise SeccompUnavailable(
                f"the sandbox's seccomp filter (no unix sockets without network) cannot be "
                f"built: {_problem}; {INSTALL_HINT}"
            )
        return _program


def problem() -> str | None:
    """None when the filter can be built here, else why, with its fix (`doctor`)."""
    try:
        program()
    except SeccompUnavailable as exc:
        return str(exc)
    return None


def describe() -> str:
    """What builds the filter, for `doctor`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        bindings = f"pyseccomp {version('pyseccomp')}"
    except PackageNotFoundError:
        bindings = "pyseccomp"
    import ctypes.util

    return f"{bindings} over {ctypes.util.find_library('seccomp') or 'libseccomp'}"


def reset() -> None:
    """Forget the built filter (tests that take the bindings away)."""
    global _program, _problem
    with _lock:
        _program = _problem = None


def _build() -> bytes:
    import pyseccomp as sc

    rules = sc.SyscallFilter(sc.ALLOW)
    native = sc.system_arch()
    names = [n for n, v in vars(sc.Arch).items() if v == native and n != "NATIVE"]
    for name in _COMPAT.get(names[0] if names else "", ()):
        with contextlib.suppress(OSError):  # a libseccomp without that architecture
            rules.add_arch(getattr(sc.Arch, name))
    rules.add_rule(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.EQ, socket.AF_UNIX))
    with contextlib.suppress(OSError):  # a libseccomp older than io_uring
        rules.add_rule(sc.ERRNO(errno.EPERM), "io_uring_setup")
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


def filter_fd() -> int:
    """A readable descriptor holding the filter, for `bwrap --seccomp FD`: a pipe of its own per
    command (bwrap reads it to the end; a shared descriptor would share its offset). The caller
    passes it to the child and closes it. SeccompUnavailable when it cannot be built."""
    data = program()
    read, write = os.pipe()
    try:
        if len(data) > 60_000:  # larger than a pipe's buffer: cannot happen with two rules
            raise SeccompUnavailable(f"the seccomp filter is unexpectedly large ({len(data)} B)")
        os.write(write, data)
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
