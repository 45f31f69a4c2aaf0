"""Issue 32 P1: a path a language server's answer names is judged as read_file judges it. A
workspace symlink out (`creds.py -> ~/.aws/credentials`), a secret named by its own path or a
file in `.git` (Decision 62: its config may hold a token) is shown as a location only: its
text never reaches the model, and read_file still refuses the outside ones; a library's source outside the workspace stays shown and readable (CONTRACT "Code intelligence").
The real CLI with a language server it starts (tests/langservers/fake_server.py) and the
scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.headless.test_run_cli import agent_run, report_of
from tests.langservers.conftest import FAKE
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(120)

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def test_a_symlink_out_or_a_secret_named_by_a_language_server_is_never_read(model, workspace, tmp_path):
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    credentials = home / ".aws" / "credentials"
    credentials.write_text(f"aws_secret_access_key = '{SECRET}'\n")
    config_py = home / "settings.py"  # a secret with a source file's name, reached through a link
    config_py.write_text(f"token = '{SECRET}'\n")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "os.py").write_text("def getcwd(): ...  # library line\n")
    (workspace / "creds.py").symlink_to(credentials)
    (workspace / "conf.py").symlink_to(config_py)
    (workspace / "linked").symlink_to(home, target_is_directory=True)
    (workspace / "app.py").write_text("import creds\nvalue = creds.key\n")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {SECRET}\n")
    uris = [(workspace / ".git" / "config").as_uri(), (workspace / "creds.py").as_uri(), credentials.as_uri(), (workspace / "conf.py").as_uri(),
            (workspace / "linked" / "settings.py").as_uri(), (lib / "os.py").as_uri()]
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"languageServers": {"auto": False, "servers": {
        "fake": {"command": [sys.executable, str(FAKE), "point"], "extensions": [".py"]}}}}))
    model.add([
        tools_reply(call("find_references", "refs", path="app.py", line=2, symbol="creds"),
                    call("find_definition", "def", path="app.py", line=2, symbol="creds"),
                    call("symbols", "syms", query="secret")),
        tools_reply(call("read_file", "r1", path="creds.py"), call("read_file", "r2", path=str(credentials)),
                    call("read_file", "r3", path="conf.py"), call("read_file", "r4", path=str(config_py)),
                    call("read_file", "lib", path=str(lib / "os.py"))),
        {"text": "done"},
    ])

    proc = subprocess.run(agent_run(model, workspace, "where is creds", "--settings", str(settings)),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90,
                          env={**os.environ, "FAKE_LSP_POINT": ",".join(uris)})

    assert proc.returncode == 0, proc.stderr
    assert report_of(proc.stdout)["stopReason"] == "done"
    assert SECRET not in json.dumps(model.requests), "the secret reached the model"
    assert SECRET not in proc.stdout + proc.stderr
    first = last_tool_results(model.requests[1])
    for name in ("refs", "def"):
        shown = first[name]
        assert "creds.py:1:1: (outside the workspace: not read)" in shown, shown
        assert "conf.py:1:1: (outside the workspace: not read)" in shown, shown
        assert f"{credentials}:1:1: (outside the workspace: not read)" in shown, shown
        assert ".git/config:1:1: (inside a .git folder: not read)" in shown, shown
        assert f"{lib / 'os.py'}:1:1: def getcwd(): ...  # library line" in shown, "a library stays shown"
    assert "creds.py:1:1" in first["syms"] and f"{lib / 'os.py'}:1:1" in first["syms"], first["syms"]
    reads = last_tool_results(model.requests[2])
    for name in ("r1", "r2", "r3", "r4"):
        assert "outside the workspace" in reads[name] and "refused" in reads[name], reads[name]
    assert "library line" in reads["lib"], "a library's source an answer named is readable"


def test_a_rename_that_would_edit_a_git_folder_is_refused_even_with_yes(model, workspace, tmp_path):
    """Decision 62: rename_symbol writing into any `.git` (here a nested repository's config,
    named through `sub/..`) needs a person; `--yes` does not cover it, and nothing is written."""
    inner = workspace / "sub" / "inner"
    (inner / ".git").mkdir(parents=True)
    config = inner / ".git" / "config"
    config.write_text("[core]\n\tbare = false\n")
    (workspace / "app.py").write_text("abc = 1\n")
    uris = [(workspace / "app.py").as_uri(), "file://" + str(inner / "x" / ".." / ".git" / "config")]
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"languageServers": {"auto": False, "servers": {
        "fake": {"command": [sys.executable, str(FAKE), "point"], "extensions": [".py"]}}}}))
    model.add([tools_reply(call("rename_symbol", "ren", path="app.py", line=1, symbol="abc", newName="fsm")),
               {"text": "done"}])

    proc = subprocess.run(agent_run(model, workspace, "rename", "--settings", str(settings)),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90,
                          env={**os.environ, "FAKE_LSP_POINT": ",".join(uris)})

    assert proc.returncode == 0, proc.stderr
    result = last_tool_results(model.requests[-1])["ren"]
    assert result.startswith("denied") and ".git folder" in result and "--yes does not cover it" in result, result
    assert config.read_text() == "[core]\n\tbare = false\n" and (workspace / "app.py").read_text() == "abc = 1\n"
