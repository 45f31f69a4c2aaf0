"""The settings' shape: one pydantic model per section, with the camelCase keys the editors
send, and where the server keeps its own files."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic.alias_generators import to_camel

Decision = Literal["allow", "ask", "deny"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class ApprovalSettings(_Model):
    default: Decision = "ask"
    """`ask`, `allow` or `deny` for tools with side effects."""
    tools: dict[str, Decision] = Field(default_factory=dict)
    """Per tool name: `allow`, `ask`, `deny` (read-only tools default to `allow`)."""
    allow_commands: list[str] = Field(default_factory=list)
    """Command prefixes that run without asking, matched on parsed argv; an entry ending in the
    token `$` or starting with `exact:` matches that exact argv only."""
    timeout: float = Field(300, gt=0)
    """Seconds an approval may wait for an answer before it counts as a denial (LSP and ACP)."""
    sandboxed: Literal["ask", "allow"] = "ask"
    """`allow`: a run_command (or debug_start) that runs inside the sandbox needs no yes (a `deny`
    still denies)."""


class PermissionSettings(_Model):
    allow: list[str] = Field(default_factory=list)
    """Rules that run without asking: `Tool` or `Tool(specifier)`, e.g. `Bash(npm test:*)`,
    `Edit(src/**)` (Claude Code's tool names or ours)."""
    ask: list[str] = Field(default_factory=list)
    """Rules that always ask, whatever allows them."""
    deny: list[str] = Field(default_factory=list)
    """Rules that never run: `Read(./.env)` also hides the file from search and list_files; a
    bare tool name takes the tool off the list."""


class Pricing(_Model):
    input_per_m_tok: float = Field(ge=0)
    """US dollars per million prompt tokens."""
    output_per_m_tok: float = Field(ge=0)
    """US dollars per million completion tokens."""
    cached_input_per_m_tok: float | None = Field(None, ge=0)
    """US dollars per million cached prompt tokens (default: the input price)."""


class BudgetSettings(_Model):
    max_cost_usd: float | None = Field(None, gt=0)
    """A run's cost limit in US dollars, sub-agents and compaction included: the run stops
    `max_turns` right after the model call that reaches it. Needs a known cost: `pricing` for the
    run's model (with `streamUsage`) or an endpoint that reports its own."""


class McpSettings(_Model):
    workspace_servers: Decision = "ask"
    """Whether MCP servers declared in the workspace's own files (.mcp.json, .vscode/mcp.json) may
    start."""


class SandboxSettings(_Model):
    mode: Literal["off", "read-only", "workspace-write"] = "off"
    """How run_command is confined: `off`, `read-only` or `workspace-write` (bubblewrap)."""
    network: bool = False
    """Whether a sandboxed command may use the network."""
    hide: list[str] | None = None
    """Paths hidden from sandboxed commands (`~` and `$VARIABLES` expanded); None: the secrets
    folders of CONTRACT Decision 22 and the usual credential stores, each ~/.config entry with its
    $XDG_CONFIG_HOME twin."""


class DebugAdapter(BaseModel):
    """A Debug Adapter Protocol server agent-lsp may start for a language (CONTRACT "The debugger
    (turn 4)", source 2): DAP over its stdin/stdout (not a TCP port)."""

    model_config = ConfigDict(extra="ignore")
    command: list[str] = Field(min_length=1)
    """The program and its arguments, e.g. `["python3", "-m", "debugpy.adapter"]`; a string is
    split like a shell would."""
    languages: list[str] = Field(min_length=1)
    """The languages it debugs, by program extension: `python`, `javascript`, `typescript`, `go`,
    `rust`, `ruby`, `c`, `cpp`, ... (the file's extension itself, e.g. `lua`, works too); a
    compiled (ELF) program is `native`, also matched by `c`, `cpp` and `rust`."""

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value


class DebugSettings(_Model):
    eval_without_asking: bool = False
    """`debug_eval` runs without asking (an expression can change the debugged program's
    state)."""
    python: str | None = None
    """The interpreter a debugged Python program runs under; None: `python3` on PATH."""
    _adapters: dict[str, DebugAdapter] = PrivateAttr(default_factory=dict)

    @property
    def adapters(self) -> dict[str, DebugAdapter]:
        """The top-level `debugAdapters` setting, carried here for the debug tools."""
        return self._adapters


# CONTRACT Decision 59: a `run_command` whose line starts with one of these is a check.
DEFAULT_RECOGNIZED = [
    "pytest",
    "python -m pytest",
    "python3 -m pytest",
    "python -m unittest",
    "python3 -m unittest",
    "tox",
    "nox",
    "npm test",
    "npm run test",
    "yarn test",
    "pnpm test",
    "cargo test",
    "go test",
    "make test",
    "make check",
    "mypy",
    "ruff check",
    "tsc",
    "eslint",
]


class VerifySettings(_Model):
    """Verified done (CONTRACT "Working beside the user"): what a run that would end `done` with
    edits checks first (trusted: its commands run on the user's machine)."""

    commands: list[str] = Field(default_factory=list)
    """Command lines run (as `run_command` calls, approved and sandboxed like any) once the
    agent says it is done, unless the same line already passed after its last edit."""
    diagnostics: bool = False
    """Also check the edited files' diagnostics (errors only) from the editor or the language
    servers agent-lsp started."""
    max_rounds: int = Field(2, ge=0, le=20)
    """Failures fed back to the model before the run ends `done` with the failure reported."""
    recognize: list[str] = Field(default_factory=lambda: list(DEFAULT_RECOGNIZED))
    """Command prefixes (on parsed argv) whose `run_command` counts as a check."""

    @field_validator("commands", "recognize")
    @classmethod
    def _no_empty(cls, value: list[str]) -> list[str]:
        if any(not line.strip() for line in value):
            raise ValueError("a command line is empty")
        return value


class TelemetrySettings(_Model):
    enabled: bool = False
    """OpenTelemetry traces and metrics (GenAI conventions) to the OTLP endpoint the standard
    `OTEL_EXPORTER_OTLP_*` variables name; env `AGENT_LSP_ENABLE_TELEMETRY=1` turns it on too.
    Needs the `otel` extra."""
    log_content: bool = False
    """Also record prompts, replies and tool arguments (redacted of the key)."""


class LanguageServer(BaseModel):
    """One language server agent-lsp may start (CONTRACT "Code intelligence", Decision 38). Its
    `initializationOptions` and `settings` are the server's own objects, sent as written."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
    command: list[str] = Field(min_length=1)
    """The program and its arguments, e.g. `["jedi-language-server"]` (stdio)."""
    extensions: list[str] = Field(min_length=1)
    """The file extensions it answers for, e.g. `[".py", ".pyi"]`."""
    initialization_options: Any = None
    """Sent in `initialize` as `initializationOptions`."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """The answers to the server's `workspace/configuration` (by dotted section)."""


class LanguageServersSettings(_Model):
    auto: bool = True
    """Start the static analysers of Decision 38 found on PATH (ty, basedpyright, pyright,
    pyrefly) for Python files; any other server only when it is in `servers`."""
    servers: dict[str, LanguageServer] = Field(default_factory=dict)
    """Per name: `{command, extensions, initializationOptions?, settings?}`."""


class Settings(_Model):
    model: str = "gpt-4.1-mini"
    """Model name; `replay:PATH` replays a recorded transcript offline."""
    base_url: str | None = None
    """Any OpenAI-compatible endpoint; None means env OPENAI_BASE_URL or the SDK default."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key."""
    max_turns: int = Field(25, ge=1)
    """Main-loop LLM calls per run before the `max_turns` stop."""
    delegate_max_turns: int = Field(10, ge=1)
    """LLM calls per sub-agent."""
    request_timeout: float = Field(120, gt=0)
    """Seconds one model call may take in all (connect, retries, the whole stream)."""
    stream_usage: bool = True
    """Ask for token usage at the end of each stream (`stream_options.include_usage`); false for a
    server that refuses the field (the context fill is then estimated)."""
    context_window: int = Field(128000, ge=1000)
    """Tokens (estimated); compaction runs before the built context would exceed it."""
    tool_output_limit: int = Field(20000, ge=200)
    """Characters of one tool result kept in context (head + tail)."""
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    """Permission rules (CONTRACT Decision 28); each list is the union of every trusted source."""
    memory_files: list[str] = Field(
        default_factory=lambda: ["AGENTS.md", "CLAUDE.md", ".agent-lsp/memory.md"]
    )
    """Files recalled into the system prompt when present (each must resolve inside its root)."""
    transcript_dir: str | None = None
    """Where one JSONL transcript per run goes; None means `<state dir>/runs`."""
    pricing: dict[str, Pricing] = Field(default_factory=dict)
    """Per model name: prices in US dollars per million tokens; with it, cost is shown."""
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """MCP servers whose tools the agent may use (`{name: {command, args?, env?, cwd?}}` or
    `{name: {type: "http", url, headers?}}`)."""
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    hooks: dict[str, Any] = Field(default_factory=dict)
    """Hooks in Claude Code's shape, `{Event: [{matcher, hooks: [{type: "command", command,
    timeout?}]}]}`: the union of the user's own sources (Decision 25)."""
    mcp: McpSettings = Field(default_factory=McpSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    verify: VerifySettings = Field(default_factory=VerifySettings)
    """Checks before a run with edits ends `done` (trusted: they are commands; a project's own
    `.agent-lsp/settings.json` may set it with the user's consent, Decision 83)."""
    debug: DebugSettings = Field(default_factory=DebugSettings)
    """The agent's debugger (trusted: it starts processes and evaluates code)."""
    debug_adapters: dict[str, DebugAdapter] = Field(default_factory=dict)
    """Debug adapters agent-lsp starts itself, `{name: {command, languages}}` (trusted: they are
    processes); one whose languages match the program wins over debugpy."""
    language_servers: LanguageServersSettings = Field(default_factory=LanguageServersSettings)
    """Language servers agent-lsp starts itself (trusted: they are processes)."""
    model_aliases: dict[str, str] = Field(default_factory=dict)
    """Model names in agent and command files (`sonnet`, `claude-opus-4-1`) mapped to models of
    this endpoint; unmapped Claude names run on the run's own model (Decision 35)."""

    @model_validator(mode="after")
    def _hand_adapters_to_debug(self) -> Settings:
        self.debug._adapters = dict(self.debug_adapters)
        return self

    def transcript_path(self) -> Path:
        return (
            Path(self.transcript_dir).expanduser() if self.transcript_dir else state_dir() / "runs"
        )


def state_dir() -> Path:
    """The server's own files: transcripts, spills, sessions, checkpoints. Never inside a
    workspace by default."""
    if explicit := os.environ.get("AGENT_LSP_STATE_DIR"):
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("agent-lsp"))
