"""debug_start, debug_step, debug_eval, debug_stop (CONTRACT "The debugger (turn 4)", Decisions
61, 87, 88): the program under a real debugger, one session per run, ended with the run."""

from __future__ import annotations

import os
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_lsp.agent.display import show_command
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.agent.ports import debugger_of
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.command import split_command
from agent_lsp.agent.tools.debugger.editor import EditorDebugger
from agent_lsp.agent.tools.debugger.launcher import Debugger, DebugSource
from agent_lsp.agent.tools.debugger.session import Adapter, Breakpoint, DebugFailed, Launch
from agent_lsp.settings import DebugSettings
from agent_lsp.settings_schema import DebugAdapter

DEFAULT_TIMEOUT = 60
MAX_TIMEOUT = 600
DEBUG_TOOLS = frozenset({"debug_start", "debug_step", "debug_eval", "debug_stop"})
DEBUG_PROMPT = (
    "\nDebugger: when a Python program misbehaves and reading the code does not show why (a wrong "
    "value, a crash deep in a call, a condition that should not hold), run it with debug_start "
    "and a breakpoint (with a condition for one case of a loop) instead of adding prints: the "
    "stop shows the real locals and stack; debug_step moves on, debug_eval asks for any value. "
    "End with debug_stop. For output you only need to read, run_command is enough."
)
_FORMS = "`python[3] FILE args…` or `python[3] -m MODULE args…`"


class BreakpointArg(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    line: int = Field(ge=1)
    condition: str = Field("", description="stop only when true")


class DebugStartArgs(Args):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    program: str = Field("", description="a file (.py; .js in VS Code; any in debugAdapters)")
    module: str = Field("", description="or a module (python -m)")
    command: str = Field("", description=f"or {_FORMS}")
    args: list[str] = Field(default_factory=list)
    cwd: str = ""
    breakpoints: list[BreakpointArg] = Field(default_factory=list)
    stop_on_entry: bool = Field(False, alias="stopOnEntry")
    timeout: float = Field(
        0,
        ge=0,
        description=f"s to the first stop, then paused ({DEFAULT_TIMEOUT}, max {MAX_TIMEOUT})",
    )


class DebugStepArgs(Args):
    action: Literal["continue", "next", "stepIn", "stepOut"]
    breakpoints: list[BreakpointArg] = Field(
        default_factory=list, description="replace those files' breakpoints first"
    )
    timeout: float = Field(0, ge=0, description=f"s to the next stop ({DEFAULT_TIMEOUT})")


class DebugEvalArgs(Args):
    expression: str
    frame: int = Field(0, ge=0, description="index in frames:, 0 the top")


class DebugStopArgs(Args):
    pass


def _debugger(ctx: ToolContext) -> DebugSource:
    """The run's debug source, chosen at its first use (Decision 87): the editor's debugger
    when the client has one and the sandbox is off, else debugpy's adapter started here."""
    if ctx.runner is None:
        raise ToolError("the debugger is not available here")
    if ctx.debugger is None:
        editor = debugger_of(ctx.workspace)
        if editor is not None and not ctx.runner.sandboxed:
            ctx.debugger = EditorDebugger(editor.debug, lambda p: _shown(ctx, p))
        else:
            ctx.debugger = Debugger(ctx.runner, lambda p: _shown(ctx, p))
    return ctx.debugger


def _shown(ctx: ToolContext, path: str) -> str:
    try:
        return ctx.paths.display(ctx.paths.resolve(path))
    except ToolError:
        return path


def _breakpoints(ctx: ToolContext, given: list[BreakpointArg]) -> list[Breakpoint]:
    found = []
    for bp in given:
        path = ctx.paths.resolve(bp.path)
        if not path.is_file():
            raise ToolError(f"breakpoint file {bp.path!r} does not exist")
        found.append(Breakpoint(str(path), bp.line, bp.condition or None))
    return found


def _target(args: DebugStartArgs) -> tuple[str | None, str | None, list[str], list[str]]:
    """(program, module, args, the argv a `Debug(…)` rule matches). Decision 88: a command
    is `python[3] [-m M | file] args…`; its rule specifier is the whole line."""
    given = [x for x in (args.program, args.module, args.command) if x]
    if len(given) != 1:
        raise ToolError("give exactly one of program, module or command")
    if args.program:
        return args.program, None, args.args, [args.program]
    if args.module:
        return None, args.module, args.args, [args.module]
    argv = split_command(args.command or "")
    if os.path.basename(argv[0]) not in ("python", "python3") or len(argv) < 2:
        raise ToolError(f"debug_start runs Python commands only: {_FORMS}")
    if argv[1] == "-m":
        if len(argv) < 3:
            raise ToolError(f"`-m` needs a module: {_FORMS}")
        return None, argv[2], argv[3:] + args.args, argv
    if argv[1].startswith("-"):
        raise ToolError(f"debug_start takes no interpreter options: {_FORMS}")
    return argv[1], None, argv[2:] + args.args, argv


# a program's language by its extension, as `debugAdapters.*.languages` names it
LANGUAGES = {
    **dict.fromkeys((".py", ".pyw"), "python"),
    **dict.fromkeys((".js", ".mjs", ".cjs"), "javascript"),
    **dict.fromkeys((".ts", ".mts", ".cts"), "typescript"),
    **dict.fromkeys((".cc", ".cpp", ".cxx"), "cpp"),
    **{".go": "go", ".rs": "rust", ".rb": "ruby", ".c": "c", ".java": "java", ".php": "php"},
    **{".lua": "lua", ".sh": "bash", ".dart": "dart", ".cs": "csharp", ".swift": "swift"},
}


# a compiled program (an ELF file): what an adapter listing any of these debugs (lldb-dap, gdb)
NATIVE = frozenset({"native", "c", "cpp", "rust"})


def _language(program: str | None) -> tuple[str, str]:
    """(language, extension without the dot) of what is debugged; a module is Python, an ELF
    file `native`."""
    if program is None:
        return "python", "py"
    ext = os.path.splitext(program)[1].lower()
    if not ext and _is_elf(program):
        return "native", ""
    return LANGUAGES.get(ext, ext.lstrip(".")), ext.lstrip(".")


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _speaks(adapter: DebugAdapter, language: str, ext: str) -> bool:
    named = {x.lower().lstrip(".") for x in adapter.languages}
    return bool({language, ext} & named) or (language == "native" and bool(NATIVE & named))


def _pick_adapter(
    adapters: dict[str, DebugAdapter], program: str | None, path: str
) -> Adapter | None:
    """The `debugAdapters` entry for the program's language (its argv's program found on PATH's
    absolute entries), or None for debugpy; a language debugpy cannot run and no adapter for
    it is a ToolError."""
    language, ext = _language(program)
    for name, adapter in adapters.items():
        if _speaks(adapter, language, ext):
            found = find_program(adapter.command[0], path)
            if found is None:
                raise ToolError(
                    f"cannot debug: debugAdapters.{name}: {adapter.command[0]!r} is not an "
                    "executable program"
                )
            return Adapter(name, [found, *adapter.command[1:]])
    if language != "python" and (language in LANGUAGES.values() or language == "native"):
        raise ToolError(
            f"cannot debug {language} programs: debugpy runs Python; name an adapter for "
            f'{language} in the setting debugAdapters ({{"name": {{"command": [...], '
            f'"languages": ["{language}"]}}}})'
        )
    return None


def _timeout(given: float) -> float:
    return min(given or DEFAULT_TIMEOUT, MAX_TIMEOUT)


def _failed(exc: DebugFailed) -> ToolError:
    return ToolError(f"debugger: {exc}")


class DebugStart(Tool):
    name = "debug_start"
    description = (
        "Run a program under a debugger to the first stop (breakpoint, uncaught exception, entry) "
        "or the end: location, stack, top frame's locals, output. One session at a time."
    )
    args = DebugStartArgs
    read_only = False

    def __init__(self, settings: DebugSettings | None = None):
        self.settings = settings or DebugSettings()

    async def prepare(self, args: DebugStartArgs, ctx: ToolContext) -> Prepared:
        program, module, argv, rule_argv = _target(args)
        debugger = _debugger(ctx)
        cwd = ctx.paths.resolve(args.cwd or ".")
        if not cwd.is_dir():
            raise ToolError(f"cwd {args.cwd!r} is not a directory")
        if program is not None:
            resolved = (cwd / program).resolve()
            if not resolved.is_file():
                raise ToolError(f"program {program!r} does not exist")
            program = str(resolved)
        editor = isinstance(debugger, EditorDebugger)
        path = ctx.runner.env.get("PATH", "") if ctx.runner is not None else ""
        adapter = None if editor else _pick_adapter(self.settings.adapters, program, path)
        python = self._python(path) if not editor and adapter is None else "python3"
        breakpoints = _breakpoints(ctx, args.breakpoints)
        launch = Launch(python, program, module, argv, str(cwd), args.stop_on_entry, adapter)
        # what the user approves: `python3` only where Python runs it (not node in the editor)
        python_runs = adapter is None and _language(program)[0] == "python"
        target = f"{'python3 ' if python_runs else ''}{'-m ' + module if module else args.program}"
        shown = args.command or f"{target} {shlex.join(argv)}".strip()
        where = ctx.paths.display(cwd)
        detail = f"debug: $ {show_command(shown)}" + (f"   (in {where})" if where != "." else "")
        if editor:
            detail += "\nruns in the editor's debugger"
        elif adapter is not None:
            detail += f"\ndebug adapter {adapter.name}: $ {show_command(shlex.join(adapter.argv))}"
        elif ctx.runner is not None and ctx.runner.sandboxed:
            detail += f"\n{ctx.runner.describe()}"
        timeout = _timeout(args.timeout)

        async def execute() -> str:
            try:
                return (await debugger.start(launch, breakpoints, timeout)).text()
            except DebugFailed as exc:
                raise _failed(exc) from None

        sandboxed = not editor and ctx.runner is not None and ctx.runner.sandboxed
        return Prepared(detail, execute, rule_argv=rule_argv, sandboxed=sandboxed)

    def _python(self, path: str) -> str:
        """The debugged interpreter: PATH's absolute entries only (Decision 62)."""
        python = self.settings.python or "python3"
        found = find_program(python, path)
        if found is None:
            raise ToolError(
                f"cannot debug: debug.python {python!r} is not an executable program"
                if self.settings.python
                else "cannot debug: no python3 on the PATH (or set debug.python)"
            )
        return found


class DebugStep(Tool):
    name = "debug_step"
    description = "Move the stopped program to its next stop (as debug_start shows it)."
    args = DebugStepArgs
    read_only = True  # not asked (Decision 61): debug_start was

    def writes(self, raw: dict[str, object], parent: list[Tool]) -> bool:
        return True  # the program moves: in order, alone

    async def prepare(self, args: DebugStepArgs, ctx: ToolContext) -> Prepared:
        debugger = _debugger(ctx)
        breakpoints = _breakpoints(ctx, args.breakpoints)
        timeout = _timeout(args.timeout)

        async def execute() -> str:
            try:
                return (await debugger.step(args.action, breakpoints, timeout)).text()
            except DebugFailed as exc:
                raise _failed(exc) from None

        return Prepared(f"debug: {args.action}", execute)


class DebugEval(Tool):
    name = "debug_eval"
    description = "Evaluate an expression in the stopped program (it may change its state)."
    args = DebugEvalArgs

    def __init__(self, settings: DebugSettings | None = None):
        # asked unless debug.evalWithoutAsking (Decision 61)
        self.read_only = (settings or DebugSettings()).eval_without_asking

    def writes(self, raw: dict[str, object], parent: list[Tool]) -> bool:
        return True

    async def prepare(self, args: DebugEvalArgs, ctx: ToolContext) -> Prepared:
        debugger = _debugger(ctx)

        async def execute() -> str:
            try:
                value, kind = await debugger.evaluate(args.expression, args.frame)
            except DebugFailed as exc:
                raise _failed(exc) from None
            return f"{args.expression} ({kind}) = {value}"

        detail = f"debug: evaluate {show_command(args.expression)}"
        return Prepared(detail, execute)


class DebugStop(Tool):
    name = "debug_stop"
    description = "End the debug session and the debugged program."
    args = DebugStopArgs
    read_only = True

    def writes(self, raw: dict[str, object], parent: list[Tool]) -> bool:
        return True

    async def prepare(self, args: DebugStopArgs, ctx: ToolContext) -> Prepared:
        debugger = _debugger(ctx)

        async def execute() -> str:
            try:
                return await debugger.finish()
            except DebugFailed as exc:
                raise _failed(exc) from None

        return Prepared("debug: stop", execute)


def debug_tools(settings: DebugSettings | None = None) -> list[Tool]:
    return [DebugStart(settings), DebugStep(), DebugEval(settings), DebugStop()]
