#!/usr/bin/env bash
# Installs the official ACP TypeScript SDK the tests in tests/acp drive the agent with, into
# ${AGENT_LSP_CACHE:-~/.cache/agent-lsp-ci}/acp/ (npm, node >= 20 on PATH; outside the repo).
# Idempotent: a second run with the same pin only checks a stamp file. Silent on success.
set -euo pipefail

CACHE="${AGENT_LSP_CACHE:-$HOME/.cache/agent-lsp-ci}"
ACP_DIR="$CACHE/acp"
# The version the tests were written against; bump together with tests/acp.
SDK_PIN="@agentclientprotocol/sdk@2.4.0"
ZOD_PIN="zod@3.25.76"  # the SDK's peer dependency

mkdir -p "$ACP_DIR"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
quietly() {
  if ! "$@" >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "tests/acp/setup.sh: failed: $*" >&2
    exit 1
  fi
}
exec 9>"$ACP_DIR/.lock"
flock 9

NPM_DIR="$ACP_DIR/npm"
PINS="$SDK_PIN $ZOD_PIN"
if [ ! -f "$NPM_DIR/.ok" ] || [ "$(cat "$NPM_DIR/.ok")" != "$PINS" ]; then
  rm -rf "$NPM_DIR"
  mkdir -p "$NPM_DIR"
  echo '{"private":true,"type":"module"}' >"$NPM_DIR/package.json"
  # shellcheck disable=SC2086
  quietly npm install --prefix "$NPM_DIR" --no-save --loglevel=error --no-fund --no-audit \
    --no-update-notifier $PINS
  echo "$PINS" >"$NPM_DIR/.ok"
fi
