"""Approval policy: per tool allow/ask/deny, allowCommands on parsed argv (prefix or exact, never
for a line that writes outside the workspace), sandboxed commands, session grants."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent_lsp.agent.state.session import SessionApprovals
from agent_lsp.settings import ApprovalSettings

if TYPE_CHECKING:
    from agent_lsp.agent.tools.base import Prepared, Tool

Verdict = Literal["allow", "ask", "deny"]

# git options that point git at other files, programs or configuration: an allowlisted git
# command carrying one of them still asks (`git diff --output=/anywhere`).
GIT_RISKY = (
    "-c",
    "--config-env",
    "-C",
    "--git-dir",
    "--work-tree",
    "--exec-path",
    "--output",
    "-o",
    "--output-directory",
    "--upload-pack",
    "--receive-pack",
    "--ext-diff",
)


@dataclass(frozen=True)
class PolicyVerdict:
    verdict: Verdict
    why: str  # for the transcript: which rule decided


def parse_entry(entry: str) -> tuple[list[str], bool] | None:
    """An allowCommands entry as (argv, exact); None when it cannot be parsed."""
    text = entry.strip()
    exact = False
    if text.startswith("exact:"):
        text, exact = text[len("exact:") :], True
    try:
        argv = shlex.split(text)
    except ValueError:
        return None
    if argv and argv[-1] == "$":
        argv, exact = argv[:-1], True
    return (argv, exact) if argv else None


def matching_entry(argv: list[str], entries: list[str]) -> str | None:
    for entry in entries:
        parsed = parse_entry(entry)
        if parsed is None:
            continue
        wanted, exact = parsed
        if (argv == wanted) if exact else (argv[: len(wanted)] == wanted):
            return entry
    return None


def risky_reason(argv: list[str], cwd: Path, roots: list[Path]) -> str | None:
    """Why an allowlisted line must still ask: it names a path outside the workspace, or it is
    git with an option that points it elsewhere."""
    if argv and os.path.basename(argv[0]) == "git":
        for arg in argv[1:]:
            for flag in GIT_RISKY:
                if (
                    arg == flag
                    or arg.startswith(flag + "=")
                    or (len(flag) == 2 and arg.startswith(flag) and not arg.startswith("--"))
                ):
                    return f"git option {arg.split('=')[0]} may read or write outside the workspace"
    for arg in argv[1:]:
        for candidate in _path_candidates(arg):
            path = Path(os.path.expanduser(candidate))
            resolved = (path if path.is_absolute() else cwd / path).resolve()
            if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
                return f"argument {arg!r} points outside the workspace"
    return None


def _path_candidates(arg: str) -> list[str]:
    found = [arg]
    if "=" in arg:
        found.append(arg.split("=", 1)[1])
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
        found.append(arg[2:])  # -o/tmp/x
    return [
        c
        for c in found
        if c.startswith(("/", "~")) or ".." in Path(c).parts or ("/" in c and not c.startswith("-"))
    ]


class ApprovalPolicy:
    def __init__(self, settings: ApprovalSettings, session: SessionApprovals):
        self.settings = settings
        self.session = session

    def decide(self, tool: Tool, prepared: Prepared) -> PolicyVerdict:
        """The policy's answer for a prepared call; `ask` goes to the user."""
        configured = self.settings.tools.get(tool.name) or next(
            (
                self.settings.tools[a]
                for a in getattr(tool, "aliases", ())
                if a in self.settings.tools
            ),
            None,
        )
        if configured == "deny":
            return PolicyVerdict("deny", f"approval.tools denies {tool.name}")
        # A name that may mean this tool or another (two MCP servers' names sanitise alike) only
        # ever restricts: its deny or ask applies, its allow is for nobody.
        cautious = {
            a: self.settings.tools[a]
            for a in getattr(tool, "contested_aliases", ())
            if a in self.settings.tools
        }
        for alias, rule in cautious.items():
            if rule == "deny":
                return PolicyVerdict(
                    "deny", f"approval.tools denies {alias}, a name that may mean {tool.name}"
                )
        if "ask" in cautious.values() and configured != "ask":
            return PolicyVerdict(
                "ask",
                f"approval.tools asks for {next(a for a, r in cautious.items() if r == 'ask')}, "
                f"a name that may mean {tool.name}",
            )
        if prepared.must_ask:  # above every allow: rules, the sandbox, session grants, --yes
            return PolicyVerdict("ask", prepared.must_ask)
        if tool.read_only:
            return PolicyVerdict(configured or "allow", "read-only tool")
        plan = prepared.command
        if plan is not None:
            if plan.remember in self.session.commands:
                return PolicyVerdict("allow", "allowed for this session")
            argv = plan.argv or []
            entry = (
                matching_entry(argv, self.settings.allow_commands)
                if argv and not plan.shell
                else None
            )
            if entry is not None:
                risky = risky_reason(argv, plan.cwd or Path.cwd(), plan.roots)
                if risky is None:
                    return PolicyVerdict("allow", f"approval.allowCommands entry {entry!r}")
                return PolicyVerdict("ask", f"allowCommands entry {entry!r} matched, but {risky}")
        elif tool.grant_key in self.session.tools:
            return PolicyVerdict("allow", "allowed for this session")
        verdict: Verdict = configured or self.settings.default
        if (
            verdict == "ask"
            and plan is not None
            and plan.sandboxed
            and self.settings.sandboxed == "allow"
        ):
            return PolicyVerdict("allow", "approval.sandboxed: the command runs in the sandbox")
        return PolicyVerdict(
            verdict, f"approval.tools[{tool.name}]" if configured else "approval.default"
        )

    def remember(self, tool: Tool, prepared: Prepared) -> None:
        """What "Allow for session" remembers: a command's exact line (with its cwd), any other
        tool by its key."""
        self.session.remember(
            tool.grant_key, prepared.command.remember if prepared.command is not None else None
        )
