// The machinery of the VS Code end-to-end test: building and packing the .vsix, a fresh
// code-server with its own HOME, the processes it leaves, the extension's log files, and
// waiting for conditions (never fixed sleeps before an assertion).
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..', '..');
const EXT_DIR = path.join(REPO, 'editor-clients', 'vscode');
export const env = process.env;
export const MARKER = env.AGENT_LSP_E2E_MARKER || `agent-lsp-vscode-e2e-${process.pid}-${Date.now()}`;
const T0 = Date.now();
// Every wait is generous (a loaded 2-core CI machine takes 20 s to load the workbench);
// AGENT_LSP_E2E_TIMEOUT_SCALE stretches them further.
const SCALE = Number(env.AGENT_LSP_E2E_TIMEOUT_SCALE || 1);
export const t = (ms) => ms * SCALE;

export const result = { ok: false, marker: MARKER, steps: [], scenarios: {}, timings: {}, orphans: [] };

export function log(msg) {
  process.stderr.write(`[vscode-e2e +${((Date.now() - T0) / 1000).toFixed(1)}s] ${msg}\n`);
}

export async function step(name, fn) {
  const started = Date.now();
  log(`${name}…`);
  try {
    const value = await fn();
    result.steps.push({ name, ok: true, ms: Date.now() - started });
    return value;
  } catch (err) {
    result.steps.push({ name, ok: false, ms: Date.now() - started, error: String(err?.stack ?? err) });
    throw err;
  }
}

export function required(name) {
  const value = env[name];
  if (!value) {
    throw new Error(`${name} is not set (run tests/editors/vscode/setup.sh and source its output)`);
  }
  return value;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(what, fn, timeoutMs, intervalMs = 250) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const value = await fn();
      if (value) {
        return value;
      }
    } catch (err) {
      last = err;
    }
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last}` : ''}`);
}

// ---------------------------------------------------------------------------------------
// Build and pack the extension with this very Node (code-server's Node 24 in CI).

// npm scripts and vsce's prepublish call `node`/`npm` from PATH: make them this Node's.
const buildEnv = {
  ...env,
  PATH: [env.AGENT_LSP_NODE_BIN, path.dirname(process.execPath), env.PATH].filter(Boolean).join(path.delimiter),
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
};

function npm(args, cwd) {
  const cli = required('AGENT_LSP_NPM_CLI');
  execFileSync(process.execPath, [cli, ...args], { cwd, stdio: ['ignore', 2, 2], env: buildEnv });
}

export function buildVsix(tmp) {
  if (env.AGENT_LSP_VSIX) {
    return env.AGENT_LSP_VSIX;
  }
  const lock = path.join(EXT_DIR, 'package-lock.json');
  const stamp = path.join(EXT_DIR, 'node_modules', '.package-lock.json');
  if (!fs.existsSync(stamp) || fs.statSync(stamp).mtimeMs < fs.statSync(lock).mtimeMs) {
    npm(['ci', '--loglevel=error'], EXT_DIR);
  }
  npm(['run', '--silent', 'typecheck'], EXT_DIR);
  // `npm run package` runs vsce (whose `vscode:prepublish` bundles with esbuild) with the
  // README's links made absolute, exactly as a release is packed.
  const vsix = path.join(tmp, 'agent-lsp.vsix');
  npm(['run', '--silent', 'package', '--', '--out', vsix], EXT_DIR);
  return vsix;
}

// ---------------------------------------------------------------------------------------
// A fresh code-server: its own HOME, XDG dirs, user data and extensions.

export function makeDirs() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lsp-vscode-'));
  const dirs = {
    tmp,
    home: path.join(tmp, 'home'),
    userData: path.join(tmp, 'user-data'),
    extensions: path.join(tmp, 'extensions'),
    state: path.join(tmp, 'state'),
    workspace: path.join(tmp, 'workspace'),
    second: path.join(tmp, 'second'),
    shots: env.AGENT_LSP_SCREENSHOT_DIR || path.join(tmp, 'screenshots'),
  };
  for (const d of Object.values(dirs)) {
    fs.mkdirSync(d, { recursive: true });
  }
  for (const x of ['config', 'cache', 'data', 'state']) {
    fs.mkdirSync(path.join(dirs.home, `.${x}`), { recursive: true });
  }
  return dirs;
}

/** The agent-lsp user settings file of the run (AGENT_LSP_SETTINGS). */
export function userSettingsFile(dirs) {
  return path.join(dirs.tmp, 'agent-lsp-settings.json');
}

export function codeServerEnv(dirs) {
  return {
    PATH: env.PATH,
    LANG: 'C.UTF-8',
    TZ: 'UTC',
    HOME: dirs.home,
    XDG_CONFIG_HOME: path.join(dirs.home, '.config'),
    XDG_CACHE_HOME: path.join(dirs.home, '.cache'),
    XDG_DATA_HOME: path.join(dirs.home, '.local', 'share'),
    XDG_STATE_HOME: path.join(dirs.home, '.state'),
    TMPDIR: dirs.tmp,
    OPENAI_API_KEY: 'test',
    AGENT_LSP_STATE_DIR: dirs.state,
    // The trusted user settings file, where "Always allow" saves its rule (the alwaysAllow scenario).
    AGENT_LSP_SETTINGS: userSettingsFile(dirs),
    // Finds every process this run started, whatever it reparented to.
    AGENT_LSP_E2E_MARKER: MARKER,
  };
}

export function installExtension(dirs, vsix) {
  execFileSync(process.execPath, [required('AGENT_LSP_CODE_SERVER'),
    '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions,
    '--install-extension', vsix], {
    env: codeServerEnv(dirs), stdio: ['ignore', 2, 2], timeout: t(120_000),
  });
}

export async function startCodeServer(dirs, port) {
  const logFile = path.join(dirs.tmp, 'code-server.log');
  const out = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, [required('AGENT_LSP_CODE_SERVER'),
    '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`,
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
    '--disable-getting-started-override',
    '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions,
    dirs.workspace], {
    env: codeServerEnv(dirs), stdio: ['ignore', out, out], detached: true,
  });
  fs.closeSync(out);
  child.on('exit', (code, signal) => log(`code-server exited (${code ?? signal})`));
  await waitFor('code-server /healthz', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    return res.ok;
  }, t(120_000));
  return { child, logFile };
}

/** Every process (but us) whose environment carries this run's marker. */
function markedProcesses() {
  const pids = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) {
      continue;
    }
    try {
      const environ = fs.readFileSync(`/proc/${entry}/environ`, 'latin1');
      if (environ.includes(`AGENT_LSP_E2E_MARKER=${MARKER}`)) {
        const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'latin1').replace(/\0/g, ' ').trim();
        pids.push({ pid: Number(entry), cmd: cmd.slice(0, 200) });
      }
    } catch {
      // gone already, or not ours to read
    }
  }
  return pids;
}

export async function stopCodeServer(cs) {
  if (!cs) {
    return;
  }
  const group = cs.child.pid;
  try {
    process.kill(-group, 'SIGTERM');
  } catch {
    // already gone
  }
  const gone = await waitFor('code-server to exit', () => markedProcesses().length === 0, 5000)
    .catch(() => false);
  if (!gone) {
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // already gone
    }
    await waitFor('code-server to die', () => markedProcesses().length === 0, 3000).catch(() => false);
  }
  // Processes that left the group (setsid) still carry the marker: report and end them.
  const left = markedProcesses();
  result.orphans = left;
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

export function loadPlaywright() {
  const dir = required('AGENT_LSP_PLAYWRIGHT_DIR');
  return createRequire(path.join(dir, 'package.json'))('playwright-core');
}

/** The log file VS Code keeps for an extension's output channel (exthost logs). */
export function outputChannelLog(dirs, name) {
  const found = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        walk(p);
      } else if (e.name.endsWith(`-${name}.log`) || e.name === `${name}.log`) {
        found.push(p);
      }
    }
  };
  const logs = path.join(dirs.userData, 'logs');
  if (fs.existsSync(logs)) {
    walk(logs);
  }
  // Oldest first: a reloaded window writes a new log folder (named by its start time).
  found.sort();
  return found.map((p) => fs.readFileSync(p, 'utf8')).join('\n');
}

/** Changes the remote ("Machine") settings file, where machine-scoped settings count. */
export function editMachineSettings(dirs, change) {
  const file = path.join(dirs.userData, 'Machine', 'settings.json');
  const machine = JSON.parse(fs.readFileSync(file, 'utf8'));
  change(machine);
  fs.writeFileSync(file, JSON.stringify(machine, null, 2));
}

/** How many times the agent-lsp server has started in this window (restarts included). */
export function serverStarts(dirs) {
  return (outputChannelLog(dirs, 'agent-lsp').match(/server started/g) ?? []).length;
}

/** Milliseconds between the first log line matching `from` and the first after it matching `to`. */
export function logInterval(text, from, to) {
  const stamp = (line) => Date.parse(line.slice(0, 23).replace(' ', 'T'));
  const lines = text.split('\n');
  const i = lines.findIndex((l) => from.test(l));
  const j = i < 0 ? -1 : lines.findIndex((l, k) => k > i && to.test(l));
  return i < 0 || j < 0 ? undefined : stamp(lines[j]) - stamp(lines[i]);
}
