"""run_command: argv without a shell (a shell only for a line the user approved as such)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal

from pydantic import Field

from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
MAX_CAPTURE = 5_000_000  # bytes kept from a command's output before truncation for the model
# Anything a shell would interpret. Conservative on purpose: a line with any of these never
# matches an allowCommands prefix and, if approved, runs under /bin/sh exactly as shown.
_SHELL_SYNTAX = re.compile(r"[;&|<>`$(){}\[\]*?~!#\\\n\r]")


def needs_shell(command: str) -> bool:
    return bool(_SHELL_SYNTAX.search(command))


def split_command(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"cannot parse the command line: {exc}") from None
    if not argv:
        raise ToolError("the command is empty")
    return argv


def matches_prefix(command: str, prefixes: list[str]) -> bool:
    """True when the parsed argv starts with one of the allowed prefixes' argv."""
    if needs_shell(command):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    for prefix in prefixes:
        try:
            wanted = shlex.split(prefix)
        except ValueError:
            continue
        if wanted and argv[: len(wanted)] == wanted:
            return True
    return False


class RunCommandArgs(Args):
    command: str = Field(description="The command line, e.g. 'pytest -x tests'")
    cwd: str | None = Field(None, description="Working directory, relative to the workspace")
    timeout: float | None = Field(None, gt=0, description=f"Seconds (default {DEFAULT_TIMEOUT}, max {MAX_TIMEOUT})")


class RunCommand(Tool):
    name = "run_command"
    description = (
        "Run a command in the workspace and return its exit code and output. Plain argv lines run "
        "without a shell; pipes/redirections need the user's approval of the exact line."
    )
    args = RunCommandArgs
    read_only = False

    async def prepare(self, args: RunCommandArgs, ctx: ToolContext) -> Prepared:
        argv = split_command(args.command)
        cwd = ctx.paths.resolve(args.cwd or ".")
        if not cwd.is_dir():
            raise ToolError(f"cwd {args.cwd!r} is not a directory")
        timeout = min(args.timeout or DEFAULT_TIMEOUT, MAX_TIMEOUT)
        shell = needs_shell(args.command)
        where = ctx.paths.display(cwd)
        detail = f"$ {args.command}" + (f"   (in {where})" if where != "." else "") + ("   [runs in /bin/sh]" if shell else "")

        async def execute() -> str:
            note = ""
            if unsaved := ctx.workspace.unsaved():
                names = ", ".join(ctx.paths.display(p) for p in unsaved)
                note = f"\nnote: files the agent changed are still unsaved in the editor, so the command saw their old contents on disk: {names}"
            code, output, timed_out = await run_process(argv, args.command if shell else None, cwd, timeout, ctx)
            status = f"timed out after {timeout:g}s (killed)" if timed_out else f"exit code {code}"
            text = f"{status}\n{output}".rstrip() + note
            if timed_out or code != 0:
                raise ToolError(text)
            return text

        remember = args.command if where == "." else f"{args.command}   (in {where})"
        return Prepared(detail, execute, remember=remember, command=args.command)


async def run_process(argv: list[str], shell_line: str | None, cwd, timeout: float, ctx: ToolContext) -> tuple[int | None, str, bool]:
    """Run in its own process group, so a timeout or a cancel kills all of it."""
    spawn = dict(cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                 stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    try:
        if shell_line is not None:
            proc = await asyncio.create_subprocess_exec("/bin/sh", "-c", shell_line, **spawn)
        else:
            proc = await asyncio.create_subprocess_exec(*argv, **spawn)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    ctx.processes.add(proc)
    chunks: list[bytes] = []

    async def drain() -> None:
        size = 0
        assert proc.stdout is not None
        while data := await proc.stdout.read(65536):
            if size < MAX_CAPTURE:
                chunks.append(data)
            size += len(data)

    async def finish() -> None:  # one coroutine, not a gather: nothing left unretrieved on cancel
        await drain()
        await proc.wait()

    timed_out = False
    try:
        try:
            await asyncio.wait_for(finish(), timeout)
        except TimeoutError:
            timed_out = True
    finally:
        kill_group(proc)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 2)
        ctx.processes.discard(proc)
    return proc.returncode, b"".join(chunks).decode("utf-8", errors="replace"), timed_out


def kill_group(proc) -> None:
    if proc.returncode is not None and proc.pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)
