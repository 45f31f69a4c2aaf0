"""`agent-lsp doctor` lists the language servers agent-lsp would start (Decision 37's
`languageServers` entries), starting none of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.langservers.conftest import marked, only_on_path

pytestmark = pytest.mark.timeout(90)


def doctor(workspace, env) -> dict:
    proc = subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--json", "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def test_doctor_lists_found_and_configured_servers_and_starts_none(workspace, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"baseUrl": "http://127.0.0.1:9/v1", "languageServers": {"servers": {
        "ts": {"command": ["typescript-language-server", "--stdio"], "extensions": [".ts", ".tsx"]}}}}))
    marker = uuid.uuid4().hex
    env = {**os.environ, "AGENT_LSP_SETTINGS": str(settings), "AGENT_LSP_TEST_MARK": marker,
           "PATH": only_on_path(tmp_path, "basedpyright-langserver") + os.pathsep + os.environ["PATH"]}
    checks = doctor(workspace, env)
    auto = checks["language server basedpyright (auto)"]
    assert auto["ok"] and "basedpyright-langserver --stdio` for .py, .pyi (found on PATH)" in auto["detail"], auto
    missing = checks["language server ts (configured)"]
    assert not missing["ok"] and "`typescript-language-server` was not found on PATH" in missing["detail"], missing
    assert marked(marker) == []

    settings.write_text(json.dumps({"baseUrl": "http://127.0.0.1:9/v1"}))
    none = doctor(workspace, {**os.environ, "AGENT_LSP_SETTINGS": str(settings)})["language servers"]
    assert none["ok"] and "none of ty, basedpyright-langserver, pyright-langserver, pyrefly is on PATH" in none["detail"]
