"""Issue 25 (many runs): a model client per run no longer loads the CA bundle each time; the
TLS context is httpx's default one, made once per value of SSL_CERT_FILE / SSL_CERT_DIR."""

from __future__ import annotations

import httpx2
import openai

from agent_lsp.agent.model import openai_sdk


def test_clients_share_one_default_tls_context_per_environment(monkeypatch):
    made = []

    def create_ssl_context(*args, **kwargs):
        assert not args and not kwargs, "httpx's default context (verify=True), nothing else"
        made.append(object())
        return real(*args, **kwargs)

    real = httpx2.create_ssl_context
    monkeypatch.setattr(httpx2, "create_ssl_context", create_ssl_context)
    monkeypatch.setattr(openai_sdk, "_TLS_CONTEXTS", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    clients = [openai_sdk.new_client(openai, api_key="k", base_url="https://example.invalid/v1", timeout=5)
               for _ in range(3)]
    assert len(made) == 1 and all(isinstance(c, openai.AsyncOpenAI) for c in clients)
    monkeypatch.setenv("SSL_CERT_DIR", "/etc/ssl/certs")
    openai_sdk.new_client(openai, api_key="k", timeout=5)
    assert len(made) == 2, "another SSL_CERT_DIR: another context, as httpx would make"
