"""Issue 21.24 (Decision 47): an unknown settings key is never ignored silently. Every front end
warns with the closest valid key, loudly for the security keys (sandbox.*, approval.*, mcp*,
apiKeyEnv, baseUrl), saying the setting had no effect and what is in force instead; `doctor`
names the settings file it read and shows a JSON error (line and column) first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

pytestmark = pytest.mark.timeout(90)

# (settings file, the words the warning must hold, whether it must be loud)
UNKNOWN = {
    "sandbox.mdoe": ({"sandbox": {"mdoe": "workspace-write"}}, ["`sandbox.mdoe`", "did you mean `sandbox.mode`", "no effect", "sandbox is OFF"], True),
    "sandbox dotted": ({"sandbox.mode": "workspace-write"}, ["`sandbox.mode`", '{"sandbox": {"mode"', "sandbox is OFF"], True),
    "sandboxx": ({"sandboxx": {"mode": "workspace-write"}}, ["`sandboxx`", "did you mean `sandbox`", "sandbox is OFF"], True),
    "sandbox.netwrk": ({"sandbox": {"mode": "read-only", "netwrk": True}}, ["did you mean `sandbox.network`", "`sandbox.network` is `false`"], True),
    "approval.defualt": ({"approval": {"defualt": "deny"}}, ["`approval.defualt`", "did you mean `approval.default`", "`approval.default` is `ask`"], True),
    "approval.allowCommand": ({"approval": {"allowCommand": ["rm"]}}, ["did you mean `approval.allowCommands`"], True),
    "mcpServer": ({"mcpServer": {"x": {"command": "x"}}}, ["`mcpServer`", "did you mean `mcpServers`"], True),
    "mcp.workspaceServer": ({"mcp": {"workspaceServer": "deny"}}, ["did you mean `mcp.workspaceServers`", "is `ask`"], True),
    "apiKeyEnvv": ({"apiKeyEnvv": "MY_KEY"}, ["`apiKeyEnvv`", "did you mean `apiKeyEnv`", "`apiKeyEnv` is `OPENAI_API_KEY`"], True),
    "baseUrll": ({"baseUrll": "http://127.0.0.1:9/v1"}, ["`baseUrll`", "did you mean `baseUrl`"], True),
    "maxTurn": ({"maxTurn": 3}, ["`maxTurn`", "did you mean `maxTurns`"], False),
}


def _env(tmp_path: Path, settings_file: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL",)}
    env.update(HOME=str(tmp_path), NO_COLOR="1", AGENT_LSP_STATE_DIR=str(tmp_path / "state"),
               AGENT_LSP_SETTINGS=str(settings_file))
    return env


def _doctor(tmp_path: Path, settings_file: Path, model) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--workspace", str(workspace),
                           "--base-url", model.base_url, "--model", "scripted"],
                          capture_output=True, text=True, timeout=60, env=_env(tmp_path, settings_file), stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("case", list(UNKNOWN))
def test_doctor_warns_about_an_unknown_key_with_the_closest_valid_one(tmp_path, model, case):
    settings, words, loud = UNKNOWN[case]
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    done = _doctor(tmp_path, path, model)
    out = done.stdout
    warning = next((line for line in out.splitlines() if line.startswith("✗ settings:")), "")
    assert all(word in warning for word in words), out + done.stderr
    assert ("SECURITY WARNING" in warning) is loud, warning
    assert done.returncode == 1  # a key that did nothing is a problem doctor reports


def test_agent_lsp_run_prints_the_unknown_key_warning_on_stderr(tmp_path, model, workspace):
    model.add([{"text": "nothing to do"}])
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"sandbox": {"mdoe": "workspace-write"}}))
    done = subprocess.run([sys.executable, "-m", "agent_lsp", "run", "hello", "--workspace", str(workspace),
                           "--base-url", model.base_url, "--model", "scripted", "--yes"],
                          capture_output=True, text=True, timeout=60, env=_env(tmp_path, path), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "SECURITY WARNING" in done.stderr and "did you mean `sandbox.mode`" in done.stderr and "sandbox is OFF" in done.stderr
    assert "SECURITY WARNING" not in done.stdout


def test_doctor_names_the_settings_file_it_loaded_or_says_not_found(tmp_path, model):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"model": "scripted"}))
    loaded = _doctor(tmp_path, path, model).stdout.splitlines()
    assert loaded[0] == f"✓ settings file: {path} (loaded)", loaded
    missing = tmp_path / "nowhere" / "settings.json"
    absent = _doctor(tmp_path, missing, model).stdout.splitlines()
    assert absent[0].startswith(f"✓ settings file: {missing}: not found"), absent


def test_doctor_shows_a_json_error_first_with_line_and_column(tmp_path, model):
    """The README's ACP example used to carry a `//` comment: the whole file was dropped, the
    sandbox with it, and nothing said so."""
    path = tmp_path / "settings.json"
    path.write_text('{\n  "sandbox": {"mode": "workspace-write"},\n  // the model\n  "model": "scripted"\n}\n')
    done = _doctor(tmp_path, path, model)
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"✗ settings file: the settings file {path} is not valid JSON"), done.stdout
    assert "line 3 column 3" in first and "no comments" in first and "none of its settings apply" in first
    assert done.returncode == 1


async def test_the_language_server_shows_unknown_keys_from_every_source(open_editor):
    """initializationOptions and workspace/configuration: each unknown key once, in a
    window/showMessage naming the closest valid key; the security one loud."""
    editor = await open_editor("visual-studio-code", init={"sandbox": {"mdoe": "workspace-write"}},
                               configuration={"maxTurn": 3})
    await editor.wait_for(lambda: editor.configuration_requests, 10, "workspace/configuration")

    def shown() -> list[str]:
        return [m.message for m in editor.client.messages]

    await editor.wait_for(lambda: any("maxTurn" in m for m in shown()), 10, "the workspace key's warning")
    messages = shown()
    sandbox = [m for m in messages if "sandbox.mdoe" in m]
    assert len(sandbox) == 1, messages  # once, though the settings were merged twice
    assert "SECURITY WARNING" in sandbox[0] and "did you mean `sandbox.mode`" in sandbox[0] and "sandbox is OFF" in sandbox[0]
    turn = [m for m in messages if "maxTurn" in m]
    assert len(turn) == 1 and "did you mean `maxTurns`" in turn[0] and "SECURITY" not in turn[0], messages
    assert all(m.type in (types.MessageType.Error, types.MessageType.Warning) for m in editor.client.messages)
