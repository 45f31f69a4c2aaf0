"""Permission rules (CONTRACT Decision 28): `Tool` or `Tool(specifier)` in allow / ask / deny,
Claude Code's tool names as aliases of ours; commands matched on shlex-split parts, file tools on
gitignore-style path globs (given and resolved path)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent_lsp.agent.tools.names import CLAUDE_TOOLS

if TYPE_CHECKING:  # imported where a path rule is first matched (start-up: issue 33)
    import pathspec

Effect = Literal["allow", "ask", "deny"]
EFFECTS: tuple[Effect, ...] = ("deny", "ask", "allow")

OUR_TOOLS = frozenset(
    {
        "run_command",
        "read_file",
        "edit_file",
        "write_file",
        "search",
        "list_files",
        "delegate",
        "remember",
        "diagnostics",
        "skill",
        "debug_start",
        "debug_eval",
        "process_output",
        "stop_process",
    }
)
# Rule names of our own beyond Claude Code's (CONTRACT "The debugger (turn 4)").
RULE_NAMES = {"Debug": "debug_start", "DebugEval": "debug_eval"}
# A path specifier covers every tool of its class: reads, or every writer.
READERS = frozenset({"read_file", "search", "list_files"})
WRITERS = frozenset({"edit_file", "write_file", "remember", "rename_symbol"})
_RULE = re.compile(r"^\s*([A-Za-z0-9_*.-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """One rule as written, where it came from, and what it names."""

    text: str
    effect: Effect
    source: str  # a file path, or the setting it came from (`permissions`, `approval.tools`)
    scope: str = "user"  # user | project | session
    base: Path | None = None  # the project folder of a project file (`/…` patterns)
    tool: str | None = None  # our tool name, `mcp__…`, or None: a tool we do not have
    specifier: str | None = None

    @staticmethod
    def parse(
        text: str,
        effect: Effect,
        source: str,
        scope: str = "user",
        base: Path | None = None,
        *,
        any_name: bool = False,
    ) -> Rule:
        """`any_name`: a name of ours as `approval.tools` writes it (any tool, MCP ones too)."""
        match = _RULE.match(text) if isinstance(text, str) else None
        if match is None:
            return Rule(str(text), effect, source, scope, base)
        name, spec = match.group(1), match.group(2)
        # Claude Code's names, ours, and our own rule names (`Debug`)
        tool: str | None = CLAUDE_TOOLS.get(name) or RULE_NAMES.get(name, name)
        if not any_name and tool not in OUR_TOOLS and "__" not in name:
            tool = None  # WebFetch, NotebookEdit, …: kept for agentLsp.setup, matches nothing
        spec = spec.strip() if spec is not None else None
        return Rule(text, effect, source, scope, base, tool, spec or None)

    @property
    def known(self) -> bool:
        return self.tool is not None

    @cached_property
    def _command(self) -> tuple[list[str], bool] | None:
        spec = self.specifier or ""
        prefix = spec.endswith(":*")
        try:
            tokens = shlex.split(spec[:-2] if prefix else spec)
        except ValueError:
            return None
        return (tokens, prefix) if tokens else None

    def names_tool(self, name: str, aliases: Iterable[str] = (), server: str | None = None) -> bool:
        """Whether the rule is about this tool (a path rule: about its class)."""
        if self.tool is None:
            return False
        if self.tool.startswith("mcp__"):
            rest = self.tool[len("mcp__") :]
            if server is not None and (rest == server or rest in (f"{server}__*", f"{server}__")):
                return True
            return rest in (name, *aliases) or self.tool in (name, *aliases)
        if self.specifier is not None and self.tool in READERS:
            return name in READERS
        if self.specifier is not None and self.tool in WRITERS:
            return name in WRITERS
        return self.tool in (name, *aliases)

    def matches_argv(self, argv: list[str]) -> bool:
        """A command part's argv against `Bash(p:*)` (prefix) or `Bash(p)` (exact)."""
        if self.specifier is None or self.specifier == "*":
            return True
        parsed = self._command
        if parsed is None:
            return False
        tokens, prefix = parsed
        return _match_tokens(tokens + (["*"] if prefix else []), argv)

    def matches_path(self, path: Path, roots: list[Path]) -> bool:
        if self.specifier is None:
            return True
        return any(
            _under(path, base) is not None and spec.match_file(_under(path, base) or "")
            for base, spec in _compiled(self.specifier, self.base, tuple(roots))
        )

    def shown(self) -> str:
        return self.text if self.scope in ("user", "session") else f"{self.text} ({self.source})"


def _match_tokens(pattern: list[str], argv: list[str]) -> bool:
    if not pattern:
        return not argv
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        return any(_match_tokens(rest, argv[i:]) for i in range(len(argv) + 1))
    if not argv or not _match_token(head, argv[0]):
        return False
    return _match_tokens(rest, argv[1:])


def _match_token(pattern: str, token: str) -> bool:
    if "*" not in pattern:
        return pattern == token
    regex = ".*".join(re.escape(piece) for piece in pattern.split("*"))
    return re.fullmatch(regex, token, re.DOTALL) is not None


def _under(path: Path, base: Path) -> str | None:
    if path == base:
        return None
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


_Compiled = list[tuple[Path, "pathspec.GitIgnoreSpec"]]
_SPECS: dict[tuple[str, Path | None, tuple[Path, ...]], _Compiled] = {}


def _compiled(
    spec: str, base: Path | None, roots: tuple[Path, ...]
) -> list[tuple[Path, pathspec.GitIgnoreSpec]]:
    key = (spec, base, roots)
    if key not in _SPECS:
        import pathspec

        _SPECS[key] = [
            (b, pathspec.GitIgnoreSpec.from_lines([p])) for b, p in _bases(spec, base, roots)
        ]
    return _SPECS[key]


def _bases(spec: str, base: Path | None, roots: tuple[Path, ...]) -> list[tuple[Path, str]]:
    """Where a path pattern is anchored (Decision 28): `//abs`, `~/…`, `/…` from the project
    folder of the file holding it, `./…` or a relative path from each workspace folder; a
    pattern without `/` matches at any depth."""
    if spec.startswith("//"):
        return [(Path("/"), spec[1:])]
    if spec.startswith("~/"):
        return [(Path(os.path.expanduser("~")), spec[1:])]
    if spec.startswith("/"):
        return [(b, spec) for b in ([base] if base is not None else list(roots))]
    if spec.startswith("./"):
        return [(b, spec[1:]) for b in roots]
    if "/" not in spec.rstrip("/"):
        return [(Path("/"), spec)]
    return [(b, "/" + spec) for b in roots]


@dataclass
class RuleSet:
    """Every rule in force for a run: deny, then ask, then allow; unknown tool names kept for
    agentLsp.setup."""

    rules: list[Rule] = field(default_factory=list)

    def add(self, rule: Rule) -> None:
        if rule not in self.rules:
            self.rules.append(rule)

    def of(self, effect: Effect) -> list[Rule]:
        return [r for r in self.rules if r.effect == effect and r.known]

    def ignored(self) -> list[Rule]:
        return [r for r in self.rules if not r.known]

    def bare_denied(
        self, name: str, aliases: Iterable[str] = (), server: str | None = None
    ) -> bool:
        """A bare deny (`"Grep"`): the tool is taken off the list."""
        return any(
            r.specifier is None and r.names_tool(name, tuple(aliases), server)
            for r in self.of("deny")
        )
