"""The health checks of a setup, computed in one place for `agent-lsp doctor` and the LSP
command `agentLsp.health` (CONTRACT Decision 47): the settings file, the API key, the endpoint
(GET /models), the model, ripgrep, the sandbox (bwrap and namespaces, and the seccomp filter
that keeps unix sockets out with the network off), the MCP servers, the
language servers agent-lsp would start, the debug sources and, when it is on, telemetry (the
`otel` extra installed)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_lsp.agent.exec import keyguard
from agent_lsp.settings import Settings

if TYPE_CHECKING:
    from agent_lsp.agent.host import AgentHost


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
            first = [
                Check(
                    "settings file",
                    True,
                    f"{self.path}: not found (the defaults and the environment apply)",
                )
            ]
        return first + [Check("settings", False, problem) for problem in self.problems]


async def run_checks(
    settings: Settings,
    roots: list[Any],
    *,
    host: AgentHost | None = None,
    start_mcp: bool = True,
    endpoint_timeout: float | None = None,
    editor_debug: bool = False,
) -> list[Check]:
    """Every check, in a fixed order. `host`: the server's own (its model client and MCP servers;
    nothing is closed), else a private one. `start_mcp: False` (the LSP command) only reports what
    the MCP servers are doing, starting none. `endpoint_timeout` bounds GET /models. `editor_debug`:
    the client advertises its debugger (`agentLsp/debug`)."""
    # The slow checks (the endpoint, the sandbox probe, rg, the MCP servers) go at once.
    offline = settings.model.startswith("replay:")
    models = None if offline else asyncio.ensure_future(_models(settings, host, endpoint_timeout))
    others = asyncio.gather(
        _ripgrep(), _sandbox(settings), _seccomp(settings), _mcp(settings, roots, host, start_mcp)
    )
    checks: list[Check] = []
    key = keyguard.environment().get(settings.api_key_env)
    local = bool(settings.base_url or os.environ.get("OPENAI_BASE_URL"))
    if models is None:
        checks.append(
            Check("model", True, f"{settings.model} (offline replay: no endpoint needed)")
        )
    else:
        checks.append(
            Check(
                "API key",
                bool(key) or local,
                f"{settings.api_key_env} is set"
                if key
                else (
                    f"{settings.api_key_env} is not set; fine for a local server at "
                    f"{settings.base_url or os.environ.get('OPENAI_BASE_URL')}"
                )
                if local
                else f"{settings.api_key_env} is not set: export it, or set apiKeyEnv / baseUrl",
            )
        )
        checks += _endpoint_checks(settings, await models)
    rg, sandbox, seccomp, mcp = await others
    servers = _language_servers(settings, roots, host)
    debug = _debug(settings, editor_debug)
    return [*checks, rg, sandbox, seccomp, *mcp, *servers, debug, *_telemetry(settings)]


def _debug(settings: Settings, editor: bool) -> Check:
    """The debug sources (CONTRACT "The debugger (turn 4)", Decision 61): the editor's debugger
    when the client advertises one, and debugpy's adapter agent-lsp starts itself."""
    from agent_lsp.agent.exec.program_path import find_program
    from agent_lsp.agent.tools.debugger.sources import debugpy_dir, debugpy_version

    sources = []
    problems = []
    if editor:
        sources.append(
            "editor" + (" (not used: the sandbox is on)" if settings.sandbox.mode != "off" else "")
        )
    if debugpy_dir() is not None:
        python = settings.debug.python or find_program("python3")
        where = f"programs run under {python}" if python else "no python3 on PATH"
        sandboxed = ", sandboxed" if settings.sandbox.mode != "off" else ""
        sources.append(f"debugpy {debugpy_version() or '?'} ({where}{sandboxed})")
        if not python:
            problems.append("no python3 on the PATH: set debug.python")
    else:
        problems.append("debugpy is not installed in agent-lsp's environment (pip install debugpy)")
    for name, adapter in settings.debug_adapters.items():
        found = find_program(adapter.command[0])
        sources.append(f"{name} ({', '.join(adapter.languages)}: {found or adapter.command[0]})")
        if found is None:
            problems.append(f"debugAdapters.{name}: {adapter.command[0]!r} is not on the PATH")
    detail = ", ".join(sources) or "no debug source"
    return Check("debug", not problems, "; ".join([detail, *problems]))


def _language_servers(settings: Settings, roots: list[Any], host: AgentHost | None) -> list[Check]:
    """The language servers agent-lsp would start (configured, then auto-detected on PATH), one
    check each; none is started here (Decision 37)."""
    from agent_lsp.langservers.config import AUTO
    from agent_lsp.langservers.hub import LanguageServerHub
    from agent_lsp.langservers.manager import LanguageServers

    hub = getattr(host, "code_intel", None)
    paths = [Path(r) for r in roots]
    if isinstance(hub, LanguageServerHub) and paths:
        found = hub.found(paths)
    else:
        found = LanguageServers(settings.language_servers, paths).found()
    checks = []
    for item in found:
        command = " ".join(item["command"])
        where = ", ".join(item["extensions"])
        how = "found on PATH" if item["source"] == "auto" else "configured"
        ok, detail = True, f"`{command}` for {where} ({how}); starts with the first request"
        if item.get("running"):
            detail = f"`{command}` for {where} ({how}); running ({item['running']})"
        if item["state"] == "ignored":
            detail = f"`{command}` is not used: {item['why']}"
        elif item["source"] == "configured" and not _runnable(item["command"][0]):
            ok, detail = False, f"`{item['command'][0]}` was not found on PATH: install it"
        if item.get("error"):
            ok, detail = False, f"{detail}; {item['error']}"
        checks.append(Check(f"language server {item['name']} ({item['source']})", ok, detail))
    if not checks:
        names = ", ".join(command[0] for _, command in AUTO)
        detail = (
            f"none: none of {names} is on PATH, and languageServers.servers is empty"
            if settings.language_servers.auto
            else "none: languageServers.auto is off and languageServers.servers is empty"
        )
        checks.append(Check("language servers", True, detail))
    return checks


def _runnable(program: str) -> bool:
    from agent_lsp.agent.exec.program_path import find_program

    return find_program(program) is not None


def _telemetry(settings: Settings) -> list[Check]:
    """Only when telemetry is on: whether the `otel` extra is there, and where spans go."""
    if not settings.telemetry.enabled:
        return []
    from agent_lsp.telemetry.hub import EXTRA_HINT, missing_extra
    from agent_lsp.telemetry.signals import exporting

    missing = missing_extra()
    if missing is not None:
        return [Check("telemetry", False, f"telemetry is on but {missing}: {EXTRA_HINT}")]
    endpoint = _without_userinfo(
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or "http://localhost:4318 (the OTLP default)"
    )
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    content = ", prompts and tool arguments included" if settings.telemetry.log_content else ""
    off = [s.lower() for s in ("TRACES", "METRICS") if not exporting(s)]
    none = f"; not exported: {', '.join(off)} (OTEL_*_EXPORTER=none)" if off else ""
    return [Check("telemetry", True, f"on: OTLP {protocol} to {endpoint}{content}{none}")]


def _without_userinfo(url: str) -> str:
    """An endpoint as shown: a user or password in its URL is a credential, never printed."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    if not sep or "@" not in host:
        return url
    return f"{scheme}://[credentials hidden]@{host.rpartition('@')[2]}{slash}{path}"


def _endpoint_checks(settings: Settings, found: dict[str, Any]) -> list[Check]:
    endpoint = settings.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    if found.get("error"):
        return [Check("endpoint", False, found["error"])]
    models = found["models"]
    known = settings.model in models
    return [
        Check(
            "endpoint",
            True,
            f"{endpoint} answered GET /models "
            f"({len(models)} model{'s' if len(models) != 1 else ''})",
        ),
        Check(
            "model",
            known or not models,
            f"{settings.model} is served by the endpoint"
            if known
            else f"the endpoint lists no models; {settings.model} is assumed"
            if not models
            else (
                f"{settings.model} is not among the endpoint's models "
                f"(e.g. {', '.join(models[:5])}): set `model`"
            ),
        ),
    ]


async def _models(
    settings: Settings, host: AgentHost | None, timeout: float | None
) -> dict[str, Any]:
    """The endpoint's GET /models (`{current, models, error?}`), within `timeout` seconds."""
    from agent_lsp.agent.host import AgentHost

    own = host is None
    lister = AgentHost() if host is None else host
    try:
        return await asyncio.wait_for(lister.list_models(settings), timeout)
    except TimeoutError:
        endpoint = (
            settings.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        )
        return {
            "current": settings.model,
            "models": [],
            "error": f"{endpoint} did not answer GET /models within {timeout:g} s",
        }
    finally:
        if own:
            await lister.aclose()


async def _ripgrep() -> Check:
    return await asyncio.to_thread(_ripgrep_check)  # runs `rg --version`: never on the event loop


def _ripgrep_check() -> Check:
    import subprocess

    from agent_lsp.agent.fs import ripgrep

    rg = ripgrep.find_rg()
    if rg is None:
        return Check("ripgrep", False, f"`rg` was not found: {ripgrep.INSTALL_HINT}")
    try:
        version = subprocess.run(
            [rg, "--version"], capture_output=True, text=True, timeout=10, env=keyguard.child_env()
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        return Check("ripgrep", False, f"{rg} does not run ({exc}): {ripgrep.INSTALL_HINT}")
    return Check("ripgrep", True, f"{version} at {rg}")


async def _sandbox(settings: Settings) -> Check:
    from agent_lsp.agent.exec import sandbox

    problem = await sandbox.probe()
    if settings.sandbox.mode == "off":
        return Check(
            "sandbox",
            True,
            "sandbox.mode is off (commands run unconfined, after approval)"
            + ("" if problem is None else f"; to turn it on: {problem}"),
        )
    if problem is not None:
        return Check(
            "sandbox",
            False,
            f"sandbox.mode is {settings.sandbox.mode}, but {problem}: every run_command is refused",
        )
    return Check(
        "sandbox",
        True,
        f"bubblewrap works here ({settings.sandbox.mode}, "
        f"network {'on' if settings.sandbox.network else 'off'})",
    )


async def _seccomp(settings: Settings) -> Check:
    """The filter that refuses unix sockets to sandboxed commands with the network off
    (Decision 67): without it those commands are refused."""
    from agent_lsp.agent.exec import seccomp

    problem = await asyncio.to_thread(seccomp.problem)
    needed = settings.sandbox.mode != "off" and not settings.sandbox.network
    if problem is None:
        return Check(
            "seccomp",
            True,
            f"{seccomp.describe()}: with sandbox.network off, sandboxed commands cannot open "
            "unix sockets",
        )
    if needed:
        return Check("seccomp", False, f"{problem}: every run_command is refused")
    why = "sandbox.mode is off" if settings.sandbox.mode == "off" else "sandbox.network is on"
    return Check("seccomp", True, f"not needed now ({why}); with the network off: {problem}")


async def _mcp(
    settings: Settings, roots: list[Any], host: AgentHost | None, start: bool
) -> list[Check]:
    """doctor starts the user's own MCP servers and lists their tools; workspace servers are only
    listed (doctor never starts what the user has not allowed). The LSP command starts none: a
    server not started yet is "starts with the first run that needs it"."""
    if not roots:
        return []
    from agent_lsp.mcp.hub import McpHub

    servers = host.tool_servers if host is not None else None
    own = servers is None
    hub = McpHub() if servers is None else servers
    try:
        manager = await hub.toolset(roots, settings)
        if start:
            await manager.tools()
        checks = []
        for item in manager.status():
            ok = item["state"] in ("running", "needs-consent", "denied", "idle", "starting")
            detail = {
                "running": f"running, {len(item['tools'])} tools",
                "needs-consent": "declared by the workspace; asks before it starts",
                "denied": f"not started: {item.get('error', 'denied')}",
                "idle": "not started yet: starts with the first run that needs it",
                "starting": "starting",
            }.get(item["state"], item.get("error") or item["state"])
            checks.append(Check(f"MCP {item['name']} ({item['source']})", ok, detail))
        checks += [
            Check("MCP settings", False, problem) for problem in getattr(manager, "problems", [])
        ]
        return checks
    finally:
        if own:
            await hub.aclose()


def report(checks: list[Check]) -> dict[str, Any]:
    """`{ok, checks: [{name, ok, detail}]}`: what `agentLsp.health` and `doctor --json` answer."""
    return {"ok": all(c.ok for c in checks), "checks": [c.to_dict() for c in checks]}
