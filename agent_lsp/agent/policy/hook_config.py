"""Which hooks are declared, and where: Claude Code's shape (`hooks: {Event: [{matcher, hooks:
[{type: "command", command, timeout?}]}]}`) from our trusted `hooks` setting, the user's Claude
Code settings file, and the project's `.claude/settings*.json` (which run only after consent);
those files are read by claude_files, as the permission rules are."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_lsp.agent.policy.claude_files import PROJECT_FILES, ClaudeFile, claude_files

EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "Notification",
)
DEFAULT_TIMEOUT = 60.0
Scope = Literal["user", "project"]
State = Literal["active", "needs-consent", "denied", "ignored"]

# Claude Code's tool names for ours (CONTRACT "Tool names across formats"): a matcher may use
# either; payloads carry the Claude Code name where one exists (Decision 32).
CLAUDE_NAMES = {
    "run_command": "Bash",
    "process_output": "BashOutput",
    "stop_process": "KillShell",
    "read_file": "Read",
    "edit_file": "Edit",
    "write_file": "Write",
    "search": "Grep",
    "list_files": "Glob",
    "delegate": "Task",
    "skill": "Skill",
}
MATCH_ALIASES = {"MultiEdit": "edit_file", "LS": "list_files"}


@dataclass(frozen=True)
class HookSpec:
    """One declared hook command: where it came from and whether it may run."""

    event: str
    matcher: str
    command: str
    timeout: float
    source: str  # "settings" or the file's path
    scope: Scope
    state: State = "active"

    def matches(self, names: tuple[str, ...]) -> bool:
        """`names`: what the target is called (a tool's names, a trigger); empty/`*` matches all,
        else the matcher is a regular expression matched on the whole name (so `Edit|Write`
        and `mcp__github__.*` work; a bad expression matches its exact text only)."""
        if self.matcher in ("", "*"):
            return True
        pattern = _compiled(self.matcher)
        if pattern is None:
            return self.matcher in names
        return any(pattern.fullmatch(name) for name in names)


_patterns: dict[str, re.Pattern[str] | None] = {}


def _compiled(matcher: str) -> re.Pattern[str] | None:
    if matcher not in _patterns:
        try:
            _patterns[matcher] = re.compile(matcher)
        except re.error:
            _patterns[matcher] = None
    return _patterns[matcher]


@dataclass
class HookTable:
    """Every declared hook (those that may not run included, for `agentLsp.setup`)."""

    specs: list[HookSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def active(self, event: str) -> list[HookSpec]:
        return [s for s in self.specs if s.event == event and s.state == "active"]

    def has(self, event: str) -> bool:
        return any(s.event == event and s.state == "active" for s in self.specs)


def parse_hooks(value: Any, source: str, scope: Scope, problems: list[str]) -> list[HookSpec]:
    """The hooks of one source; what is malformed is named in `problems`, the rest kept."""
    if value is None:
        return []
    if not isinstance(value, dict):
        problems.append(
            f"{source}: `hooks` must be an object of events, got {type(value).__name__}"
        )
        return []
    out: list[HookSpec] = []
    for event, groups in value.items():
        if event not in EVENTS:
            problems.append(f"{source}: hook event `{event}` is not one agent-lsp fires: ignored")
            continue
        if not isinstance(groups, list):
            problems.append(f"{source}: hooks.{event} must be a list of matcher groups")
            continue
        for group in groups:
            matcher = group.get("matcher", "") if isinstance(group, dict) else None
            hooks = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(matcher, str) or not isinstance(hooks, list):
                problems.append(
                    f"{source}: hooks.{event}: each entry needs `hooks: [...]` and an optional "
                    "string `matcher`"
                )
                continue
            for hook in hooks:
                spec = _one_hook(hook, event, matcher, source, scope, problems)
                if spec is not None:
                    out.append(spec)
    return out


def _one_hook(
    hook: Any, event: str, matcher: str, source: str, scope: Scope, problems: list[str]
) -> HookSpec | None:
    kind = hook.get("type", "command") if isinstance(hook, dict) else None
    if isinstance(hook, dict) and kind != "command":
        problems.append(
            f"{source}: hooks.{event}: hook type `{kind}` is not supported (only `command`): "
            "ignored"
        )
        return None
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        problems.append(f"{source}: hooks.{event}: a hook needs a string `command`")
        return None
    timeout = hook.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        problems.append(
            f"{source}: hooks.{event}: `timeout` must be a positive number of seconds, got "
            f"{timeout!r}; using {DEFAULT_TIMEOUT:g}"
        )
        timeout = DEFAULT_TIMEOUT
    return HookSpec(event, matcher, hook["command"], float(timeout), source, scope)


def claude_project_files(roots: list[Path]) -> list[Path]:
    return [root / name for root in roots for name in PROJECT_FILES]


def never_consented(spec: HookSpec) -> bool:
    """Project hooks run only after the user's consent (Decision 30); until the consent store
    answers, none has it."""
    return False


def declared_hooks(
    settings_hooks: Mapping[str, Any],
    roots: list[Path],
    *,
    env: Mapping[str, str] | None = None,
    consented: Callable[[HookSpec], bool] = never_consented,
    files: list[ClaudeFile] | None = None,
) -> HookTable:
    """Every declared hook with its state. Trusted: our `hooks` setting (already the union of the
    user's own sources) and the user's Claude Code file; the project's files only with consent.
    `disableAllHooks` in the user's file turns every hook off; in a project file, only that
    project's hooks (a repository cannot switch off the user's guards)."""
    table = HookTable()
    table.specs += parse_hooks(dict(settings_hooks), "settings", "user", table.problems)
    all_off = False
    if files is None:  # the one reader of Claude Code's files (Decision 29)
        files = claude_files(roots, env)
    for file in files:
        if file.hooks_error:  # the rules name the file's other problems
            table.problems.append(file.hooks_error)
        found = parse_hooks(file.hooks or None, str(file.path), file.scope, table.problems)
        if file.scope == "user":
            table.specs += found
            all_off = all_off or file.disable_all_hooks
            continue
        for spec in found:
            state: State = (
                "ignored"
                if file.disable_all_hooks
                else "active"
                if consented(spec)
                else "needs-consent"
            )
            table.specs.append(_with_state(spec, state))
    if all_off:
        table.specs = [_with_state(s, "ignored") for s in table.specs]
    seen: set[tuple[str, str, str, str]] = set()
    unique = []
    for spec in table.specs:  # the same declaration in two sources is one hook
        key = (spec.event, spec.matcher, spec.command, spec.state)
        if key not in seen:
            seen.add(key)
            unique.append(spec)
    table.specs = unique
    return table


def _with_state(spec: HookSpec, state: State) -> HookSpec:
    return HookSpec(
        spec.event, spec.matcher, spec.command, spec.timeout, spec.source, spec.scope, state
    )


def setup_rows(table: HookTable) -> list[dict[str, Any]]:
    """`agentLsp.setup`'s `hooks` items (Decision 37)."""
    return [
        {
            "event": s.event,
            "matcher": s.matcher,
            "command": s.command,
            "timeout": s.timeout,
            "source": s.source,
            "scope": s.scope,
            "state": s.state,
        }
        for s in table.specs
    ]
