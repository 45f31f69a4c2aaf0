"""OpenTelemetry for agent-lsp (CONTRACT "Headless at scale", Telemetry; Decision 43): the
integration a front end plugs into the AgentHost, as it plugs in the MCP hub. This module is
light: the SDK and the OTLP exporter are imported (agent_lsp.telemetry.otel) only when a run
has telemetry on, so with it off nothing of them is ever imported."""

from __future__ import annotations

import importlib.util
import logging
import sys
from typing import Any
from urllib.parse import urlsplit

from agent_lsp.agent.ports import RunTelemetry

log = logging.getLogger(__name__)

EXTRA_HINT = (
    "install the `otel` extra: pip install -e '.[otel]' in agent-lsp's clone "
    "(once published: pip install 'agent-lsp-server[otel]')"
)
SDK_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")

# `gen_ai.provider.name` by the base URL's host; any other host speaks OpenAI's API: `openai`.
PROVIDERS = {
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "api.anthropic.com": "anthropic",
    "openrouter.ai": "openrouter",
    "api.mistral.ai": "mistral_ai",
    "api.groq.com": "groq",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
}
PROVIDER_SUFFIXES = (  # hosts named per region or per resource
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    (".amazonaws.com", "aws.bedrock"),
)


def provider_name(endpoint: str | None) -> str:
    """`gen_ai.provider.name` of a base URL (None: the SDK's default, OpenAI)."""
    try:
        host = (urlsplit(endpoint).hostname or "") if endpoint else "api.openai.com"
    except ValueError:
        return "openai"
    host = host.lower().rstrip(".")
    if host in PROVIDERS:
        return PROVIDERS[host]
    return next((name for suffix, name in PROVIDER_SUFFIXES if host.endswith(suffix)), "openai")


def missing_extra() -> str | None:
    """What is missing for telemetry (`doctor`), or None when the extra is installed."""
    for name in SDK_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                return f"{name} is not installed"
        except (ImportError, ValueError):  # a parent package is missing
            return f"{name} is not installed"
    return None


class OtelTelemetry:
    """The host's telemetry port: a run's recorder when its settings turn telemetry on (the
    SDK's providers made once, on the first such run), nothing otherwise."""

    def __init__(self) -> None:
        self._warned = False

    def for_run(
        self, settings: Any, *, run_id: str, session_id: str, model: str, endpoint: str | None
    ) -> RunTelemetry | None:
        config = getattr(settings, "telemetry", None)
        if config is None or not config.enabled:
            return None
        try:
            from agent_lsp.telemetry import otel
        except ImportError as exc:
            if not self._warned:
                self._warned = True
                log.warning(
                    "telemetry.enabled is on but OpenTelemetry is missing (%s): %s", exc, EXTRA_HINT
                )
            return None
        return otel.backend().run(
            settings,
            run_id=run_id,
            session_id=session_id,
            model=model,
            provider=provider_name(endpoint),
        )

    def flush(self, timeout: float) -> None:
        otel = sys.modules.get("agent_lsp.telemetry.otel")
        if otel is not None:
            otel.flush_all(timeout)
