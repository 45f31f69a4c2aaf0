"""Approval policy (CONTRACT Decision 26): deny rules, then ask (ask rules, the destructive list,
risky git), then allow (allow rules and allowCommands on parsed argv, never for a line that
reaches outside the workspace; session grants; the sandbox), then approval.tools / default."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent_lsp.agent.display import escape_invisible
from agent_lsp.agent.policy.destructive import destructive
from agent_lsp.agent.policy.outside import outside, risky_reason
from agent_lsp.agent.policy.rules import Rule, RuleSet
from agent_lsp.agent.policy.shell import HARMLESS_TARGETS, Part, split_line, unchecked, unwrap
from agent_lsp.agent.state.session import SessionApprovals
from agent_lsp.agent.tools.base import served
from agent_lsp.agent.tools.paths import in_git_dir
from agent_lsp.settings import ApprovalSettings, Settings

if TYPE_CHECKING:
    from agent_lsp.agent.tools.base import Prepared, Tool

Verdict = Literal["allow", "ask", "deny"]

# Decision 66: a saved rule reads `*` (and a glob reads `?`, `[`) as a pattern, wider than the
# command shown; "Allow for session" remembers the exact line instead.
ALWAYS_WITHHELD = (
    "Always allow is not offered: the command holds `*`, `?` or `[`, which a saved rule would "
    "read as a pattern (Allow for session remembers this exact line)"
)


@dataclass(frozen=True)
class PolicyVerdict:
    verdict: Verdict
    why: str  # for the transcript: which rule decided
    # ask only: a person must answer (`--yes`, a session grant or a rule does not pass it)
    must_ask: str | None = None
    # ask only: the exact rule "Always allow" would save (None: not offered, Decision 27)
    always: str | None = None
    # what decided, without the rule's specifier or the call's arguments (telemetry without
    # `logContent` exports this, never `why`): tool_setting, deny_rule, must_ask, destructive,
    # unchecked, ask_rule, read_only, session, allow_rule, allow_rule_risky, sandboxed, default,
    # hook
    kind: str = "default"
    # ask only: why "Always allow" is not offered, for the prompt (Decision 66)
    always_withheld: str | None = None
    # ask only: `why` is said where the user decides (a rule, the destructive list, a .git file)
    says_why: bool = False


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


def command_rule(argv: list[str], prefix: bool) -> str:
    """`Bash(<argv>)` (exact) or `Bash(<argv>:*)` (prefix)."""
    return f"Bash({shlex.join(argv)}{':*' if prefix else ''})"


def settings_rules(settings: ApprovalSettings) -> list[Rule]:
    """`approval.allowCommands` as `Bash(<prefix>:*)` rules, exact for `$` / `exact:` entries
    (Decision 26); `approval.tools` stays with the policy (its names may be contested)."""
    rules: list[Rule] = []
    for entry in settings.allow_commands:
        parsed = parse_entry(entry)
        if parsed is not None:
            spec = command_rule(parsed[0], not parsed[1])[len("Bash(") : -1]
            # `*` in an entry was always a literal token: never a wildcard here
            literal = not any("*" in a for a in parsed[0])
            if literal:
                rules.append(
                    Rule(entry, "allow", "allowCommands", "user", None, "run_command", spec)
                )
    return rules


def permission_rules(settings: Settings, extra: list[Rule] | None = None) -> RuleSet:
    """The rules in force: the `permissions` setting (every trusted source's, Decision 25), then
    those of other files (Claude Code's; a project's allow rules after consent)."""
    rules = RuleSet()
    for effect in ("deny", "ask", "allow"):
        for text in getattr(settings.permissions, effect):
            rules.add(Rule.parse(text, effect, "permissions"))
    for rule in extra or []:
        rules.add(rule)
    return rules


class ApprovalPolicy:
    def __init__(
        self,
        settings: ApprovalSettings,
        session: SessionApprovals,
        rules: RuleSet | None = None,
        *,
        roots: list[Path] | None = None,
        can_save_always: bool = False,
    ):
        self.settings = settings
        self.session = session
        self.rules = rules if rules is not None else RuleSet()
        for rule in settings_rules(settings):
            self.rules.add(rule)
        self.roots = [Path(r) for r in roots or []]
        self.can_save_always = can_save_always  # the user settings file can take a rule
        self._read_denials: list[Rule] | None = None

    def read_denials(self) -> list[Rule]:
        """The `Read(…)` deny rules (deny rules never change during a run: computed once)."""
        if self._read_denials is None:
            self._read_denials = [
                r
                for r in self.rules.of("deny")
                if r.specifier is not None and r.names_tool("read_file")
            ]
        return self._read_denials

    def hides(self, path: Path) -> bool:
        """A file a `Read(…)` deny rule covers: search and list_files never show it."""
        return any(r.matches_path(path, self.roots) for r in self.read_denials())

    def offers(self, tool: Tool) -> bool:
        """False for a tool a bare deny rule takes off the list; `approval.tools: {x: deny}`
        is the rule `x` in `deny` (Decision 26). The call-time denial stays (`decide`)."""
        names = (
            tool.name,
            *tool.aliases,
            *tool.contested_aliases,
        )
        if any(self.settings.tools.get(n) == "deny" for n in names):
            return False
        return not self.rules.bare_denied(tool.name, tool.aliases, _server(tool))

    def decide(self, tool: Tool, prepared: Prepared) -> PolicyVerdict:
        """The policy's answer for a prepared call; `ask` goes to the user."""
        configured = self.settings.tools.get(tool.name) or next(
            (self.settings.tools[a] for a in tool.aliases if a in self.settings.tools),
            None,
        )
        if configured == "deny":
            return PolicyVerdict("deny", f"approval.tools denies {tool.name}", kind="tool_setting")
        # A name that may mean this tool or another (two MCP servers' names sanitise alike) only
        # ever restricts: its deny or ask applies, its allow is for nobody.
        cautious = {
            a: self.settings.tools[a] for a in tool.contested_aliases if a in self.settings.tools
        }
        for alias, rule in cautious.items():
            if rule == "deny":
                return PolicyVerdict(
                    "deny",
                    f"approval.tools denies {alias}, a name that may mean {tool.name}",
                    kind="tool_setting",
                )
        plan = prepared.command
        parts = split_line(plan.command) if plan is not None else None
        denied = self._matching("deny", tool, prepared, parts)
        if denied is not None:
            return PolicyVerdict("deny", f"the deny rule {denied.shown()}", kind="deny_rule")
        if "ask" in cautious.values() and configured != "ask":
            return PolicyVerdict(
                "ask",
                f"approval.tools asks for {next(a for a, r in cautious.items() if r == 'ask')}, "
                f"a name that may mean {tool.name}",
                kind="tool_setting",
            )
        if prepared.must_ask:  # above every allow: rules, the sandbox, grants, --yes, the Action
            why = prepared.must_ask
            return PolicyVerdict("ask", why, must_ask=why, kind="must_ask")
        git_dir = self._edits_git_dir(tool, prepared)
        if git_dir:
            return PolicyVerdict("ask", git_dir, must_ask=git_dir, kind="must_ask", says_why=True)
        harmful = destructive(parts) if parts else None
        if harmful:
            why = f"asks: destructive command: {harmful}; nothing allows it without a person"
            return PolicyVerdict("ask", why, must_ask=why, kind="destructive", says_why=True)
        blind = unchecked(parts) if parts else None
        if blind:
            why = f"asks: {blind}; nothing allows it without a person"
            return PolicyVerdict("ask", why, must_ask=why, kind="unchecked", says_why=True)
        asked = self._matching("ask", tool, prepared, parts)
        if asked is not None:  # above --yes and session grants (Decision 26)
            why = f"asks: the ask rule {asked.shown()}"
            return PolicyVerdict("ask", why, must_ask=why, kind="ask_rule", says_why=True)
        if tool.read_only:
            return PolicyVerdict(configured or "allow", "read-only tool", kind="read_only")
        return self._permission(tool, prepared, parts, configured)

    def _permission(
        self,
        tool: Tool,
        prepared: Prepared,
        parts: list[Part] | None,
        configured: Verdict | None,
    ) -> PolicyVerdict:
        """What allows a call nothing restricts: a session grant, an allow rule, the sandbox,
        else `approval.tools` or the default (with the rule "Always allow" would save, or why
        it is withheld)."""
        plan = prepared.command
        always, withheld = self._always_rule(tool, prepared, parts)
        if plan is not None:
            if plan.remember in self.session.commands:
                return PolicyVerdict("allow", "allowed for this session", kind="session")
            if parts is not None:
                allowed, risky = self._command_allowed(parts, plan.cwd or Path.cwd(), plan.roots)
                if allowed is not None and risky is None:
                    return PolicyVerdict(
                        "allow",
                        f"approval.{_allowed_by(allowed)}"
                        if allowed.source == "allowCommands"
                        else _allowed_by(allowed),
                        kind="allow_rule",
                    )
                if allowed is not None:
                    return PolicyVerdict(
                        "ask",
                        f"{_allowed_by(allowed)} matched, but {risky}",
                        kind="allow_rule_risky",
                    )
        else:
            if _grant_key(tool, prepared) in self.session.tools:
                return PolicyVerdict("allow", "allowed for this session", kind="session")
            allowed = self._matching("allow", tool, prepared, None)
            if allowed is not None:
                return PolicyVerdict(
                    "allow", f"the allow rule {allowed.shown()}", kind="allow_rule"
                )
        verdict: Verdict = configured or self.settings.default
        # a debug session in the sandbox is confined like a command (Decision 87)
        sandboxed = plan.sandboxed if plan is not None else prepared.sandboxed
        if verdict == "ask" and sandboxed and self.settings.sandboxed == "allow":
            return PolicyVerdict(
                "allow", "approval.sandboxed: the command runs in the sandbox", kind="sandboxed"
            )
        return PolicyVerdict(
            verdict,
            f"approval.tools[{tool.name}]" if configured else "approval.default",
            always=always if verdict == "ask" else None,
            kind="tool_setting" if configured else "default",
            always_withheld=withheld if verdict == "ask" else None,
        )

    def _matching(
        self, effect: Verdict, tool: Tool, prepared: Prepared, parts: list[Part] | None
    ) -> Rule | None:
        """The first rule of `effect` about this call: a command rule on any part (looked through
        wrappers), a path rule on the given or the resolved path."""
        aliases, server = tool.aliases, _server(tool)
        roots = prepared.command.roots if prepared.command is not None else self._roots(prepared)
        for rule in self.rules.of(effect):
            if not rule.names_tool(tool.name, aliases, server):
                continue
            if rule.specifier is None or rule.specifier == "*":
                return rule
            if parts is not None:
                if any(rule.matches_argv(a) for p in parts for a in (p.argv, *unwrap(p.argv))):
                    return rule
                continue
            if prepared.rule_argv is not None:  # `Debug(app.py)`, `Debug(python3 -m x:*)`
                if rule.matches_argv(prepared.rule_argv):
                    return rule
                continue
            paths = prepared.paths
            if not paths:
                continue
            if effect == "allow":
                if all(
                    rule.matches_path(g, roots) and rule.matches_path(r, roots) for g, r in paths
                ):
                    return rule
            elif any(rule.matches_path(p, roots) for pair in paths for p in pair):
                return rule
        return None

    def _roots(self, prepared: Prepared) -> list[Path]:
        return self.roots

    def _edits_git_dir(self, tool: Tool, prepared: Prepared) -> str | None:
        """Decision 62: a writer's file inside any repository's `.git` (its config, hooks and
        info make git run programs) is never changed without a person; as named or resolved."""
        if tool.read_only:
            return None
        for pair in prepared.paths:
            for path in pair:
                if in_git_dir(path, self.roots):
                    shown = prepared.shown_path or path.name
                    return (
                        f"asks: {shown} is inside a repository's .git folder, whose config and "
                        "hooks make git run programs; nothing allows that without a person"
                    )
        return None

    def _command_allowed(
        self, parts: list[Part], cwd: Path, roots: list[Path]
    ) -> tuple[Rule | None, str | None]:
        """The allow rule of the line's first part when every part matches one (Decision 28),
        and why it must still ask (a path outside the workspace, a risky git option)."""
        rules = [r for r in self.rules.of("allow") if r.names_tool("run_command")]
        found: list[Rule] = []
        for part in parts:
            # A redirection that writes a file is an edit nobody reviews: never by a rule.
            writes = [t for t in part.writes if t not in HARMLESS_TARGETS]
            if part.never_allow or not part.argv or writes:
                return None, None
            rule = next((r for r in rules if r.matches_argv(part.argv)), None)
            if rule is None:
                return None, None
            found.append(rule)
        if not found:
            return None, None
        for part in parts:
            risky = risky_reason(part.argv, cwd, roots, part.patterns)
            if risky is None:
                risky = next(
                    (
                        f"it redirects to {t!r}, outside the workspace"
                        for t in part.redirects
                        if t not in HARMLESS_TARGETS and outside(t, cwd, roots)
                    ),
                    None,
                )
            if risky is not None:
                return found[0], risky
        return found[0], None

    def _always_rule(
        self, tool: Tool, prepared: Prepared, parts: list[Part] | None
    ) -> tuple[str | None, str | None]:
        """The exact rule "Always allow" would save (Decision 27), or None where it is not
        offered: a compound or shell line, a path outside the workspace, a workspace server's
        tool, a settings file that cannot take it, or a rule that would hold invisible
        characters (what is saved must read as what is shown); and why, for the prompt, when
        only a pattern character kept it (Decision 66)."""
        if not self.can_save_always:
            return None, None
        rule = self._exact_rule(tool, prepared, parts)
        if rule is None or escape_invisible(rule, keep_newlines=False) != rule:
            return None, None
        if parts and any(c in token for p in parts for token in p.argv for c in "*?["):
            return None, ALWAYS_WITHHELD
        return rule, None

    def _exact_rule(self, tool: Tool, prepared: Prepared, parts: list[Part] | None) -> str | None:
        if prepared.command is not None:
            if not parts or len(parts) != 1 or parts[0].never_allow or parts[0].redirects:
                return None
            plan = prepared.command
            if risky_reason(parts[0].argv, plan.cwd or Path.cwd(), plan.roots, parts[0].patterns):
                return None
            return command_rule(parts[0].argv, False)
        if tool.name == "debug_start" and prepared.rule_argv is not None:
            return f"Debug({shlex.join(prepared.rule_argv)})"
        if tool.name in ("edit_file", "write_file"):
            shown = prepared.shown_path
            if len(prepared.paths) != 1 or not shown:
                return None
            kind = "Edit" if tool.name == "edit_file" else "Write"
            return f"{kind}({_path_pattern(shown)})"
        mcp = served(tool)
        if mcp is not None and mcp.source in ("user", "acp"):
            return f"mcp__{mcp.raw_name}"
        return None

    def remember(self, tool: Tool, prepared: Prepared) -> None:
        """What "Allow for session" remembers: a command's exact line (with its cwd), any other
        tool by its key."""
        self.session.remember(
            _grant_key(tool, prepared),
            prepared.command.remember if prepared.command is not None else None,
        )

    def allow_always(self, rule: str) -> None:
        """A rule "Always allow" saved: in force for the rest of this run at once."""
        self.rules.add(Rule.parse(rule, "allow", "always", "user"))


def _server(tool: Tool) -> str | None:
    mcp = served(tool)
    return mcp.server if mcp is not None else None


def _grant_key(tool: Tool, prepared: Prepared) -> str:
    """What "Allow for session" remembers for a call without a command plan: the tool, or for
    debug_start the tool with its program, module or command line (like a command's line)."""
    if prepared.rule_argv is None:
        return tool.grant_key
    return f"{tool.grant_key} {shlex.join(prepared.rule_argv)}"


def _allowed_by(rule: Rule) -> str:
    if rule.source == "allowCommands":
        return f"allowCommands entry {rule.text!r}"
    return f"the allow rule {rule.shown()}"


def _path_pattern(shown: str) -> str:
    """A workspace-relative path as an exact gitignore pattern anchored at the folder."""
    escaped = "".join("\\" + c if c in "*?[]\\!#" else c for c in shown)
    return escaped if "/" in escaped else f"./{escaped}"
