#!/usr/bin/env bash
# Installs the third-party MCP servers the tests in tests/mcp talk to, into
# ${AGENT_LSP_CACHE:-~/.cache/agent-lsp-ci}/mcp/: a venv with mcp-server-time and
# mcp-server-git (PyPI), and @modelcontextprotocol/server-everything (npm, node 20 on PATH).
# Idempotent: a second run with the same pins only checks two stamp files. Silent on success.
set -euo pipefail

CACHE="${AGENT_LSP_CACHE:-$HOME/.cache/agent-lsp-ci}"
MCP_DIR="$CACHE/mcp"
PYTHON="${PYTHON:-python3}"
# The versions the tests were written against; bump together with tests/mcp.
TIME_VERSION="2026.10.19"
GIT_VERSION="2026.10.19"
EVERYTHING_VERSION="2026.8.31"

mkdir -p "$MCP_DIR"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
# Quiet on success; on failure the installer's whole output goes to stderr.
quietly() {
  if ! "$@" >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "tests/mcp/setup.sh: failed: $*" >&2
    exit 1
  fi
}
# Two runs on one machine must not fill the cache at the same time.
exec 9>"$MCP_DIR/.lock"
flock 9

PY_PINS="mcp-server-time==$TIME_VERSION mcp-server-git==$GIT_VERSION"
VENV="$MCP_DIR/venv"
if [ ! -f "$VENV/.ok" ] || [ "$(cat "$VENV/.ok")" != "$PY_PINS" ]; then
  rm -rf "$VENV"
  quietly "$PYTHON" -m venv "$VENV"
  # shellcheck disable=SC2086
  quietly "$VENV/bin/pip" install -q --disable-pip-version-check $PY_PINS
  echo "$PY_PINS" >"$VENV/.ok"
fi

NPM_PIN="@modelcontextprotocol/server-everything@$EVERYTHING_VERSION"
NPM_DIR="$MCP_DIR/npm"
if [ ! -f "$NPM_DIR/.ok" ] || [ "$(cat "$NPM_DIR/.ok")" != "$NPM_PIN" ]; then
  rm -rf "$NPM_DIR"
  mkdir -p "$NPM_DIR"
  echo '{"private":true}' >"$NPM_DIR/package.json"
  quietly npm install --prefix "$NPM_DIR" --no-save --loglevel=error --no-fund --no-audit \
    --no-update-notifier "$NPM_PIN"
  echo "$NPM_PIN" >"$NPM_DIR/.ok"
fi
