"""The one settings model, its sources (defaults < user settings file < environment <
initializationOptions < workspace configuration) and the trust boundary between the user's own
configuration and a repository's."""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_lsp.settings_schema import ApprovalSettings as ApprovalSettings
from agent_lsp.settings_schema import BudgetSettings as BudgetSettings
from agent_lsp.settings_schema import DebugSettings as DebugSettings
from agent_lsp.settings_schema import Decision as Decision
from agent_lsp.settings_schema import LanguageServer as LanguageServer
from agent_lsp.settings_schema import LanguageServersSettings as LanguageServersSettings
from agent_lsp.settings_schema import McpSettings as McpSettings
from agent_lsp.settings_schema import PermissionSettings as PermissionSettings
from agent_lsp.settings_schema import Pricing as Pricing
from agent_lsp.settings_schema import SandboxSettings as SandboxSettings
from agent_lsp.settings_schema import Settings as Settings
from agent_lsp.settings_schema import TelemetrySettings as TelemetrySettings
from agent_lsp.settings_schema import state_dir as state_dir

log = logging.getLogger(__name__)
MAX_SETTINGS_FILE = 1_000_000

# Fields a cloned repository's settings (workspace/configuration) must never set: filtered by
# the field they parse to, in every spelling pydantic accepts, never by the key's text.
TRUSTED_FIELDS = frozenset(
    {
        "base_url",
        "api_key_env",
        "transcript_dir",
        "memory_files",
        "mcp_servers",
        "approval",
        "mcp",
        "sandbox",
        "telemetry",
        "budget",  # Decision 25: a repository must not lift the user's cost limit
        "pricing",  # ... nor lower a price to lift it (Decision 25)
        "hooks",  # commands that run on the user's machine (Decision 25)
        "language_servers",  # they start processes (Decision 25)
        "model_aliases",  # ... nor send the user's commands and agents to another model
        "permissions",  # ... nor allow what the user's rules ask for (Decision 25)
        "verify",  # ... nor name commands to run at a run's end (Decision 83)
        "debug",  # ... nor let debug_eval run unasked, nor pick the debugged interpreter
        "debug_adapters",  # ... nor name a program to start as a debug adapter
    }
)
# Settings whose every allowed source adds to the others rather than replacing them
# (Decision 25): hooks declared in the user settings file and in initializationOptions all run.
UNION_FIELDS = frozenset({"hooks"})

ENVIRONMENT = {
    "AGENT_LSP_MODEL": "model",
    "AGENT_LSP_BASE_URL": "baseUrl",
    "AGENT_LSP_MAX_TURNS": "maxTurns",
    "AGENT_LSP_TRANSCRIPT_DIR": "transcriptDir",
}
TELEMETRY_ENV = "AGENT_LSP_ENABLE_TELEMETRY"  # `1` (or true, yes, on): telemetry.enabled


def user_settings_path(env: Mapping[str, str] | None = None) -> Path:
    """The trusted user settings file: $AGENT_LSP_SETTINGS, else the user config dir's."""
    source = os.environ if env is None else env
    if explicit := source.get("AGENT_LSP_SETTINGS"):
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("agent-lsp")) / "settings.json"


def from_user_file(path: Path | None = None) -> tuple[dict[str, Any], list[str]]:
    """The user's own settings file (absent: nothing). Problems are readable, never raised."""
    path = user_settings_path() if path is None else path
    try:
        if not path.is_file():
            return {}, []
        if path.stat().st_size > MAX_SETTINGS_FILE:
            return {}, [
                f"the settings file {path} is larger than {MAX_SETTINGS_FILE} bytes: ignored"
            ]
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [f"cannot read the settings file {path}: {exc}"]
    except json.JSONDecodeError as exc:
        return {}, [json_problem(path, exc)]
    if not isinstance(data, dict):
        return {}, [
            f"the settings file {path} must hold a JSON object, got {type(data).__name__}: ignored"
        ]
    return data, []


def json_problem(path: Path, exc: json.JSONDecodeError) -> str:
    """Where the file stops being JSON, and what that costs: none of its settings apply."""
    hint = ""
    if exc.doc[exc.pos : exc.pos + 2] in ("//", "/*"):
        hint = "; JSON has no comments: remove the `//` or `/* */` comment"
    return (
        f"the settings file {path} is not valid JSON: "
        f"{exc.msg} at line {exc.lineno} column {exc.colno}{hint}. "
        "The whole file is ignored: none of its settings apply "
        "(its sandbox and approval settings included)"
    )


def from_environment(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    source = os.environ if env is None else env
    layer: dict[str, Any] = {}
    if url := source.get("OPENAI_BASE_URL"):
        layer["baseUrl"] = url
    for name, key in ENVIRONMENT.items():
        if value := source.get(name):
            layer[key] = value
    if source.get(TELEMETRY_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        layer["telemetry"] = {"enabled": True}
    return layer


def _normalised(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def field_for(key: Any, model: type[BaseModel] = Settings) -> str | None:
    """The field a key parses to (alias or name), matched leniently: any case, `_` or `-`."""
    if not isinstance(key, str):
        return None
    wanted = _normalised(key)
    for name, info in model.model_fields.items():
        if wanted in (_normalised(name), _normalised(info.alias or name)):
            return name
    return None


def without_untrusted(layer: Any) -> tuple[dict[str, Any], list[str]]:
    """What a workspace-configuration layer may set: known, safe fields only, re-keyed to their
    camelCase names. Returns (kept, dropped keys as written)."""
    if not isinstance(layer, dict):
        return {}, []
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in layer.items():
        name = field_for(key)
        if name is None:
            kept[key] = value  # unknown: resolve drops it and warns with the closest valid key
            continue
        if name in TRUSTED_FIELDS or (name == "model" and is_replay(value)):
            dropped.append(str(key))
            continue
        kept[Settings.model_fields[name].alias or name] = value
    return kept, sorted(dropped)


def is_replay(model: Any) -> bool:
    """A `replay:` model reads a file the name points at: trusted sources only."""
    return isinstance(model, str) and model.strip().lower().startswith("replay:")


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _union_permissions(merged: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`permissions.*` lists add up over the sources (Decision 25): a later source never drops
    an earlier one's deny."""
    below, top = merged.get("permissions"), layer.get("permissions")
    if not isinstance(below, dict) or not isinstance(top, dict):
        return layer
    joined = dict(top)
    for key, value in top.items():
        if isinstance(value, list) and isinstance(below.get(key), list):
            items = [*below[key], *value]
            hashable = all(isinstance(i, str) for i in items)
            joined[key] = list(dict.fromkeys(items)) if hashable else items
    return {**layer, "permissions": joined}


# Keys whose typo silently weakens the user's protection or sends the key elsewhere: their
# unknown neighbours are warned about loudly, saying what is in force instead.
SECURITY_KEYS = frozenset({"sandbox", "approval", "mcp", "mcpServers", "apiKeyEnv", "baseUrl"})


@dataclass(frozen=True)
class UnknownKey:
    path: str  # dotted, the parents by their camelCase names: `sandbox.mdoe`
    suggestion: str | None  # the closest valid key at that level, dotted: `sandbox.mode`
    dotted: bool = False  # the key was written `"sandbox.mode": ...` where a nested object belongs


def _closest(key: Any, model: type[BaseModel]) -> str | None:
    if not isinstance(key, str):
        return None
    if "." in key:  # `sandbox.mode` written flat: the nested key it names, if there is one
        head, _, rest = key.partition(".")
        name = field_for(head, model)
        info = model.model_fields[name] if name else None
        sub = (
            info.annotation
            if info and isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
            else None
        )
        inner = field_for(rest, sub) if sub else None
        if info and sub and inner:
            return f"{info.alias or name}.{sub.model_fields[inner].alias or inner}"
    names = {
        (info.alias or name).lower(): info.alias or name
        for name, info in model.model_fields.items()
    }
    found = difflib.get_close_matches(key.lower(), list(names), n=1, cutoff=0.6)
    return names[found[0]] if found else None


def _canonical(
    layer: dict[str, Any],
    model: type[BaseModel] = Settings,
    prefix: str = "",
    unknown: list[UnknownKey] | None = None,
) -> dict[str, Any]:
    """Keys re-spelled as their camelCase alias (so layers merge key by key whatever the
    spelling); unknown keys are dropped and collected in `unknown`. Free-form maps (pricing,
    tools, mcpServers) keep their own keys."""
    out: dict[str, Any] = {}
    for key, value in layer.items():
        name = field_for(key, model)
        if name is None:
            log.info("ignoring unknown setting %r", f"{prefix}{key}")
            if unknown is not None:
                closest = _closest(key, model)
                unknown.append(
                    UnknownKey(
                        f"{prefix}{key}",
                        f"{prefix}{closest}" if closest else None,
                        dotted=bool(closest and "." in closest),
                    )
                )
            continue
        info = model.model_fields[name]
        sub = (
            info.annotation
            if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
            else None
        )
        if sub is not None and isinstance(value, dict):
            value = _canonical(value, sub, f"{prefix}{info.alias or name}.", unknown)
        out[info.alias or name] = value
    return out


def _in_force(settings: Settings, dotted: str) -> Any:
    node: Any = settings.model_dump(by_alias=True)
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _shown_value(value: Any) -> str:
    return (
        "not set"
        if value is None
        else f"`{value}`"
        if isinstance(value, str)
        else f"`{json.dumps(value)}`"
    )


def unknown_key_problem(unknown: UnknownKey, settings: Settings) -> str:
    """The warning for one unknown key: the closest valid key, and for a security key what is in
    force instead (the sandbox OFF, the approval default, the endpoint)."""
    mean = f" (did you mean `{unknown.suggestion}`?)" if unknown.suggestion else ""
    if unknown.dotted and unknown.suggestion:
        head, _, leaf = unknown.suggestion.rpartition(".")
        mean = (
            f' (settings nest: write {{"{head}": {{"{leaf}": ...}}}}, not "{unknown.suggestion}")'
        )
    roots = {unknown.path.split(".")[0], (unknown.suggestion or "").split(".")[0]}
    if not roots & SECURITY_KEYS:
        return f"unknown setting `{unknown.path}` ignored{mean}"
    if "sandbox" in roots:
        mode = settings.sandbox.mode
        state = "the sandbox is OFF" if mode == "off" else f"the sandbox mode is `{mode}`"
        if (
            unknown.suggestion
            and unknown.suggestion.startswith("sandbox.")
            and unknown.suggestion != "sandbox.mode"
        ):
            state += (
                f", `{unknown.suggestion}` is "
                f"{_shown_value(_in_force(settings, unknown.suggestion))}"
            )
    elif unknown.suggestion:
        state = f"`{unknown.suggestion}` is {_shown_value(_in_force(settings, unknown.suggestion))}"
    else:
        state = f"the `{unknown.path.split('.')[0]}` settings in force are unchanged"
    return f"SECURITY WARNING: unknown setting `{unknown.path}` had no effect{mean}: {state}"


def _describe(error: Any) -> str:
    key = ".".join(str(p) for p in error["loc"])
    return f"setting `{key}`: {error['msg']} (got {error.get('input')!r}); using the previous value"


def resolve(*layers: dict[str, Any] | None) -> tuple[Settings, list[str]]:
    """Merge the layers (later wins, key by key) into Settings.

    Returns the settings and the problems to show the user. A bad value never fails the
    whole: that key falls back to what the lower layers said.
    """
    problems: list[str] = []
    unknown: list[UnknownKey] = []
    merged: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        if not isinstance(layer, dict):
            problems.append(f"settings must be an object, got {type(layer).__name__}: ignored")
            continue
        layer = _canonical(layer, unknown=unknown)
        layer = _union_permissions(merged, layer)
        candidate = _merge(merged, _united(merged, layer))
        try:
            Settings.model_validate(candidate)
            merged = candidate
            continue
        except ValidationError as exc:
            errors = exc.errors()
        # Drop just the bad keys of this layer; keep the rest of it.
        problems += [_describe(e) for e in errors]
        cleaned = _drop_paths(layer, [tuple(e["loc"]) for e in errors])
        candidate = _merge(merged, cleaned)
        try:
            Settings.model_validate(candidate)
            merged = candidate
        except ValidationError as exc:  # pragma: no cover - defensive: a shape we did not foresee
            problems += [_describe(e) for e in exc.errors()]
    settings = Settings.model_validate(merged)
    # Clients forward only our own keys (Decision 47): whatever else arrives is a typo or a key
    # from another tool, and says so, once per key even when several sources repeat it.
    problems += [unknown_key_problem(u, settings) for u in dict.fromkeys(unknown)]
    # Every front end's settings pass here: once a source names the key's variable, a sealed
    # process takes it out of its environment block (a no-op in a test or library process).
    for watcher in _KEY_ENV_WATCHERS:
        watcher(settings.api_key_env)
    return settings, problems


# Told each resolved settings' `apiKeyEnv`: the key guard of a sealed process registers itself
# (`keyguard.seal_process`), so settings, the bottom floor, imports nothing above it.
_KEY_ENV_WATCHERS: list[Callable[[str], None]] = []


def watch_key_env(watcher: Callable[[str], None]) -> None:
    if watcher not in _KEY_ENV_WATCHERS:
        _KEY_ENV_WATCHERS.append(watcher)


def _united(merged: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`layer` with each union field's lists appended to what the lower layers declared."""
    out = dict(layer)
    for name in UNION_FIELDS:
        key = Settings.model_fields[name].alias or name
        below, top = merged.get(key), layer.get(key)
        if isinstance(below, dict) and isinstance(top, dict):
            out[key] = {
                **below,
                **{
                    k: [*below[k], *v]
                    if isinstance(below.get(k), list) and isinstance(v, list)
                    else v
                    for k, v in top.items()
                },
            }
    return out


def _drop_paths(layer: dict[str, Any], paths: list[tuple[Any, ...]]) -> dict[str, Any]:
    out = _merge({}, layer)
    for path in paths:
        node: Any = out
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and path[-1] in node:
            node.pop(path[-1])
        else:  # e.g. a bad list member: drop the whole top-level key
            out.pop(path[0], None)
    return out
