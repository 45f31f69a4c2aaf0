"""`agent-lsp doctor`: checks what a run needs and says precisely what is wrong: the API key, the
endpoint (GET /models), the model, ripgrep, the sandbox (bwrap and namespaces) and the MCP servers."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent import keyguard
from agent_lsp.agent.display import for_terminal
from agent_lsp.settings import Settings
from agent_lsp.terminal import Style


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class SettingsSource:
    """What the settings came from: the user's file (found or not) and the problems met."""

    path: Path
    found: bool
    file_problems: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def checks(self) -> list[Check]:
        """First in the list: a file that is not JSON explains every check after it."""
        if self.file_problems:
            first = [Check("settings file", False, problem) for problem in self.file_problems]
        elif self.found:
            first = [Check("settings file", True, f"{self.path} (loaded)")]
        else:
            first = [Check("settings file", True, f"{self.path}: not found (the defaults and the environment apply)")]
        return first + [Check("settings", False, problem) for problem in self.problems]


async def run_checks(settings: Settings, roots: list[Any]) -> list[Check]:
    from agent_lsp.agent.host import AgentHost

    checks: list[Check] = []
    key = keyguard.environment().get(settings.api_key_env)
    local = bool(settings.base_url or os.environ.get("OPENAI_BASE_URL"))
    if settings.model.startswith("replay:"):
        checks.append(Check("model", True, f"{settings.model} (offline replay: no endpoint needed)"))
    else:
        checks.append(Check("API key", bool(key) or local,
                            f"{settings.api_key_env} is set" if key else
                            f"{settings.api_key_env} is not set; fine for a local server at {settings.base_url or os.environ.get('OPENAI_BASE_URL')}"
                            if local else f"{settings.api_key_env} is not set: export it, or set apiKeyEnv / baseUrl"))
        host = AgentHost()
        try:
            found = await host.list_models(settings)
        finally:
            await host.aclose()
        endpoint = settings.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        if found.get("error"):
            checks.append(Check("endpoint", False, found["error"]))
        else:
            models = found["models"]
            checks.append(Check("endpoint", True, f"{endpoint} answered GET /models ({len(models)} model{'s' if len(models) != 1 else ''})"))
            known = settings.model in models
            checks.append(Check("model", known or not models,
                                f"{settings.model} is served by the endpoint" if known else
                                f"the endpoint lists no models; {settings.model} is assumed" if not models else
                                f"{settings.model} is not among the endpoint's models (e.g. {', '.join(models[:5])}): set `model`"))
    checks.append(_ripgrep())
    checks.append(await _sandbox(settings))
    checks += await _mcp(settings, roots)
    return checks


def _ripgrep() -> Check:
    import subprocess

    from agent_lsp.agent.tools import ripgrep

    rg = ripgrep.find_rg()
    if rg is None:
        return Check("ripgrep", False, f"`rg` was not found: {ripgrep.INSTALL_HINT}")
    try:
        version = subprocess.run([rg, "--version"], capture_output=True, text=True, timeout=10, env=keyguard.child_env()).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        return Check("ripgrep", False, f"{rg} does not run ({exc}): {ripgrep.INSTALL_HINT}")
    return Check("ripgrep", True, f"{version} at {rg}")


async def _sandbox(settings: Settings) -> Check:
    from agent_lsp.agent import sandbox

    problem = await sandbox.probe()
    if settings.sandbox.mode == "off":
        return Check("sandbox", True, "sandbox.mode is off (commands run unconfined, after approval)"
                     + ("" if problem is None else f"; to turn it on: {problem}"))
    if problem is not None:
        return Check("sandbox", False, f"sandbox.mode is {settings.sandbox.mode}, but {problem}: every run_command is refused")
    return Check("sandbox", True, f"bubblewrap works here ({settings.sandbox.mode}, network {'on' if settings.sandbox.network else 'off'})")


async def _mcp(settings: Settings, roots: list[Any]) -> list[Check]:
    """Start the user's own MCP servers and list their tools; workspace servers are only listed
    (doctor never starts what the user has not allowed)."""
    if not roots:
        return []
    from agent_lsp.mcp.hub import McpHub

    hub = McpHub()
    try:
        manager = await hub.toolset(roots, settings)
        await manager.tools()
        checks = []
        for item in manager.status():
            ok = item["state"] in ("running", "needs-consent", "denied")
            detail = {"running": f"running, {len(item['tools'])} tools", "needs-consent": "declared by the workspace; asks before it starts",
                      "denied": f"not started: {item.get('error', 'denied')}"}.get(item["state"], item.get("error") or item["state"])
            checks.append(Check(f"MCP {item['name']} ({item['source']})", ok, detail))
        checks += [Check("MCP settings", False, problem) for problem in manager.problems]
        return checks
    finally:
        await hub.aclose()


async def doctor_cli(args: argparse.Namespace, settings: Settings, source: SettingsSource | None = None) -> int:
    checks = (source.checks() if source else []) + await run_checks(settings, [args.workspace.resolve()])
    if args.json:
        print(json.dumps({"ok": all(c.ok for c in checks), "checks": [c.to_dict() for c in checks]}))
    else:
        s = Style.for_stream(sys.stdout)
        for check in checks:
            # Names and details quote the endpoint and MCP servers: no control character passes.
            print(f"{s.ok() if check.ok else s.bad()} {s.bold(for_terminal(check.name))}: {for_terminal(check.detail)}")
    return 0 if all(c.ok for c in checks) else 1
