"""Telemetry's small parts: the provider name by endpoint host (Decision 43) and the children's
environment without the OTLP exporter's headers."""

from __future__ import annotations

import pytest

from agent_lsp.agent.exec.keyguard import child_env
from agent_lsp.settings import from_environment
from agent_lsp.telemetry.hub import provider_name


@pytest.mark.parametrize(("endpoint", "name"), [
    (None, "openai"),
    ("https://api.openai.com/v1", "openai"),
    ("https://api.deepseek.com", "deepseek"),
    ("https://API.DeepSeek.com/v1", "deepseek"),
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "gcp.gemini"),
    ("https://us-central1-aiplatform.googleapis.com/v1/projects/p", "gcp.vertex_ai"),
    ("https://api.anthropic.com/v1/", "anthropic"),
    ("https://openrouter.ai/api/v1", "openrouter"),
    ("https://my.openai.azure.com/openai", "azure.ai.openai"),
    ("http://127.0.0.1:11434/v1", "openai"),
    ("http://localhost:8000/v1", "openai"),
    ("not a url", "openai"),
])
def test_the_provider_is_named_by_the_base_url_host(endpoint, name):
    assert provider_name(endpoint) == name


def test_children_never_get_the_exporter_headers():
    env = {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer x", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b",
           "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "a=b", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "a=b",
           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SERVICE_NAME": "x", "PATH": "/bin"}
    assert child_env(env) == {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SERVICE_NAME": "x", "PATH": "/bin"}


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("0", False), ("", False)])
def test_the_environment_turns_telemetry_on(value, on):
    assert (from_environment({"AGENT_LSP_ENABLE_TELEMETRY": value}).get("telemetry") == {"enabled": True}) is on
