"""The host's permission source: the rules of Claude Code's files for a run (the user's file
trusted; a project's deny and ask rules at once, its allow rules only with the user's consent for
those exact entries, Decision 30), and "Always allow" written into the user settings file
(Decision 27)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from agent_lsp.agent.display import escape_invisible
from agent_lsp.agent.fs.safeio import write_file_atomic
from agent_lsp.agent.fs.shared_read import SharedRead
from agent_lsp.agent.policy.claude_files import ClaudeFile, claude_files
from agent_lsp.agent.policy.hook_config import HookSpec, parse_hooks
from agent_lsp.agent.policy.rules import Rule
from agent_lsp.agent.ports import RunPermissions
from agent_lsp.mcp.consent import workspace_key
from agent_lsp.permissions.consent import ProjectConsent
from agent_lsp.permissions.project_verify import (
    VERIFY_KIND,
    own_verify,
    parse_verify,
    read_project_verify,
    verify_entry,
    verify_prompt,
)
from agent_lsp.settings import MAX_SETTINGS_FILE, state_dir, user_settings_path
from agent_lsp.settings_schema import VerifySettings

log = logging.getLogger(__name__)

CONSENT_KIND = "permissions.allow"
ALLOWED_TOOLS_KIND = "allowed-tools"  # a project prompt file's (Decision 30)
HOOK_KIND = "hooks"
# (prompt, the entries listed exactly) -> allow | allowAlways | deny; None: nobody to ask
# (the prompt, its entries, what they are: "project hooks") -> allow | allowAlways | deny | None
AskConsent = Callable[[str, list[str], str], Awaitable[str | None]]


class ClaudePermissions:
    def __init__(
        self,
        ask: AskConsent | None = None,
        store: ProjectConsent | None = None,
        env: Mapping[str, str] | None = None,
        settings_file: Path | None = None,
    ):
        self.ask = ask
        self.store = store or ProjectConsent(state_dir() / "project-consent.json")
        self.env = env
        self.settings_file = settings_file  # None: user_settings_path() when saving
        self.allowed_once: dict[str, set[str]] = {}  # "Allow": for this process, per workspace
        self.saved: list[str] = []  # rules "Always allow" saved by this process
        self.problems: list[str] = []  # files named with their errors (logged once each)
        self._asking = asyncio.Lock()
        self._read = SharedRead()

    async def for_run(self, roots: list[Path], settings: Any = None) -> RunPermissions:
        """The port the host calls before each run (agent_lsp.agent.ports.PermissionSource)."""
        # read once per run; runs started together share one reading (its files are only read)
        files = await self._read(tuple(roots), claude_files, roots, self.env)
        rules = await self.rules(roots, files)
        hooks = await self.hook_consent(roots, files)
        verify = None if own_verify(settings) else await self.verify_consent(roots)
        return RunPermissions(
            rules, self.save_always if self.can_save() else None, hooks, files, verify
        )

    async def verify_consent(self, roots: list[Path]) -> VerifySettings | None:
        """The project's `verify` when the user consented to that exact object (Decision 83)."""
        found = await asyncio.to_thread(read_project_verify, roots)
        if found is None:
            return None
        path, raw = found
        parsed = parse_verify(path, raw)
        if parsed is None:
            return None
        entry = verify_entry(raw)
        granted = await self._consent(
            workspace_key(roots),
            VERIFY_KIND,
            [(entry, str(path))],
            verify_prompt,
            "project verify commands",
        )
        return parsed if entry in granted else None

    async def hook_consent(
        self, roots: list[Path], files: list[ClaudeFile] | None = None
    ) -> Callable[[Any], bool]:
        """Which of the project's hooks may run (Decision 30): each declaration as written is
        an entry, asked once (every undecided one in one question) and remembered like a
        project's allow rules."""
        if files is None:
            files = await asyncio.to_thread(claude_files, roots, self.env)
        specs = [
            spec
            for file in files
            if file.scope == "project" and not file.disable_all_hooks
            for spec in parse_hooks(file.hooks or None, str(file.path), "project", [])
        ]
        entries = {hook_entry(spec): str(spec.source) for spec in specs}
        if not entries:
            return lambda spec: False
        granted = await self._consent(
            workspace_key(roots), HOOK_KIND, list(entries.items()), hooks_prompt, "project hooks"
        )
        return lambda spec: isinstance(spec, HookSpec) and hook_entry(spec) in granted

    async def rules(self, roots: list[Path], files: list[ClaudeFile] | None = None) -> list[Rule]:
        if files is None:
            files = await asyncio.to_thread(claude_files, roots, self.env)
        found: list[Rule] = []
        for file in files:
            if file.error and file.error not in self.problems:
                self.problems.append(file.error)
                log.warning("Claude Code settings: %s", file.error)
            found += _rules_of(file)
        waiting = [r for r in found if r.scope == "project" and r.effect == "allow"]
        granted = (
            await self._consent(
                workspace_key(roots),
                CONSENT_KIND,
                [(r.text, r.source) for r in waiting],
                lambda undecided: consent_prompt([r for r in waiting if r.text in undecided]),
                "project allow rules",
            )
            if waiting
            else set()
        )
        kept = [r for r in found if r not in waiting or r.text in granted]
        return kept + [Rule.parse(text, "allow", "always") for text in self.saved]

    async def allowed_tools(self, roots: list[Path], entries: list[str], origin: str) -> set[str]:
        """The `allowed-tools` entries of a project prompt file the user consented to
        (Decision 30: asked like the project's allow rules; nobody to ask: none)."""

        def prompt(undecided: list[str]) -> str:
            lines = [f"The workspace's command file {origin} allows these without asking you:"]
            lines += [f"  {escape_invisible(e, keep_newlines=False)}" for e in undecided]
            lines.append("Use its allowed-tools for its runs? (deny and ask rules apply anyway)")
            return "\n".join(lines)

        return await self._consent(
            workspace_key(roots),
            ALLOWED_TOOLS_KIND,
            [(e, origin) for e in entries],
            prompt,
            f"allowed-tools of {origin}",
        )

    async def _consent(
        self,
        workspace: str,
        kind: str,
        waiting: list[tuple[str, str]],
        prompt: Callable[[list[str]], str],
        what: str,
    ) -> set[str]:
        """The project entries (text, origin) the user consented to: remembered, allowed in
        this process, or asked now (once, listing every undecided entry)."""
        async with self._asking:
            once = self.allowed_once.setdefault(f"{kind}\0{workspace}", set())
            answers = {
                text: await asyncio.to_thread(self.store.answer, workspace, kind, text)
                for text, _ in waiting
            }
            granted = {t for t, a in answers.items() if a == "allow"} | (once & set(answers))
            undecided = {t: o for t, o in waiting if answers[t] is None and t not in once}
            if not undecided:
                return granted
            answer: str | None = None
            if self.ask is not None:
                try:
                    answer = await self.ask(prompt(list(undecided)), list(undecided), what)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a failing front end is nobody to ask
                    log.warning("asking consent for project entries failed: %s", exc)
            if answer in ("allowAlways", "deny"):
                for text, origin in undecided.items():
                    await asyncio.to_thread(
                        self.store.remember_entry,
                        workspace,
                        kind,
                        text,
                        "allow" if answer == "allowAlways" else "deny",
                        origin,
                    )
            if answer in ("allow", "allowAlways"):
                once |= set(undecided)
                granted |= set(undecided)
            return granted

    def can_save(self) -> bool:
        """Whether "Always allow" can be offered: the user settings file is absent or holds a
        JSON object whose `permissions.allow` can take a rule (Decision 27)."""
        try:
            _load(self._target())
        except (OSError, ValueError):
            return False
        return True

    async def save_always(self, rule: str) -> None:
        """The rule added to `permissions.allow` of the user settings file, the rest of the file
        kept; written atomically. In force for this process's later runs at once."""
        if rule not in self.saved:
            self.saved.append(rule)
        await asyncio.to_thread(_add_rule, self._target(), rule)

    def _target(self) -> Path:
        return self.settings_file or user_settings_path()


def _rules_of(file: ClaudeFile) -> list[Rule]:
    return [
        Rule.parse(text, effect, str(file.path), file.scope, file.folder)
        for effect in ("deny", "ask", "allow")
        for text in file.permissions.get(effect, [])
    ]


def consent_prompt(rules: list[Rule]) -> str:
    lines = ["The workspace's Claude Code settings allow these without asking you:"]
    # exactly as written, invisible characters escaped (a rule must not hide what it allows)
    lines += [
        f"  {escape_invisible(r.text, keep_newlines=False)}   "
        f"({escape_invisible(r.source, keep_newlines=False)})"
        for r in rules
    ]
    lines.append("Use these allow rules? (deny and ask rules of the project apply anyway)")
    return "\n".join(lines)


def hook_entry(spec: HookSpec) -> str:
    """A project hook's declaration as the user is asked about it (and its consent is keyed)."""
    matcher = f"[{spec.matcher}]" if spec.matcher not in ("", "*") else ""
    return f"{spec.event}{matcher}: {spec.command}"


def hooks_prompt(entries: list[str]) -> str:
    lines = ["The workspace's Claude Code settings declare hooks (commands run on your machine):"]
    lines += [f"  {escape_invisible(text, keep_newlines=False)}" for text in entries]
    lines.append("Run these hooks?")
    return "\n".join(lines)


def _load(path: Path) -> dict[str, Any]:
    """The user settings file as an object; ValueError when a rule cannot be added to it."""
    if not path.exists():
        return {}
    if path.stat().st_size > MAX_SETTINGS_FILE:
        raise ValueError(f"{path} is too large")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict) or not isinstance(permissions.get("allow", []), list):
        raise ValueError(f"`permissions.allow` in {path} is not a list")
    return data


def _add_rule(path: Path, rule: str) -> None:
    path = path.resolve()  # a settings file kept as a link (dotfiles): its target is written
    data = _load(path)
    permissions = data.setdefault("permissions", {})
    allow = permissions.setdefault("allow", [])
    if rule in allow:
        return
    allow.append(rule)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())
