"""With the network off, no unix socket at all for a sandboxed command (issue 32, round 3's N2
variant; CONTRACT Decisions 62 and 67): bwrap loads a seccomp filter (built with pyseccomp over
libseccomp2) that refuses `socket(AF_UNIX, …)` with EACCES, so a host service listening in a
folder nothing masks (/var/tmp) is out of reach; the command's result names the sandbox;
`socketpair` still works; without the filter's library, commands are refused with the fix, and
`doctor` has a check for it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lsp.agent.exec import sandbox, seccomp
from tests.reliability.test_sandbox import box, hello_server, one_command
from tests.unit.test_hooks_project import group, run_with

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"), reason="bubblewrap is not installed")]

# An interpreter from a path the sandbox shows (the test venv may live under /tmp).
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
CONNECT = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nprint(s.recv(64).decode())\n"
PAIR = "import socket\na, b = socket.socketpair()\na.sendall(b'pair-works')\nprint(b.recv(64).decode())\n"
NO_BINDINGS = "raise RuntimeError('Unable to find libseccomp')\n"  # what pyseccomp raises without libseccomp2


@pytest.fixture(autouse=True)
def fresh_probe():
    sandbox.reset_probe()
    seccomp.reset()
    yield
    sandbox.reset_probe()
    seccomp.reset()


@pytest.fixture
def host_socket() -> Iterator[Path]:
    """A host service on a unix socket in /var/tmp: outside /run, /var/run and XDG_RUNTIME_DIR,
    named by no variable, so no mask covers it."""
    folder = Path("/var/tmp") / f"agent-lsp-seccomp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    path = folder / "service.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with hello_server(server):
            yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("client", ["python", "curl"])
async def test_a_host_unix_socket_in_var_tmp_is_unreachable_and_the_result_says_why(model, workspace, host_socket, client):
    if client == "curl" and shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    (workspace / "connect.py").write_text(CONNECT)
    command = (f"{PYTHON} connect.py {host_socket}" if client == "python"
               else f"curl -sS --max-time 5 --unix-socket {host_socket} http://host/")
    result = await one_command(model, workspace, command, **box())
    assert "HELLO-FROM-HOST" not in result, result
    assert result.startswith("error: exit code") and "blocked by the sandbox" in result, result
    assert "unix sockets" in result and "sandbox.network is false" in result, result
    assert "a write outside" not in result, "a refused socket is not a refused write"
    if client == "curl":  # curl names no errno; the hello server speaks no HTTP, so no check with the network on
        return
    assert "PermissionError: [Errno 13] Permission denied" in result, result  # the filter's EACCES
    # the same command with the network on reaches it: the test can fail
    result = await one_command(model, workspace, command, **box(network=True))
    assert "HELLO-FROM-HOST" in result, result


async def test_a_project_hook_in_the_sandbox_cannot_reach_it_either(model, workspace, host_socket):
    (workspace / "connect.py").write_text(CONNECT)
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [group(f"{PYTHON} connect.py {host_socket} > project-said 2>&1")]}}))
    report, hooks = await run_with(model, workspace, lambda spec: True, sandbox={"mode": "workspace-write"},
                                   hooks={"UserPromptSubmit": [group(f"{PYTHON} connect.py {host_socket} > user-said 2>&1")]})
    assert report.stop_reason == "done" and len(hooks) == 2
    assert "HELLO-FROM-HOST" in (workspace / "user-said").read_text(), "the user's own hook runs unconfined"
    said = (workspace / "project-said").read_text()
    assert "HELLO-FROM-HOST" not in said and "Permission denied" in said, said


async def test_socketpair_still_works_with_the_network_off(model, workspace):
    (workspace / "pair.py").write_text(PAIR)
    result = await one_command(model, workspace, f"{PYTHON} pair.py", **box("read-only"))
    assert result == "exit code 0\npair-works", result


async def test_without_the_filter_library_commands_are_refused_with_the_fix(model, workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # `import pyseccomp` fails, as when it is missing
    command = f"{PYTHON} -c \"open('ran.txt', 'w')\""
    result = await one_command(model, workspace, command, **box())
    assert not (workspace / "ran.txt").exists(), "nothing ran"
    assert result.startswith("error: refused") and "sandbox.network=false" in result, result
    assert "apt install libseccomp2" in result and "pip install pyseccomp" in result, result
    # with the network on the filter is not needed: the command runs
    result = await one_command(model, workspace, command, **box(network=True))
    assert result.startswith("exit code 0") and (workspace / "ran.txt").exists(), result


def doctor(workspace: Path, tmp_path: Path, *, network: bool, without_library: bool) -> dict:
    settings = tmp_path / f"settings-{network}-{without_library}.json"
    settings.write_text(json.dumps({"model": "replay:none", "sandbox": {"mode": "workspace-write", "network": network}}))
    env = {**os.environ, "AGENT_LSP_SETTINGS": str(settings), "NO_COLOR": "1"}
    if without_library:
        shadow = tmp_path / "no-libseccomp"
        shadow.mkdir(exist_ok=True)
        (shadow / "pyseccomp.py").write_text(NO_BINDINGS)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shadow), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--workspace", str(workspace), "--json"],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def test_doctor_checks_the_filter(workspace, tmp_path):
    check = doctor(workspace, tmp_path, network=False, without_library=False)["seccomp"]
    assert check["ok"] and "pyseccomp" in check["detail"] and "cannot open unix sockets" in check["detail"], check
    check = doctor(workspace, tmp_path, network=False, without_library=True)["seccomp"]
    assert not check["ok"] and "Unable to find libseccomp" in check["detail"], check
    assert "apt install libseccomp2" in check["detail"] and "every run_command is refused" in check["detail"], check
    check = doctor(workspace, tmp_path, network=True, without_library=True)["seccomp"]
    assert check["ok"] and "not needed now (sandbox.network is on)" in check["detail"], check
