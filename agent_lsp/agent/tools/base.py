"""What a tool is: a pydantic argument model, a read-only flag, and prepare -> execute."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_lsp.agent.ports import SubAgentSpawner, Workspace

# Re-exported: ctx.changes is the run record's own RunChanges (agent_lsp.agent.state.changes).
from agent_lsp.agent.state.changes import RunChanges as RunChanges

# Re-exported: a tool module imports its errors with the rest of the tool API.
from agent_lsp.agent.tools.errors import EditRejected as EditRejected
from agent_lsp.agent.tools.errors import ToolError as ToolError
from agent_lsp.agent.tools.hunks import Hunk
from agent_lsp.agent.tools.paths import PathGuard

if TYPE_CHECKING:
    from agent_lsp.agent.exec.background import BackgroundProcesses
    from agent_lsp.agent.fs.prompt_files import PromptFiles
    from agent_lsp.agent.state.checkpoints import RunCheckpoint
    from agent_lsp.agent.tools.codeintel.sources import CodeIntel
    from agent_lsp.agent.tools.debugger.launcher import DebugSource
    from agent_lsp.agent.tools.runner import CommandRunner


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass
class ToolContext:
    """What tools may touch: the workspace (through its port), paths, commands, sub-agents,
    the run's checkpoint and the record of changed files."""

    workspace: Workspace
    paths: PathGuard
    changes: RunChanges = field(default_factory=RunChanges)
    processes: set[Any] = field(default_factory=set)
    spawn_subagent: SubAgentSpawner | None = None
    runner: CommandRunner | None = None
    checkpoint: RunCheckpoint | None = None
    # a status line for the user (e.g. after the run ended)
    notify: Callable[[str], None] | None = None
    # the language-server sources, when the run offers the code-intel tools
    code_intel: CodeIntel | None = None
    # The user's skills and agents (the skill and delegate tools); none found: None.
    prompt_files: PromptFiles | None = None
    # Makes a file outside the workspace readable for the session (a loaded skill's files).
    allow_read: Callable[[Path], None] | None = None
    # files a `Read(…)` deny rule hides from search and list_files results
    hidden: Callable[[Path], bool] | None = None
    # the run's one debug session (debug_* tools), made at the first debug call
    debugger: DebugSource | None = None
    # the run's background processes (run_command {background}, process_output, stop_process)
    background: BackgroundProcesses | None = None


@dataclass(frozen=True)
class CommandExit:
    """How a command that ran ended (PostToolUse's `exit_code`/`interrupted`): its exit code, or
    None when it was killed at its timeout."""

    code: int | None
    timed_out: bool = False


@dataclass
class CommandPlan:
    """What a command call would run: what the policy matches (argv, not through a shell, in
    the workspace, sandboxed) and what "Allow for session" remembers."""

    command: str
    argv: list[str] | None = None
    shell: bool = False
    cwd: Path | None = None
    roots: list[Path] = field(default_factory=list)
    remember: str | None = None
    sandboxed: bool = False
    ended: CommandExit | None = None  # set once the command ran


@dataclass
class Prepared:
    """A validated call: `detail` says exactly what would run or change (for approval)."""

    detail: str
    execute: Callable[[], Awaitable[str]]
    # Edits: the editor's own preview applies the edit and asks (CONTRACT "Edit review").
    preview: Callable[[], Awaitable[str]] | None = None
    uri: str | None = None
    diff: str | None = None
    new_text: str | None = None
    command: CommandPlan | None = None  # a command's plan; None for every other tool
    # Why a person must answer even where a policy, `--yes` or a session grant would allow
    # (CONTRACT Decision 26: a repository whose git config runs programs).
    must_ask: str | None = None
    show_tail: bool = False  # the user sees the last lines of the result (a command's output)
    # A multi-file edit (rename_symbol): each file's `{uri, diff}`; `diff` then holds them all.
    files: list[dict[str, str]] | None = None
    file_texts: list[tuple[str, str, str]] | None = None  # each file's (uri, old, new text)
    # File tools: each path the call touches, as given (absolute, not resolved) and resolved,
    # for path rules (CONTRACT Decision 28); `shown_path` names a writer's file in a rule.
    paths: list[tuple[Path, Path]] = field(default_factory=list)
    shown_path: str | None = None
    # What a `Tool(specifier)` rule of a tool without paths or a command plan matches, as argv
    # (debug_start: the program or module as given, or its command line; Decision 88).
    rule_argv: list[str] | None = None
    sandboxed: bool = False  # a call without a command plan that runs in the sandbox (debug_start)
    # Edits: each file's (uri, hunks), hunk indices global across the call (Decision 80), and
    # the run that applies only the chosen hunks (the user kept some: `agentLsp.approve {hunks}`).
    # Computed when first asked for (an approval, a preview): an edit allowed without asking
    # pays no second diff.
    hunk_source: Callable[[], list[tuple[str, list[Hunk]]]] | None = None
    apply_hunks: Callable[[set[int]], Awaitable[str]] | None = None

    @functools.cached_property
    def hunks(self) -> list[tuple[str, list[Hunk]]]:
        return self.hunk_source() if self.hunk_source is not None else []
    # Edits: recompute `detail`, `diff` and `new_text` on the file as it is when the approval is
    # asked (merged with what changed since the read), so the diff shown is the one that lands.
    refresh: Callable[[], Awaitable[None]] | None = None


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    args: ClassVar[type[Args]]
    read_only: bool = True
    aliases: tuple[str, ...] = ()  # other names approval.tools may use for it
    # names that may mean it or another tool: their deny/ask apply, never allow
    contested_aliases: tuple[str, ...] = ()

    @property
    def grant_key(self) -> str:
        """What "Allow for session" remembers for this tool."""
        return self.name

    def schema(self) -> dict[str, Any]:
        """Read-only (the loops encode it, nobody changes it): built once per tool class, since
        pydantic's schema generation costs ~5 ms a tool, and shared by every run."""
        return _schema_of(self.name, self.description, self.args)

    def offered(self, ctx: ToolContext | None) -> bool:
        """Whether the model sees its schema now; a tool it does not see stays callable. `ctx`
        None: a run that has done nothing yet."""
        return True

    def parse(self, raw: dict[str, Any]) -> Any:
        try:
            return self.args.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None

    async def prepare(self, args: Any, ctx: ToolContext) -> Prepared:
        raise NotImplementedError

    def writes(self, raw: dict[str, Any], parent: list[Tool]) -> bool:
        """Whether this call has side effects (it then runs alone, in order); `parent`: the
        calling loop's tools."""
        return not self.read_only


@runtime_checkable
class ServedTool(Protocol):
    """A tool another server serves (an MCP server's): rules and hooks name it
    `mcp__<server>__<tool>`, and "Always allow" saves that name for a user's or ACP's server."""

    name: str
    server: str
    raw_name: str  # `<server>__<tool>`
    source: str  # where the server is declared: user, acp, project


def served(tool: Tool | None) -> ServedTool | None:
    """The tool as a served one, when it is (checked here once)."""
    return tool if isinstance(tool, ServedTool) else None


@functools.cache
def _schema_of(name: str, description: str, args: type[Args]) -> dict[str, Any]:
    params = args.model_json_schema()
    params.pop("title", None)
    for prop in params.get("properties", {}).values():
        prop.pop("title", None)
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": params},
    }


# toolsets' schema lists by their schemas' identities (the schemas kept, so no id is reused)
_SCHEMA_LISTS: dict[tuple[int, ...], tuple[tuple[dict[str, Any], ...], list[dict[str, Any]]]] = {}
SCHEMA_LISTS_KEPT = 64


class ToolBox:
    """The tools one agent may use, by name."""

    def __init__(self, tools: list[Tool], withheld: list[Tool] | None = None):
        self.tools = {t.name: t for t in tools}
        # Tools a deny takes off the list the model sees: a call naming one anyway (seen earlier
        # in the session) still reaches the policy, which denies it, saying why.
        self.withheld = {t.name: t for t in withheld or [] if t.name not in self.tools}

    def schemas(self, ctx: ToolContext | None = None) -> list[dict[str, Any]]:
        """The schemas of the tools offered now (`ctx`: the run's; None: a run that has done
        nothing yet). The same list object for the same schemas: a request encodes a list it
        has seen once (model/request_body.py), so 20 runs with one toolset encode it once."""
        schemas = tuple(t.schema() for t in self.tools.values() if t.offered(ctx))
        key = tuple(map(id, schemas))
        kept = _SCHEMA_LISTS.get(key)
        if kept is not None and all(a is b for a, b in zip(kept[0], schemas, strict=True)):
            return kept[1]
        if len(_SCHEMA_LISTS) >= SCHEMA_LISTS_KEPT:
            _SCHEMA_LISTS.pop(next(iter(_SCHEMA_LISTS)))
        _SCHEMA_LISTS[key] = (schemas, list(schemas))
        return _SCHEMA_LISTS[key][1]

    def get(self, name: str) -> Tool:
        tool = self.tools.get(name) or self.withheld.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; the tools are: {', '.join(self.tools)}")
        return tool
