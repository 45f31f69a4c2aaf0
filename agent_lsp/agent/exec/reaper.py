"""Runs one command as a Linux child subreaper, so that nothing it starts outlives it.

`python -I -S reaper.py [--session] [--] ARGV...`: every descendant the command leaves behind
(a background job, a daemon that called setsid()) is re-parented here instead of to init, and
is killed when the command exits or when this process is told to stop (SIGTERM/SIGHUP/SIGINT,
or the agent dying: PR_SET_PDEATHSIG). Standard library only, and cheap to start.

`--session`: the command leads a session of its own (an MCP server: its process group can be
signalled apart from the reaper), and the reaper lets go of its own stdin and stdout, so the
command's pipes end with the command.
"""

import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
EXEC_FAILED = 127


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the process group kill still applies
        pass


def _children() -> list[int]:
    me = os.getpid()
    found = []
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/{me}/task/{task}/children") as handle:
                found += [int(pid) for pid in handle.read().split()]
        except OSError:
            return _children_by_scan(me)
    return found


def _children_by_scan(me: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == me:
                    found.append(int(name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _reap_all() -> None:
    """Kill every descendant: kill our children, reap them; their orphans come to us; repeat."""
    while children := _children():
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in children:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return
            except InterruptedError:
                continue


def _exec(argv: list[str]) -> None:
    """Replace this child with argv; a bare program name is looked up only in PATH's absolute
    entries (never the workspace through an empty or `.` entry: Decision 62)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from program_path import find_program

    program = argv[0] if os.sep in argv[0] else find_program(argv[0])
    try:
        if program is None:
            raise FileNotFoundError(2, "no such command on the PATH (absolute entries only)")
        os.execv(program, argv)
    except OSError as exc:
        os.write(2, f"agent-lsp: cannot start {argv[0]!r}: {exc.strerror}\n".encode())
    os._exit(EXEC_FAILED)


def main(argv: list[str]) -> int:
    own_session = bool(argv) and argv[0] == "--session"
    if own_session:
        argv = argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        sys.stderr.write("reaper: no command\n")
        return 2
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    parent = os.getppid()

    def stop(signum: int, _frame: object) -> None:
        _reap_all()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, stop)
    if parent == 1:  # the agent died before we could ask to be told
        return 128 + signal.SIGTERM
    pid = os.fork()
    if pid == 0:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        if own_session:
            os.setsid()
        _exec(argv)
    if own_session:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
    while True:
        try:
            done, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        if done == pid:
            break
    _reap_all()
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
