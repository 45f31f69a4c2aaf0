"""The interfaces the core needs from its host (the LSP server, the ACP server, the terminal)."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agent_lsp.agent.events import Event
from agent_lsp.agent.messages import Reply, ToolCall


@dataclass
class Document:
    """A file's text as the agent saw it; version is the editor buffer's (None: disk).
    `exact`: the text is the file's bytes exactly (valid UTF-8, no NUL), so an edit computed on
    it changes nothing else."""

    path: Path
    text: str
    version: int | None = None
    exact: bool = True


@dataclass
class EditOutcome:
    applied: bool
    message: str = ""
    rejected: bool = False  # the user said no in the editor's own preview
    version: int | None = None  # the editor buffer's version once the edit is in (for diagnostics)
    # A previewed edit whose hunks the user could untick: the file's text once it was applied
    # (the tool learns from it which hunks landed, Decision 80).
    text: str | None = None
    # ... the same for a previewed edit of several files (a rename): the text of each file that
    # did not get all of its hunks
    texts: dict[Path, str] = field(default_factory=dict)
    # Co-editing (CONTRACT "Working beside the user"): the files whose text changed while the
    # edit waited and was merged with it, with the text each holds now (not the agent's `after`)
    landed: dict[Path, str] = field(default_factory=dict)
    # ... and the text each of those held just before (what a rewind of the edit puts back)
    merged_onto: dict[Path, str] = field(default_factory=dict)
    conflict: bool = False  # the user's changes overlap the edit: nothing was applied


@dataclass
class FileChange:
    """One file of a multi-file edit (a rename): its text as the agent read it, and the text
    it gets."""

    path: Path
    before: Document
    after: str


class Workspace(Protocol):
    """Reads see the editor's buffers; writes are proposals the host applies."""

    roots: list[Path]

    async def read(self, path: Path) -> Document:
        """The current text: the open buffer if there is one, else the file on disk."""
        ...

    async def apply(
        self,
        path: Path,
        before: Document | None,
        after: str,
        *,
        preview: str | None = None,
        late: Callable[[], None] | None = None,
    ) -> EditOutcome:
        """Replace the file's text (before=None: create it). Never raises for a refusal.
        `preview`: the editor shows the edit and asks (its label); applied=False, rejected=True
        when the user declined there. `late`: called if the run stopped waiting (a cancel) and
        the editor applied the previewed edit afterwards."""
        ...

    async def apply_all(
        self,
        changes: list[FileChange],
        *,
        label: str,
        preview: str | None = None,
        late: Callable[[], None] | None = None,
    ) -> EditOutcome:
        """Replace several files' text as ONE change where the host can (the LSP server: one
        `workspace/applyEdit`, all or nothing), else file by file in order (a failure stops
        there; the outcome's message says which files were written). Never raises.
        `preview`/`late`: as for `apply`, for the whole change (one preview of every file)."""
        ...

    def open_texts(self) -> dict[Path, str]:
        """Open buffers whose text may differ from disk (search sees these)."""
        ...

    async def unsaved(self, paths: list[Path]) -> list[Path]:
        """Those of `paths` whose editor buffer differs from the file on disk."""
        ...


# -- a workspace's optional features: each a Protocol, checked here once -------------------------


@runtime_checkable
class NamedFolders(Protocol):
    """A workspace whose roots have the editor's folder names (shown instead of paths)."""

    names: list[str] | None


@runtime_checkable
class WorkspaceDiagnostics(Protocol):
    """A workspace that can say what the editor (or a started language server) shows."""

    @property
    def has_diagnostics(self) -> bool:
        """Whether `diagnostics` answers (the client's capability)."""
        ...

    async def diagnostics(
        self, paths: list[Path] | None, after: dict[Path, int] | None
    ) -> list[dict[str, Any]] | None:
        """The problems shown for those files (all when None); with `after`, once the editor
        has them for that version. None when nobody answers in time."""
        ...


@runtime_checkable
class WorkspaceDebugger(Protocol):
    """A workspace whose editor drives its own debugger (`agentLsp/debug`, Decision 61)."""

    @property
    def has_debugger(self) -> bool: ...

    async def debug(self, params: dict[str, Any], timeout: float) -> Any: ...


def folder_names(workspace: Workspace) -> list[str] | None:
    return workspace.names if isinstance(workspace, NamedFolders) else None


def diagnostics_of(workspace: Workspace) -> WorkspaceDiagnostics | None:
    """The workspace's diagnostics, when it has the feature at all."""
    return workspace if isinstance(workspace, WorkspaceDiagnostics) else None


def answers_diagnostics(workspace: Workspace) -> bool:
    """Whether the workspace's diagnostics answer (the diagnostics tool is offered)."""
    found = diagnostics_of(workspace)
    return found is not None and found.has_diagnostics


@runtime_checkable
class WorkspaceAnnouncer(Protocol):
    """A workspace whose editor can show the user a line outside any run's stream (an edit
    applied in the preview after its run stopped: Decision 73)."""

    def announce(self, text: str) -> None: ...


def announcer_of(workspace: Workspace) -> WorkspaceAnnouncer | None:
    return workspace if isinstance(workspace, WorkspaceAnnouncer) else None


def debugger_of(workspace: Workspace) -> WorkspaceDebugger | None:
    """The editor's own debugger, when the client has one."""
    found = workspace if isinstance(workspace, WorkspaceDebugger) else None
    return found if found is not None and found.has_debugger else None


class Decision(enum.StrEnum):
    ALLOW = "allow"
    ALLOW_SESSION = "allowSession"
    ALLOW_ALWAYS = "allowAlways"  # the request's `always_rule` saved in the user settings file
    DENY = "deny"
    WITHDRAWN = "withdrawn"  # nobody answered in time, or the run was cancelled
    PREVIEW = "preview"  # an edit goes to the editor's own preview, which asks


@dataclass
class Answer:
    """An approver's answer: the decision, the user's own reason (optional), and why a denial
    happened in words for the model ("the user said no", "no one could be asked", ...)."""

    decision: Decision
    reason: str | None = None
    why: str | None = None
    hunks: tuple[int, ...] | None = None  # an allow of these hunks only (0-based, Decision 58)


@dataclass
class ApprovalRequest:
    call_id: str
    tool: str
    detail: str  # exactly what would run or change, invisible characters escaped
    agent_id: str = "main"
    uri: str | None = None  # edits: the file, its unified diff and new text
    diff: str | None = None
    diff_truncated: bool = False
    new_text: str | None = None
    can_preview: bool = False  # an edit the editor's own preview may ask for
    must_ask: str | None = None  # why a person must answer (`--yes` does not): risky git config
    files: list[dict[str, str]] | None = None  # a multi-file edit: each file's {uri, diff}
    # ... and each file's (uri, old text, new text), for a client that shows diffs itself (ACP)
    file_texts: list[tuple[str, str, str]] | None = None
    # The exact rule "Always allow" saves (`Bash(npm test)`); None: the choice is not offered.
    always_rule: str | None = None
    # Every edit's files with their hunks, `{uri, diff, hunks: [{index, header}]}` (Decision 80);
    # `hunks` is empty when the diff was cut (no hunk choice then).
    hunk_files: list[dict[str, Any]] | None = None

    @property
    def hunk_count(self) -> int:
        return sum(len(f["hunks"]) for f in self.hunk_files or [])


class Approver(Protocol):
    async def ask(self, request: ApprovalRequest) -> Answer | Decision: ...


def as_answer(value: Answer | Decision) -> Answer:
    return value if isinstance(value, Answer) else Answer(value)


EventSink = Callable[[Event], None]


# Called in the model's order when a delegate call is prepared (so sub-agent ids are
# deterministic for replay); the returned callable runs the sub-agent and gives its summary.
class SubAgentSpawner(Protocol):
    """`agent`: the user's agent definition the sub-agent follows (its prompt, tools, model)."""

    def __call__(self, task: str, agent: Any = None) -> Callable[[], Awaitable[str]]: ...


class ToolSet(Protocol):
    """One workspace's tool servers as a run sees them (an MCP manager)."""

    async def tools(self) -> list[Any]: ...

    def status(self) -> list[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


class ToolServers(Protocol):
    """Integrations that give runs more tools (MCP servers). A front end's composition code
    plugs one into the host; the core imports no integration."""

    async def toolset(
        self, roots: list[Path], settings: Any, extra: list[Any] | None = None
    ) -> ToolSet: ...

    async def status(self, roots: list[Path], settings: Any) -> list[dict[str, Any]]: ...

    async def retire(self, in_use: list[Any]) -> None:
        """Close what was replaced and no running run uses."""
        ...

    async def aclose(self) -> None: ...


@dataclass
class RunPermissions:
    """A run's rules from beyond its settings (agent_lsp.agent.policy.rules.Rule objects), and
    where "Always allow" saves a rule (None: the choice is not offered, Decision 27)."""

    rules: list[Any] = field(default_factory=list)
    save_always: Callable[[str], Awaitable[None]] | None = None
    # Whether a project hook (a HookSpec) has the user's consent (Decision 30); None: none has.
    hook_consent: Callable[[Any], bool] | None = None
    # Claude Code's files as read for these rules (policy/claude_files.py ClaudeFile objects):
    # the run's hooks come from the same reading. None: the hooks read them themselves.
    claude_files: list[Any] | None = None
    # The project's `verify` (a VerifySettings) the user consented to (Decision 83); None: none.
    verify: Any = None


class PermissionSource(Protocol):
    """Permission rules from beyond the settings (Claude Code's files; a project's allow rules
    after the user's consent) and "Always allow". A front end's composition code plugs one into
    the host."""

    async def for_run(self, roots: list[Path], settings: Any) -> RunPermissions: ...


# -- code intelligence: who answers LSP requests about the agent's files ---------------------


class CodeIntelError(Exception):
    """A source could not answer (a crashed server after its one retry, a refused request):
    the message is shown to the model as the tool's error."""


class CodeIntelSource(Protocol):
    """One source of language-server answers (CONTRACT "Code intelligence"): the editor
    (`agentLsp/codeIntel`), or the language servers agent-lsp starts itself. Sources are
    asked in order, first that `handles` the file; an empty/None answer falls through to the
    next source only when it handles the file too (Decision 39); results are never merged."""

    name: str  # "editor", or the started server's name (for `agentLsp.setup` and errors)

    def handles(self, path: Path) -> bool:
        """Whether this source may be asked about `path` (by its extension/language)."""
        ...

    def position_encoding(self, path: Path) -> str:
        """How `character` offsets in params and results count for `path`:
        "utf-16" (the LSP default), "utf-8" or "utf-32"."""
        ...

    async def sync(self, path: Path, text: str) -> None:
        """The agent read or changed `path` and this is its text now (a started server gets
        didOpen/didChange; the editor, which owns its buffers, ignores it)."""
        ...

    async def request(self, method: str, params: dict[str, Any], path: Path) -> Any:
        """Send the LSP request `method` (textDocument/definition, .../references, .../hover,
        .../documentSymbol, workspace/symbol, .../prepareCallHierarchy,
        callHierarchy/incomingCalls|outgoingCalls, .../prepareRename, .../rename) with its
        LSP `params` (JSON-shaped, camelCase); the LSP result as JSON, or None when nothing
        answers. Raises CodeIntelError when the source failed. A source may also have
        `caveat(method, path) -> str | None`: why its answer to `method` about `path` may be
        incomplete (a started server still reading the workspace past its wait); the tools
        add it to their result as a note."""
        ...


# A front end's composition code plugs this into the host: a run's workspace roots -> the sources
# the code-intel tools ask, in order (the editor first, then the started servers); [] when none
# exists. Called once per run; the tools are offered when a session's first run got a source.
CodeIntelSources = Callable[[list[Path]], list[CodeIntelSource]]


# -- rewind: what the front end's workspace is asked to put back ------------------------------
@dataclass
class Restore:
    path: Path
    content: bytes | None  # None: delete the file (the run created it)
    current: bytes | None  # what it holds now (None: absent)


@dataclass
class RestoreOutcome:
    restored: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)  # not restorable, with why


class Restorer(Protocol):
    async def restore(self, restores: list[Restore]) -> RestoreOutcome:
        """Apply every restore as one change where the host can (one applyEdit)."""
        ...


# -- telemetry: what the loop tells a tracer at its nodes (CONTRACT "Headless at scale") --------
class TraceSpan(Protocol):
    """One span of a run's trace: an agent, a model call or a tool call."""

    def event(self, name: str, attributes: Mapping[str, str | bool | int]) -> None: ...

    def traceparent(self) -> str | None:
        """The span as a W3C `traceparent` (None: not recorded)."""
        ...


class RunTelemetry(Protocol):
    """One run's trace and metrics. The loop calls it at its nodes; spans are handed back
    explicitly (read-only calls and sub-agents run concurrently)."""

    def agent_started(self, agent_id: str, parent: TraceSpan | None) -> TraceSpan: ...

    def agent_ended(self, span: TraceSpan, stop: str, cause: str, error: str | None = None) -> None:
        """`stop` the stop reason, `cause` the typed stop cause (a cancel: both `cancelled`)."""
        ...

    def chat_started(
        self, parent: TraceSpan, model: str, messages: list[dict[str, Any]]
    ) -> TraceSpan: ...

    def chat_ended(
        self, span: TraceSpan, reply: Reply | None, error: str | None = None
    ) -> None: ...

    def tool_started(self, parent: TraceSpan, call: ToolCall) -> TraceSpan: ...

    def tool_ended(self, span: TraceSpan, outcome: str, decision: str | None) -> None: ...


class Telemetry(Protocol):
    """An integration that records runs (OpenTelemetry), plugged into the host by a front end's
    composition code; the core imports none."""

    def for_run(
        self, settings: Any, *, run_id: str, session_id: str, model: str, endpoint: str | None
    ) -> RunTelemetry | None:
        """The run's recorder, or None when the settings leave telemetry off."""
        ...

    def flush(self, timeout: float) -> None:
        """Export what is pending, waiting at most `timeout` seconds (the process is leaving)."""
        ...


class _NoSpan:
    def event(self, name: str, attributes: Mapping[str, str | bool | int]) -> None:
        pass

    def traceparent(self) -> str | None:
        return None


NO_SPAN: TraceSpan = _NoSpan()


class NoTelemetry:
    """Telemetry off: every node a no-op."""

    def agent_started(self, agent_id: str, parent: TraceSpan | None) -> TraceSpan:
        return NO_SPAN

    def agent_ended(self, span: TraceSpan, stop: str, cause: str, error: str | None = None) -> None:
        pass

    def chat_started(
        self, parent: TraceSpan, model: str, messages: list[dict[str, Any]]
    ) -> TraceSpan:
        return NO_SPAN

    def chat_ended(self, span: TraceSpan, reply: Reply | None, error: str | None = None) -> None:
        pass

    def tool_started(self, parent: TraceSpan, call: ToolCall) -> TraceSpan:
        return NO_SPAN

    def tool_ended(self, span: TraceSpan, outcome: str, decision: str | None) -> None:
        pass


# The tool call whose execution is in progress in this task (a command gets its TRACEPARENT, a
# sub-agent's span nests under its delegate call). Set around one tool's execution only.
current_tool_span: ContextVar[TraceSpan | None] = ContextVar("agent_lsp_tool_span", default=None)
