"""What was found of the user's setup, and from where: `agentLsp.setup {}` and `agent-lsp doctor`
(CONTRACT "Your existing setup", Decision 37). One function for both front ends; it starts
nothing (no language server, no MCP server, no hook): it reads files and asks what is already
running."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_lsp.agent.fs.prompt_files import discover
from agent_lsp.agent.policy.claude_files import ClaudeFile, claude_files, user_file_path
from agent_lsp.agent.policy.hook_config import (
    HookSpec,
    claude_project_files,
    declared_hooks,
    never_consented,
    setup_rows,
)
from agent_lsp.agent.policy.rules import Effect, Rule
from agent_lsp.settings import Settings

if TYPE_CHECKING:
    from agent_lsp.agent.host import AgentHost


async def gather_setup(
    settings: Settings,
    roots: list[Path],
    *,
    host: AgentHost | None = None,
    editor: bool = False,
    env: Mapping[str, str] | None = None,
    hook_consent: Callable[[HookSpec], bool] | None = None,
) -> dict[str, Any]:
    """`{rules, hooks, skills, commands, agents, memoryFiles, languageServers, mcpServers,
    problems: [{path, error}], ignored: [{path, key}]}`. `host`: the front end's own (its MCP
    servers and language servers are asked how they are, never started); `editor`: the client
    answers code intelligence itself (a `languageServers` row of source "editor")."""
    paths = [Path(r) for r in roots]
    files, table, claude = await asyncio.gather(
        asyncio.to_thread(discover, paths),
        asyncio.to_thread(
            declared_hooks,
            dict(settings.hooks),
            paths,
            env=env,
            consented=hook_consent or _hook_consent(paths, host),
        ),
        asyncio.to_thread(claude_files, paths, env),
    )
    rules, problems, ignored = await asyncio.to_thread(rule_rows, settings, paths, claude, host)
    ignored += await asyncio.to_thread(_project_settings_ignored, paths)
    known = [str(user_file_path(env)), *(str(p) for p in claude_project_files(paths))]
    read_errors = {f.hooks_error for f in claude}  # named with the file's error by rule_rows
    problems += [_split(text, known) for text in table.problems if text not in read_errors]
    problems += files.problems
    servers, mcp_problems = await _mcp_servers(settings, paths, host)
    problems += [_split(text, known) for text in mcp_problems]
    return {
        "rules": rules,
        "hooks": setup_rows(table),
        "skills": files.listing("skill"),
        "commands": files.listing("command"),
        "agents": files.listing("agent"),
        "memoryFiles": await asyncio.to_thread(memory_rows, settings.memory_files, paths),
        "languageServers": _language_servers(settings, paths, host, editor),
        "mcpServers": servers,
        "problems": _unique(problems),
        "ignored": ignored,
    }


def memory_rows(names: list[str], roots: list[Path]) -> list[dict[str, Any]]:
    """`[{path, present}]`: each memoryFiles name in each workspace folder (an absolute name
    once); present when loop/memory.py would read it: a regular file, inside its workspace
    folder for a relative name."""
    rows: list[dict[str, Any]] = []
    for name in names:
        given = Path(name).expanduser()
        found = [(given, None)] if given.is_absolute() else [(root / name, root) for root in roots]
        for path, root in found:
            try:
                resolved = path.resolve()
                present = resolved.is_file() and (
                    root is None or resolved.is_relative_to(root.resolve())
                )
            except (OSError, RuntimeError):
                present = False
            rows.append({"path": str(path), "present": present})
    return rows


def rule_rows(
    settings: Settings, roots: list[Path], files: list[ClaudeFile], host: AgentHost | None
) -> tuple[list[dict[str, Any]], list[dict[str, str]], list[dict[str, str]]]:
    """(rules, problems, ignored) of the trusted settings and Claude Code's files (Decisions
    26-30): a project's allow rule is active once consented (remembered, or allowed in this
    process), denied when refused, else it waits; a tool agent-lsp does not have is ignored."""
    from agent_lsp.agent.policy.approval import settings_rules
    from agent_lsp.mcp.consent import workspace_key
    from agent_lsp.permissions.consent import ProjectConsent
    from agent_lsp.permissions.source import CONSENT_KIND, ClaudePermissions
    from agent_lsp.settings import state_dir

    source = getattr(host, "permissions", None)
    own = source if isinstance(source, ClaudePermissions) else None
    store = own.store if own else ProjectConsent(state_dir() / "project-consent.json")
    key = workspace_key(roots) if roots else ""
    once = own.allowed_once.get(f"{CONSENT_KIND}\0{key}", set()) if own else set()
    rows: list[dict[str, Any]] = []

    def add(rule: Rule, state: str = "active", shown: str | None = None) -> None:
        row: dict[str, Any] = {
            "rule": shown or rule.text,
            "effect": rule.effect,
            "source": rule.source,
            "scope": rule.scope,
            "state": state if rule.known else "ignored",
        }
        if not rule.known:
            row["why"] = "agent-lsp has no such tool"
        rows.append(row)

    effects: tuple[Effect, ...] = ("deny", "ask", "allow")
    for effect in effects:
        for text in getattr(settings.permissions, effect):
            add(Rule.parse(text, effect, "permissions"))
    for rule in settings_rules(settings.approval):
        add(rule, shown=f"Bash({rule.specifier})")
    for name, value in settings.approval.tools.items():
        rows.append(
            {"rule": name, "effect": value, "source": "approval.tools", "scope": "user",
             "state": "active"}
        )  # fmt: skip
    problems: list[dict[str, str]] = []
    ignored: list[dict[str, str]] = []
    for file in files:
        path = str(file.path)
        if file.error:
            problems.append({"path": path, "error": file.problem or file.error})
        ignored += [{"path": path, "key": k} for k in file.ignored]
        for effect in effects:
            for text in file.permissions.get(effect, []):
                state = "active"
                if file.scope == "project" and effect == "allow":
                    answer = store.answer(key, CONSENT_KIND, text)
                    state = (
                        "active" if answer == "allow" or text in once
                        else "denied" if answer == "deny"
                        else "needs-consent"
                    )  # fmt: skip
                add(Rule.parse(text, effect, path, file.scope, file.folder), state)
    for text in own.saved if own else []:  # "Always allow" of this process
        add(Rule.parse(text, "allow", "always"))
    return rows, problems, ignored


def _language_servers(
    settings: Settings, roots: list[Path], host: AgentHost | None, editor: bool
) -> list[dict[str, Any]]:
    """The editor (when it answers), then the servers agent-lsp would start: configured, then
    auto-detected on PATH (none started here)."""
    from agent_lsp.langservers.hub import LanguageServerHub
    from agent_lsp.langservers.manager import LanguageServers

    rows: list[dict[str, Any]] = []
    if editor:
        rows.append({"name": "editor", "command": [], "source": "editor", "state": "active"})
    if not roots:
        return rows
    hub = getattr(host, "code_intel", None)
    if isinstance(hub, LanguageServerHub):
        return rows + hub.found(roots)
    servers = LanguageServers(settings.language_servers, roots, api_key_env=settings.api_key_env)
    return rows + servers.found()


async def _mcp_servers(
    settings: Settings, roots: list[Path], host: AgentHost | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The MCP servers as they are (`agentLsp.mcpServers`' items); a server not started yet
    stays so."""
    if not roots:
        return [], []
    from agent_lsp.mcp.config import from_user_settings, from_workspace
    from agent_lsp.mcp.hub import McpHub

    _, problems = from_user_settings(settings.mcp_servers)
    _, more = await asyncio.to_thread(from_workspace, roots)
    servers = host.tool_servers if host is not None else None
    hub = McpHub() if servers is None else servers
    try:
        manager = await hub.toolset(roots, settings)
        return list(manager.status()), [*problems, *more]
    finally:
        if servers is None:
            await hub.aclose()


def _split(problem: str, known: list[str]) -> dict[str, str]:
    """`"<path>: <error>"` as `{path, error}` (a known file's path may hold `: `)."""
    for path in sorted(known, key=len, reverse=True):
        if problem.startswith(path + ": ") or problem.startswith(path + " "):
            return {"path": path, "error": problem[len(path) :].lstrip(": ").strip()}
    head, sep, rest = problem.partition(": ")
    if sep and (os.sep in head or head == "settings" or "." in head):
        return {"path": head, "error": rest}
    return {"path": "", "error": problem}


def _unique(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for row in rows:
        key = (row["path"], row["error"])
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def setup_lines(setup: dict[str, Any]) -> list[tuple[str, str]]:
    """The setup as readable lines, grouped: (kind, text) with kind `head` (a group's title),
    `row`, `bad` (a problem) or `none`. Front ends style them and escape control characters."""
    out: list[tuple[str, str]] = []

    def group(title: str, rows: list[str], bad: bool = False) -> None:
        out.append(("head", title))
        out.extend((("bad" if bad else "row"), r) for r in rows)
        if not rows:
            out.append(("none", "none"))

    group("Permission rules", [
        f"{r['state']:<13} {r['effect']:<5} {r['rule']}  ({r['scope']}: {r['source']})"
        + (f" ({r['why']})" if r.get("why") else "")
        for r in setup["rules"]
    ])  # fmt: skip
    group("Hooks", [
        f"{h['state']:<13} {h['event']}" + (f" [{h['matcher']}]" if h["matcher"] else "") + ": "
        f"{h['command']}  ({h['scope']}: {h['source']})"
        for h in setup["hooks"]
    ])  # fmt: skip
    for key, title in (("skills", "Skills"), ("commands", "Commands"), ("agents", "Agents")):
        group(title, [
            f"{p['name']}: "
            + (f"not used: {p['error']}" if p.get("error") else p["description"] or "-")
            + f"  ({p['scope']}: {p['path']})"
            for p in setup[key]
        ])  # fmt: skip
    group("Memory files", [
        f"{'present' if m['present'] else 'absent':<13} {m['path']}" for m in setup["memoryFiles"]
    ])  # fmt: skip
    group("Language servers", [
        f"{s['state']:<13} {s['name']} ({s['source']})"
        + (f": {' '.join(s['command'])}" if s.get("command") else "")
        + (f" ({s['why']})" if s.get("why") else "")
        for s in setup["languageServers"]
    ])  # fmt: skip
    group("MCP servers", [
        f"{s['state']:<13} {s['name']} ({s['source']})"
        + (f": {s['error']}" if s.get("error") else "")
        for s in setup["mcpServers"]
    ])  # fmt: skip
    group("Not read from Claude Code's files", [
        f"{i['path']}: {i['key']}" for i in setup["ignored"]
    ])  # fmt: skip
    group("Problems", [
        f"{p['path']}: {p['error']}" if p["path"] else p["error"] for p in setup["problems"]
    ], bad=True)  # fmt: skip
    return out


def _project_settings_ignored(roots: list[Path]) -> list[dict[str, str]]:
    """A project's `.agent-lsp/settings.json` is read for `verify` only (Decision 83)."""
    from agent_lsp.permissions.project_verify import project_keys_ignored

    rows = [line.rsplit(": ", 1) for line in project_keys_ignored(roots)]
    return [{"path": path, "key": f"{key} (only verify is read)"} for path, key in rows]


def _hook_consent(roots: list[Path], host: AgentHost | None) -> Callable[[HookSpec], bool]:
    """A project hook's consent as remembered (or allowed in this process); asks nobody."""
    from agent_lsp.mcp.consent import workspace_key
    from agent_lsp.permissions.consent import ProjectConsent
    from agent_lsp.permissions.source import HOOK_KIND, ClaudePermissions, hook_entry
    from agent_lsp.settings import state_dir

    if not roots:
        return never_consented
    source = getattr(host, "permissions", None)
    own = source if isinstance(source, ClaudePermissions) else None
    store = own.store if own else ProjectConsent(state_dir() / "project-consent.json")
    key = workspace_key(roots)
    once = own.allowed_once.get(f"{HOOK_KIND}\0{key}", set()) if own else set()
    return lambda spec: (
        hook_entry(spec) in once or store.answer(key, HOOK_KIND, hook_entry(spec)) == "allow"
    )
