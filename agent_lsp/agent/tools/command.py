"""run_command: argv without a shell (a shell only for a line the user approved as such)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from agent_lsp.agent.display import show_command
from agent_lsp.agent.exec.background import MAX_PER_RUN
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.agent.state.gitsafe import executing_config, mentions_git
from agent_lsp.agent.tools.base import (
    Args,
    CommandExit,
    CommandPlan,
    Prepared,
    Tool,
    ToolContext,
    ToolError,
)
from agent_lsp.agent.tools.processes import background_note, start_background

if TYPE_CHECKING:
    from agent_lsp.agent.tools.runner import CommandRunner

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
# Anything a shell would interpret. Conservative on purpose: a line with any of these never
# matches an allowCommands entry and, if approved, runs under /bin/sh exactly as shown.
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


class RunCommandArgs(Args):
    command: str = Field(description="The command line, e.g. 'pytest -x tests'")
    cwd: str | None = Field(None, description="Working directory, relative to the workspace")
    timeout: float | None = Field(
        None, gt=0, description=f"Seconds (default {DEFAULT_TIMEOUT}, max {MAX_TIMEOUT})"
    )
    background: bool = Field(
        False,
        description="Keep it running (a server, a watcher): answers its processId and first "
        f"output; at most {MAX_PER_RUN} per run",
    )


class RunCommand(Tool):
    name = "run_command"
    description = (
        "Run a command in the workspace and return its exit code and output. Plain argv lines run "
        "without a shell; pipes/redirections need the user's approval of the exact line. Every "
        "process it starts ends with it, unless `background`: then with the run at the latest."
    )
    args = RunCommandArgs
    read_only = False

    async def prepare(self, args: RunCommandArgs, ctx: ToolContext) -> Prepared:
        argv = split_command(args.command)
        cwd = ctx.paths.resolve(args.cwd or ".")
        if not cwd.is_dir():
            raise ToolError(f"cwd {args.cwd!r} is not a directory")
        runner = ctx.runner
        if runner is None:
            raise ToolError("run_command is not available here")
        timeout = min(args.timeout or DEFAULT_TIMEOUT, MAX_TIMEOUT)
        shell = needs_shell(args.command)
        _check_program(argv, runner, shell)
        where = ctx.paths.display(cwd)
        detail = (
            f"$ {show_command(args.command)}"
            + (f"   (in {where})" if where != "." else "")
            + ("   [runs in /bin/sh]" if shell else "")
        )
        if runner.sandboxed:
            detail += f"\n{runner.describe()}"
        run_argv = ["/bin/sh", "-c", args.command] if shell else argv
        detail += background_note(ctx) if args.background else ""

        async def execute() -> str:
            if args.background:
                return await start_background(ctx, run_argv, cwd, args.command)
            edited = list(ctx.changes)
            unsaved = await ctx.workspace.unsaved(edited) if edited else []
            note = ""
            if unsaved:
                names = ", ".join(ctx.paths.display(p) for p in unsaved)
                note = (
                    "\nnote: files the agent changed are still unsaved in the editor, "
                    f"so the command saw their old contents on disk: {names}"
                )
            checkpoint = ctx.checkpoint
            before = await checkpoint.before_command() if checkpoint is not None else None
            try:
                result, blocked = await runner.run(run_argv, cwd, timeout)
            finally:
                if checkpoint is not None and before is not None:
                    for path in await checkpoint.after_command(before):
                        ctx.changes.add(path)
            plan.ended = CommandExit(None if result.timed_out else result.code, result.timed_out)
            status = (
                f"timed out after {timeout:g}s (killed, with every process it started)"
                if result.timed_out
                else f"exit code {result.code}"
            )
            if result.dropped_bytes:
                status += (
                    f"; the output was {result.total_bytes} bytes: "
                    "the first and last megabytes are kept below and "
                    f"{result.dropped_bytes} bytes in the middle were dropped (not saved anywhere)"
                )
            text = f"{status}\n{result.output}".rstrip() + note
            if blocked:
                text += f"\n{blocked}"
            if result.timed_out or result.code != 0:
                raise ToolError(text)
            return text

        remember = args.command if where == "." else f"{args.command}   (in {where})"
        must_ask = await _risky_git(args.command, cwd)
        if must_ask:
            detail += f"\n{must_ask}"
        plan = CommandPlan(
            args.command,
            argv=argv,
            shell=shell,
            cwd=cwd,
            roots=ctx.paths.roots,
            remember=remember,
            sandboxed=runner.sandboxed,
        )
        return Prepared(detail, execute, command=plan, show_tail=True, must_ask=must_ask)


def _check_program(argv: list[str], runner: CommandRunner, shell: bool) -> None:
    if (
        not shell
        and not runner.sandboxed
        and find_program(argv[0], runner.env.get("PATH", "")) is None
        and "/" not in argv[0]
    ):
        raise ToolError(f"cannot start {argv[0]!r}: no such command on the PATH")


async def _risky_git(command: str, cwd: Path) -> str | None:
    """A git command in a repository whose own config or hooks run programs asks, whatever
    allows it otherwise (CONTRACT Decision 45)."""
    try:
        tokens = list(shlex.shlex(command, posix=True, punctuation_chars=True))
    except ValueError:
        tokens = command.split()
    if not mentions_git(tokens):
        return None
    found = await executing_config(cwd)
    if not found:
        return None
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return f"asks: this repository's git config runs programs ({shown})"
