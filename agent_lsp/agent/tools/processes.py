"""Background processes as the model sees them (CONTRACT "Background processes", Decisions 60
and 86): `run_command {background: true}` starts one (asked like any command), `process_output`
reads what came since the last read and `stop_process` ends one. The two are not asked: they
reach only this run's own processes."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from agent_lsp.agent.exec.background import MAX_PER_RUN, BackgroundProcess, BackgroundProcesses
from agent_lsp.agent.exec.process import CommandNotStarted
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError


def _background(ctx: ToolContext) -> BackgroundProcesses:
    if ctx.background is None:
        raise ToolError("background processes are not available here")
    return ctx.background


def background_note(ctx: ToolContext) -> str:
    """What the approval adds for a background command. Before asking, the run's limit
    (Decision 60's message) refuses the call outright."""
    try:
        _background(ctx).check_room()
    except ValueError as exc:
        raise ToolError(
            f"refused: {exc} (this run has started its {MAX_PER_RUN}; stopping one does not "
            "free a place): run the command without `background`. Nothing ran."
        ) from None
    return "\n(in the background: it runs on until stopped or the run ends)"


async def start_background(ctx: ToolContext, argv: list[str], cwd: Path, command: str) -> str:
    """Start the command, wait about a second, and answer its processId and the output so far
    (the first read). Changes it makes are recorded when it ends or the run ends."""
    background, runner = _background(ctx), ctx.runner
    if runner is None:
        raise ToolError("run_command is not available here")
    checkpoint = ctx.checkpoint
    before = await checkpoint.before_command() if checkpoint is not None else None

    async def on_end() -> None:
        if checkpoint is not None and before is not None:
            for path in await checkpoint.after_command(before):
                ctx.changes.add(path)

    confined, _ = await runner.wrap(argv, cwd)
    try:
        entry = await background.start(
            confined, cwd, runner.child_env(), command, group=runner.processes, on_end=on_end
        )
    except ValueError as exc:
        raise ToolError(f"refused: {exc}. Nothing ran.") from None
    except CommandNotStarted as exc:
        raise ToolError(str(exc)) from None
    finally:
        confined.close()
    await entry.first_wait()
    text = read_text(entry, first=True)
    if entry.state == "exited" and entry.exit_code != 0:
        raise ToolError(text)
    return text


def read_text(entry: BackgroundProcess, *, first: bool = False) -> str:
    """`processId: p1 (running)` and the output since the last read, capped like
    run_command's."""
    output = entry.take_output()
    head = f"processId: {entry.process_id} ({entry.status()})"
    if first and entry.state == "running":
        head += "; read its later output with process_output, end it with stop_process"
    if output.dropped_bytes:
        head += (
            f"; {output.total_bytes} bytes came since the last read: the first and last "
            f"megabytes are kept below and {output.dropped_bytes} bytes in the middle were "
            "dropped (not saved anywhere)"
        )
    body = output.text.rstrip() or "(no new output)"
    return f"{head}\n{body}"


class ProcessArgs(Args):
    process_id: str = Field(alias="processId", description="p1..p4, as run_command answered")


class ProcessTool(Tool):
    """Offered (its schema in the request) once this run started a background process: most
    runs never do, and every request would carry the schema. A call naming it (a resumed
    session's history) works anyway."""

    args = ProcessArgs

    def offered(self, ctx: ToolContext | None) -> bool:
        return ctx is not None and ctx.background is not None and bool(ctx.background.processes)


def _entry(ctx: ToolContext, process_id: str) -> BackgroundProcess:
    background = _background(ctx)
    entry = background.get(process_id)
    if entry is None:
        known = ", ".join(background.processes) or "none yet"
        raise ToolError(f"no background process {process_id!r} in this run (this run's: {known})")
    return entry


class ProcessOutput(ProcessTool):
    name = "process_output"
    description = (
        "What a background process wrote since the last read, and its exit code once it ended."
    )
    read_only = True  # not asked: this run's own processes only (Decision 86)

    async def prepare(self, args: ProcessArgs, ctx: ToolContext) -> Prepared:
        entry = _entry(ctx, args.process_id)

        async def execute() -> str:
            return read_text(entry)

        return Prepared(f"output of {entry.process_id}", execute)


class StopProcess(ProcessTool):
    name = "stop_process"
    description = "End a background process of this run and everything it started."
    read_only = True  # not asked: this run's own processes only (Decision 86)

    def writes(self, raw: dict[str, object], parent: list[Tool]) -> bool:
        return True  # in order, alone

    async def prepare(self, args: ProcessArgs, ctx: ToolContext) -> Prepared:
        entry = _entry(ctx, args.process_id)
        background = _background(ctx)

        async def execute() -> str:
            stopped = await background.stop(entry.process_id)
            if not stopped:
                return read_text(entry).replace(
                    f"({entry.status()})", f"({entry.status()}; it had already ended)", 1
                )
            return read_text(entry)

        return Prepared(f"stop {entry.process_id}: {entry.command}", execute)


def process_tools() -> list[Tool]:
    return [ProcessOutput(), StopProcess()]
