"""The sandbox against the host around it (issue 20): with the network off no host service is
reachable over a unix socket (runtime folders masked, sockets named by the environment hidden,
their variables dropped); hidden secrets behind symlinks stay hidden and commands still run; the
XDG twins of the credential stores are hidden; a writable workspace's .git stays read-only.

Everything secret lives under /var/tmp on purpose: the sandbox's /tmp is private anyway, so a
secret under /tmp would prove nothing."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent_lsp.agent.exec import sandbox
from tests.reliability.test_sandbox import box, hello_server, one_command

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"), reason="bubblewrap is not installed")]

# An interpreter from a path the sandbox shows (the test venv may live under /tmp).
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
PROBE = """import os, socket, sys
for name in ("SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST"):
    print(f"env {name}={os.environ.get(name, '<unset>')}")
for path in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        print("reached", path, s.recv(64).decode().strip())
    except OSError as exc:
        print("unreachable", path, exc)
"""
VARIABLES = ("SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST")


@pytest.fixture(autouse=True)
def fresh_probe():
    sandbox.reset_probe()
    yield
    sandbox.reset_probe()


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A folder outside /tmp, as a real home, ssh agent or docker socket would be."""
    folder = Path("/var/tmp") / f"agent-lsp-host-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_host_sockets(monkeypatch):
    for name in (*VARIABLES, "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)


@contextmanager
def unix_listener(path: Path) -> Iterator[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with hello_server(server):
            yield path
    finally:
        path.unlink(missing_ok=True)


# (variant, where the socket is, the variable naming it and its value)
SOCKETS = {
    "xdg-runtime-bus": lambda d: (d / "xdg-runtime" / "bus", "XDG_RUNTIME_DIR", str(d / "xdg-runtime")),
    "run": lambda d: (Path(f"/run/agent-lsp-test-{d.name}.sock"), None, None),
    "var-run": lambda d: (Path(f"/var/run/agent-lsp-test-{d.name}-v.sock"), None, None),
    "ssh-agent": lambda d: (d / "ssh-agent" / "agent.sock", "SSH_AUTH_SOCK", str(d / "ssh-agent" / "agent.sock")),
    "dbus": lambda d: (d / "dbus" / "bus", "DBUS_SESSION_BUS_ADDRESS", f"unix:path={d / 'dbus' / 'bus'},guid=0123abcd"),
    "docker": lambda d: (d / "docker" / "docker.sock", "DOCKER_HOST", f"unix://{d / 'docker' / 'docker.sock'}"),
    # named by nothing, outside every masked folder: only the seccomp filter cuts it (issue 32)
    "var-tmp": lambda d: (d / "service" / "service.sock", None, None),
}


@pytest.mark.parametrize("variant", list(SOCKETS))
@pytest.mark.parametrize("network", [False, True])
async def test_a_host_socket_is_unreachable_with_the_network_off(model, workspace, host_dir, monkeypatch, variant, network):
    where, name, value = SOCKETS[variant](host_dir)
    if name is not None:
        monkeypatch.setenv(name, value)
    (workspace / "probe.py").write_text(PROBE)
    with unix_listener(where):
        result = await one_command(model, workspace, f"{PYTHON} probe.py {where}", **box(network=network))
    if network:
        assert f"reached {where} HELLO-FROM-HOST" in result, result
        if name in VARIABLES:
            assert f"env {name}={value}" in result, result
    else:
        assert "HELLO-FROM-HOST" not in result and f"unreachable {where}" in result, result
        for variable in VARIABLES:
            assert f"env {variable}=<unset>" in result, result


async def test_a_socket_in_the_home_folder_is_masked_and_the_rest_of_home_stays(model, workspace, host_dir, monkeypatch):
    """An agent socket right in $HOME (Bitwarden's): masking its folder puts every other entry back."""
    home = host_dir / "home"
    (home / "projects").mkdir(parents=True)
    (home / "notes.txt").write_text("NOTES-STAY\n")
    (home / "notes-link").symlink_to("notes.txt")
    monkeypatch.setenv("HOME", str(home))
    agent = home / ".bitwarden-ssh-agent.sock"
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent))
    (workspace / "probe.py").write_text(PROBE)
    with unix_listener(agent), unix_listener(home / "other.sock"):
        result = await one_command(model, workspace, f"sh -c '{PYTHON} probe.py {agent}; cat {home}/notes-link; ls {home}'",
                                   **box())
    assert f"unreachable {agent}" in result and "HELLO-FROM-HOST" not in result, result
    assert "NOTES-STAY" in result and "projects" in result, result


async def test_links_at_the_top_of_run_still_lead_where_they_led(model, workspace, host_dir):
    """NixOS keeps every program behind /run/current-system: masking /run must not lose it."""
    (host_dir / "system").mkdir()
    (host_dir / "system" / "tool").write_text("TOOL-STAYS\n")
    link = Path(f"/run/agent-lsp-test-{host_dir.name}-link")
    link.symlink_to(host_dir / "system")
    try:
        result = await one_command(model, workspace, f"cat {link}/tool", **box())
    finally:
        link.unlink()
    assert "TOOL-STAYS" in result, result


# --- B: hidden entries that are symlinks --------------------------------------------------------

def _link_dir(home: Path, stow: Path) -> tuple[list[Path], str]:
    (stow / "ssh").mkdir()
    (stow / "ssh" / "id_ed25519").write_text("SECRET-DIR-LINK\n")
    (home / ".ssh").symlink_to(stow / "ssh")
    return [home / ".ssh" / "id_ed25519", stow / "ssh" / "id_ed25519"], "SECRET-DIR-LINK"


def _link_file(home: Path, stow: Path) -> tuple[list[Path], str]:
    (stow / "netrc").write_text("machine x password SECRET-FILE-LINK\n")
    (home / ".netrc").symlink_to(stow / "netrc")
    return [home / ".netrc", stow / "netrc"], "SECRET-FILE-LINK"


def _dangling(home: Path, stow: Path) -> tuple[list[Path], str]:
    (home / ".aws").symlink_to(stow / "not-there")
    (home / ".kube").symlink_to(home / ".kube")  # a loop: nothing to read either
    return [home / ".aws" / "credentials"], "NO-SECRET-AT-ALL"


def _chain(home: Path, stow: Path) -> tuple[list[Path], str]:
    (stow / "gnupg").mkdir()
    (stow / "gnupg" / "secring.gpg").write_text("SECRET-CHAIN\n")
    (home / ".gnupg-step").symlink_to(Path("..") / "stow" / "gnupg")  # relative, then absolute
    (home / ".gnupg").symlink_to(home / ".gnupg-step")
    (stow / "pypirc-real").write_text("password = SECRET-CHAIN-FILE\n")
    (stow / "pypirc-step").symlink_to("pypirc-real")
    (home / ".pypirc").symlink_to(stow / "pypirc-step")
    return [home / ".gnupg" / "secring.gpg", home / ".gnupg-step" / "secring.gpg", stow / "gnupg" / "secring.gpg",
            home / ".pypirc", stow / "pypirc-step", stow / "pypirc-real"], "SECRET-CHAIN"


@pytest.mark.parametrize("variant", [_link_dir, _link_file, _dangling, _chain], ids=["dir", "file", "dangling", "chain"])
async def test_a_hidden_entry_behind_a_symlink_stays_hidden_and_commands_run(model, workspace, host_dir, monkeypatch, variant):
    home, stow = host_dir / "home", host_dir / "stow"
    home.mkdir()
    stow.mkdir()
    monkeypatch.setenv("HOME", str(home))
    paths, secret = variant(home, stow)
    cats = "; ".join(f"cat {p}" for p in paths)
    result = await one_command(model, workspace, f"sh -c '{cats}; echo COMMAND-RAN'", **box())
    assert "COMMAND-RAN" in result, result
    assert secret not in result, result


async def test_what_cannot_be_hidden_refuses_the_command(model, workspace, host_dir):
    """A hidden path the sandbox cannot mount over: the command is refused, it never runs with
    the path visible (here another process's /proc entry, absent from the sandbox's own /proc)."""
    busy = await asyncio.create_subprocess_exec("sleep", "7390")  # a duration no other test uses
    try:
        result = await one_command(model, workspace, "sh -c 'echo ran > ran.txt'",
                                   **box(hide=[f"/proc/{busy.pid}/environ"]))
    finally:
        busy.kill()
        await busy.wait()
    assert not (workspace / "ran.txt").exists()
    assert result.startswith("error: refused") and "sandbox could not be set up" in result and "Nothing ran" in result, result


@pytest.mark.skipif(not os.access("/", os.W_OK), reason="needs a socket right in /")
async def test_a_socket_that_cannot_be_masked_refuses_the_command(model, workspace, monkeypatch):
    """A socket right in / cannot be masked (its folder is the root): refused, never run with it reachable."""
    where = Path(f"/agent-lsp-test-{os.getpid()}-{uuid.uuid4().hex[:6]}.sock")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(where))
    with unix_listener(where):
        result = await one_command(model, workspace, "sh -c 'echo ran > ran.txt'", **box())
    assert not (workspace / "ran.txt").exists()
    assert result.startswith("error: refused") and str(where) in result and "Nothing ran" in result, result


# --- C: the default hide list, with the XDG twins ----------------------------------------------

HOME_SECRETS = [".ssh/id_ed25519", ".aws/credentials", ".gnupg/private-keys-v1.d/k.key", ".netrc", ".git-credentials",
                ".docker/config.json", ".kube/config", ".npmrc", ".pypirc", ".password-store/mail.gpg",
                ".azure/msal_token_cache.json", ".cargo/credentials.toml", ".cargo/credentials"]
CONFIG_SECRETS = ["gcloud/credentials.db", "gh/hosts.yml", "git/credentials", "hub", "glab-cli/config.yml",
                  "rclone/rclone.conf", "containers/auth.json"]
DATA_SECRETS = ["keyrings/login.keyring"]


@pytest.mark.parametrize("xdg", [False, True], ids=["home-config", "xdg-config-home"])
async def test_every_default_credential_store_is_hidden(model, workspace, host_dir, monkeypatch, xdg):
    home = host_dir / "home"
    config, data = (host_dir / "xdg-config", host_dir / "xdg-data") if xdg else (home / ".config", home / ".local/share")
    runtime = host_dir / "runtime"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    if xdg:
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
        monkeypatch.setenv("XDG_DATA_HOME", str(data))
    secrets = ([home / p for p in HOME_SECRETS] + [config / p for p in CONFIG_SECRETS] + [data / p for p in DATA_SECRETS]
               + [runtime / "containers/auth.json"])
    for number, path in enumerate(secrets):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"SECRET-{number:02d}-END\n")
    (workspace / "paths.txt").write_text("".join(f"{p}\n" for p in secrets))
    # The network on: the runtime folder is then not masked, so its auth.json is hidden by the list itself.
    result = await one_command(model, workspace, "sh -c 'cat $(cat paths.txt) 2>/dev/null; echo COMMAND-RAN'",
                               **box(network=True))
    assert "COMMAND-RAN" in result, result
    leaked = [str(secrets[int(n)]) for n in range(len(secrets)) if f"SECRET-{n:02d}-END" in result]
    assert leaked == [], f"readable in the sandbox: {leaked}"


# --- D: .git stays read-only in workspace-write -------------------------------------------------

def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def repo(workspace: Path) -> Path:
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "start")
    return workspace


PLANTS = {
    "config": ("sh -c 'printf \"[core]\\n\\tfsmonitor = touch /tmp/pwned\\n\" >> .git/config'", ".git/config"),
    "hook": ("sh -c 'mkdir -p .git/hooks; printf \"#!/bin/sh\\ntouch /tmp/pwned\\n\" > .git/hooks/pre-commit'",
             ".git/hooks/pre-commit"),
    "attributes": ("sh -c 'mkdir -p .git/info; echo \"* filter=evil\" > .git/info/attributes'", ".git/info/attributes"),
    "replace-git": ("sh -c 'mv .git .git-old && mkdir .git && echo planted > .git/config'", ".git/config"),
}


@pytest.mark.parametrize("plant", list(PLANTS))
async def test_a_sandboxed_command_cannot_plant_git_config_or_hooks(model, repo, plant):
    command, target = PLANTS[plant]
    before = (repo / target).read_text() if (repo / target).exists() else None
    result = await one_command(model, repo, command, **box())
    after = (repo / target).read_text() if (repo / target).exists() else None
    assert after == before, f"{target} changed: {result}"
    assert not (repo / ".git-old").exists()


async def test_workspace_files_stay_writable_and_git_status_works(model, repo):
    result = await one_command(model, repo, "sh -c 'echo new > new.txt && git status --porcelain'", **box())
    assert result.startswith("exit code 0") and "?? new.txt" in result, result
    assert (repo / "new.txt").read_text() == "new\n"


async def test_a_separate_git_dir_inside_the_workspace_stays_read_only(model, workspace):
    """A `.git` file (worktree, --separate-git-dir): its git folder stays read-only and the
    file itself cannot be pointed elsewhere."""
    git(workspace, "init", "-q", f"--separate-git-dir={workspace / '.repo'}")
    config_before, pointer_before = (workspace / ".repo/config").read_text(), (workspace / ".git").read_text()
    await one_command(model, workspace, "sh -c 'echo \"[core] fsmonitor = x\" >> .repo/config'", **box())
    await one_command(model, workspace, "sh -c 'mkdir -p evil && echo \"gitdir: evil\" > .git'", **box())
    assert (workspace / ".repo/config").read_text() == config_before
    assert (workspace / ".git").read_text() == pointer_before
