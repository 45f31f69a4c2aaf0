"""What the ACP tests share: the official TypeScript SDK (installed by tests/acp/setup.sh into a
cache outside the repo), a client per test, and settings for the scripted model."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acp.driver import AcpClient

CACHE = Path(os.environ.get("AGENT_LSP_CACHE") or Path.home() / ".cache" / "agent-lsp-ci") / "acp"
SETUP = Path(__file__).with_name("setup.sh")
SDK = CACHE / "npm" / "node_modules" / "@agentclientprotocol" / "sdk" / "dist" / "v1" / "stable" / "acp.js"


def _require(found: bool, what: str) -> None:
    """Missing in CI fails the run (a skip would hide it); elsewhere the tests skip."""
    if found:
        return
    if os.environ.get("CI"):
        raise RuntimeError(f"{what}: run `bash {SETUP}`")
    pytest.skip(f"{what} (run `bash {SETUP}`)")


@pytest.fixture(scope="session")
def acp_sdk() -> Path:
    _require(shutil.which("node") is not None and shutil.which("npm") is not None, "node and npm are not on PATH")
    # The test setup installs the pinned SDK: idempotent (a stamp check when installed), quiet, and
    # under a lock, so parallel workers never see a half-written install.
    result = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=300)
    _require(result.returncode == 0 and SDK.is_file(), f"@agentclientprotocol/sdk could not be installed ({result.stderr[-500:]})")
    return SDK


def model_settings(model: Any, **values: Any) -> dict[str, Any]:
    """The user's settings file for a run against the scripted model (camelCase keys)."""
    return {"model": "m", "baseUrl": model.base_url, "requestTimeout": 10, **values}


@pytest.fixture
def connect(acp_sdk: Path, tmp_path: Path, workspace: Path) -> Iterator[Any]:
    """connect(settings, cwd=workspace) -> a started client (node + the agent); all closed after."""
    clients: list[AcpClient] = []

    def make(settings: dict[str, Any] | None = None, cwd: Path | None = None, env: dict[str, str] | None = None) -> AcpClient:
        client = AcpClient(acp_sdk, cwd or workspace, tmp_path / "acp", settings, env)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.kill()
    for client in clients:  # every notification of the test passed the TypeScript SDK's schema
        if client.closed:
            assert client.schema_problems() == []
