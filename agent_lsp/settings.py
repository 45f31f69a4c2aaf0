"""The one settings model, its sources (defaults < env < initializationOptions < workspace
configuration) and the trust boundary between the user's own configuration and a repo's."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

log = logging.getLogger(__name__)

Decision = Literal["allow", "ask", "deny"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class ApprovalSettings(_Model):
    default: Decision = "ask"
    """`ask`, `allow` or `deny` for tools with side effects."""
    tools: dict[str, Decision] = Field(default_factory=dict)
    """Per tool name: `allow`, `ask`, `deny` (read-only tools default to `allow`)."""
    allow_commands: list[str] = Field(default_factory=list)
    """Command prefixes that run without asking, matched on parsed argv."""
    timeout: float = Field(300, gt=0)
    """Seconds an approval may wait for an answer before it counts as a denial."""


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
    """Seconds for one model request before it counts as failed."""
    context_window: int = Field(128000, ge=1000)
    """Tokens (estimated); compaction runs before the built context would exceed it."""
    tool_output_limit: int = Field(20000, ge=200)
    """Characters of one tool result kept in context (head + tail)."""
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    memory_files: list[str] = Field(default_factory=lambda: ["AGENTS.md", ".agent-lsp/memory.md"])
    """Files recalled into the system prompt when present."""
    transcript_dir: str | None = None
    """Where one JSONL transcript per run goes; None means `<state dir>/runs`."""

    def transcript_path(self) -> Path:
        return Path(self.transcript_dir).expanduser() if self.transcript_dir else state_dir() / "runs"


# Keys a cloned repository's settings (workspace/configuration) must never set.
TRUSTED_ONLY = ("baseUrl", "apiKeyEnv", "transcriptDir", "memoryFiles", "approval")

ENVIRONMENT = {
    "AGENT_LSP_MODEL": "model",
    "AGENT_LSP_BASE_URL": "baseUrl",
    "AGENT_LSP_MAX_TURNS": "maxTurns",
    "AGENT_LSP_TRANSCRIPT_DIR": "transcriptDir",
}


def state_dir() -> Path:
    """The server's own files: transcripts, spills. Never inside a workspace by default."""
    if explicit := os.environ.get("AGENT_LSP_STATE_DIR"):
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("agent-lsp"))


def from_environment(env: dict[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if env is None else env
    layer: dict[str, Any] = {}
    if url := env.get("OPENAI_BASE_URL"):
        layer["baseUrl"] = url
    for name, key in ENVIRONMENT.items():
        if value := env.get(name):
            layer[key] = value
    return layer


def without_untrusted(layer: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Drop the trust-boundary keys from a workspace-configuration layer."""
    if not isinstance(layer, dict):
        return {}, []
    kept = {k: v for k, v in layer.items() if k not in TRUSTED_ONLY}
    return kept, sorted(k for k in layer if k in TRUSTED_ONLY)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _known_keys(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    known: dict[str, type[BaseModel] | None] = {}
    for name, field in model.model_fields.items():
        sub = field.annotation if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel) else None
        known[field.alias or name] = sub
        known[name] = sub
    return known


def _unknown(layer: dict[str, Any], model: type[BaseModel] = Settings, prefix: str = "") -> list[str]:
    known = _known_keys(model)
    found = []
    for key, value in layer.items():
        if key not in known:
            found.append(prefix + key)
        elif known[key] is not None and isinstance(value, dict):
            found += _unknown(value, known[key], f"{prefix}{key}.")
    return found


def _describe(error: dict[str, Any]) -> str:
    key = ".".join(str(p) for p in error["loc"])
    return f"setting `{key}`: {error['msg']} (got {error.get('input')!r})"


def resolve(*layers: dict[str, Any] | None) -> tuple[Settings, list[str]]:
    """Merge the layers (later wins, key by key) into Settings.

    Returns the settings and the problems to show the user. A bad value never fails the
    whole: that key falls back to what the lower layers said.
    """
    problems: list[str] = []
    merged: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        if not isinstance(layer, dict):
            problems.append(f"settings must be an object, got {type(layer).__name__}: ignored")
            continue
        for key in _unknown(layer):
            log.info("ignoring unknown setting %r", key)
        candidate = _merge(merged, layer)
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
    return Settings.model_validate(merged), problems


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
