#!/usr/bin/env node
// Drives the agent-lsp VS Code extension in a real VS Code (code-server) from Debian's
// Chromium with playwright-core: builds and packs the .vsix, installs it into a fresh
// code-server, runs `Agent: Run Task…` from the palette, answers the approval toast, checks
// the edit and the `Agent` output, cancels a slow run from its progress notification, asks a
// question through the server's "Ask agent about selection" code action, dismisses an
// approval (a denial), cancels a run with `Agent: Cancel Run`, and checks that a
// machine-scoped setting change restarts the server.
// Prints one JSON object on stdout (the pytest wrapper asserts on it); logs go to stderr.
//
// Environment (tests/editors/vscode/setup.sh prints most of it):
//   AGENT_LSP_SERVER          executable started as `<it> serve --stdio` (required)
//   AGENT_LSP_MODEL_URL       base URL of the scripted model, e.g. http://127.0.0.1:PORT/v1 (required)
//   AGENT_LSP_CODE_SERVER     code-server's out/node/entry.js
//   AGENT_LSP_PLAYWRIGHT_DIR  folder whose node_modules holds playwright-core
//   AGENT_LSP_NPM_CLI         npm-cli.js of this Node (to build and pack the extension)
//   AGENT_LSP_CHROMIUM        default /usr/bin/chromium
//   AGENT_LSP_VSIX            a ready .vsix: skips the build and pack
//   AGENT_LSP_SCREENSHOT_DIR  where screenshots go (default: the run's temp dir)
//   AGENT_LSP_KEEP_TMP=1      keep the temp dir for debugging
//   AGENT_LSP_E2E_MARKER      tags every process started (so a caller can clean up after a kill)
//   RUN_TASK / CANCEL_TASK    the two tasks typed into the palette (their scripted keys)
//   ASK_QUESTION / ASK_ANSWER the question typed for the code action, the answer expected
//   PALETTE_CANCEL_TASK       a slow task cancelled with `Agent: Cancel Run`
//   DISMISS_TASK              a task whose edit approval is dismissed (X): a denial
//   EXPECT_EDIT_OLD / EXPECT_EDIT_NEW / EXPECT_TEXT  what the run scenario must show
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..', '..');
const EXT_DIR = path.join(REPO, 'editor-clients', 'vscode');
const env = process.env;
const MARKER = env.AGENT_LSP_E2E_MARKER || `agent-lsp-vscode-e2e-${process.pid}-${Date.now()}`;

const RUN_TASK = env.RUN_TASK ?? 'Fix the add function in calc.py';
const CANCEL_TASK = env.CANCEL_TASK ?? 'Think very slowly about calc.py';
const EXPECT_OLD = env.EXPECT_EDIT_OLD ?? 'return a - b';
const EXPECT_NEW = env.EXPECT_EDIT_NEW ?? 'return a + b';
const EXPECT_TEXT = env.EXPECT_TEXT ?? 'add subtracts instead of adding';
const DISMISS_TASK = env.DISMISS_TASK ?? 'Square in mul of calc.py';
const PALETTE_CANCEL_TASK = env.PALETTE_CANCEL_TASK ?? 'Ponder mul in calc.py forever';
const ASK_QUESTION = env.ASK_QUESTION ?? 'Does this work for floats?';
const ASK_ANSWER = env.ASK_ANSWER ?? 'Yes, add works for floats.';
const T0 = Date.now();
// Every wait is generous (a loaded 2-core CI machine takes 20 s to load the workbench);
// AGENT_LSP_E2E_TIMEOUT_SCALE stretches them further.
const SCALE = Number(env.AGENT_LSP_E2E_TIMEOUT_SCALE || 1);
const t = (ms) => ms * SCALE;

const result = { ok: false, marker: MARKER, steps: [], scenarios: {}, timings: {}, orphans: [] };

function log(msg) {
  process.stderr.write(`[vscode-e2e +${((Date.now() - T0) / 1000).toFixed(1)}s] ${msg}\n`);
}

async function step(name, fn) {
  const t = Date.now();
  log(`${name}…`);
  try {
    const value = await fn();
    result.steps.push({ name, ok: true, ms: Date.now() - t });
    return value;
  } catch (err) {
    result.steps.push({ name, ok: false, ms: Date.now() - t, error: String(err?.stack ?? err) });
    throw err;
  }
}

function required(name) {
  const value = env[name];
  if (!value) {
    throw new Error(`${name} is not set (run tests/editors/vscode/setup.sh and source its output)`);
  }
  return value;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, timeoutMs, intervalMs = 250) {
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

function buildVsix(tmp) {
  if (env.AGENT_LSP_VSIX) {
    return env.AGENT_LSP_VSIX;
  }
  const lock = path.join(EXT_DIR, 'package-lock.json');
  const stamp = path.join(EXT_DIR, 'node_modules', '.package-lock.json');
  if (!fs.existsSync(stamp) || fs.statSync(stamp).mtimeMs < fs.statSync(lock).mtimeMs) {
    npm(['ci', '--loglevel=error'], EXT_DIR);
  }
  npm(['run', '--silent', 'typecheck'], EXT_DIR);
  // vsce runs `vscode:prepublish` (the esbuild bundle) before packing.
  const vsix = path.join(tmp, 'agent-lsp.vsix');
  execFileSync(process.execPath, [path.join(EXT_DIR, 'node_modules', '@vscode', 'vsce', 'vsce'),
    'package', '--no-dependencies', '--out', vsix], { cwd: EXT_DIR, stdio: ['ignore', 2, 2], env: buildEnv });
  return vsix;
}

// ---------------------------------------------------------------------------------------
// A fresh code-server: its own HOME, XDG dirs, user data and extensions.

function makeDirs() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lsp-vscode-'));
  const dirs = {
    tmp,
    home: path.join(tmp, 'home'),
    userData: path.join(tmp, 'user-data'),
    extensions: path.join(tmp, 'extensions'),
    state: path.join(tmp, 'state'),
    workspace: path.join(tmp, 'workspace'),
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

function writeWorkspace(dir) {
  fs.writeFileSync(path.join(dir, 'calc.py'),
    'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n');
  fs.writeFileSync(path.join(dir, 'test_calc.py'),
    'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n');
  fs.writeFileSync(path.join(dir, 'README.md'), '# sample\n');
}

function writeUserSettings(dirs) {
  // code-server is a remote to its workbench: machine-scoped settings count only in the
  // remote ("Machine") settings file, where a code-server user puts them too.
  const machine = {
    'agentLsp.serverPath': required('AGENT_LSP_SERVER'),
    'agentLsp.baseUrl': required('AGENT_LSP_MODEL_URL'),
  };
  const settings = {
    'agentLsp.model': 'm',
    'agentLsp.trace.server': env.AGENT_LSP_TRACE ?? 'off',
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'workbench.enableExperiments': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'chat.disableAIFeatures': true,
    'chat.commandCenter.enabled': false,
    'security.workspace.trust.enabled': false,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'git.enabled': false,
    'editor.minimap.enabled': false,
    'files.autoSave': 'off',
    'window.commandCenter': false,
    'remote.autoForwardPorts': false,
  };
  const user = path.join(dirs.userData, 'User');
  fs.mkdirSync(user, { recursive: true });
  fs.writeFileSync(path.join(user, 'settings.json'), JSON.stringify(settings, null, 2));
  const machineDir = path.join(dirs.userData, 'Machine');
  fs.mkdirSync(machineDir, { recursive: true });
  fs.writeFileSync(path.join(machineDir, 'settings.json'), JSON.stringify(machine, null, 2));
}

function codeServerEnv(dirs) {
  return {
    PATH: env.PATH,
    LANG: 'C.UTF-8',
    HOME: dirs.home,
    XDG_CONFIG_HOME: path.join(dirs.home, '.config'),
    XDG_CACHE_HOME: path.join(dirs.home, '.cache'),
    XDG_DATA_HOME: path.join(dirs.home, '.local', 'share'),
    XDG_STATE_HOME: path.join(dirs.home, '.state'),
    TMPDIR: dirs.tmp,
    OPENAI_API_KEY: 'test',
    AGENT_LSP_STATE_DIR: dirs.state,
    // Finds every process this run started, whatever it reparented to.
    AGENT_LSP_E2E_MARKER: MARKER,
  };
}

function installExtension(dirs, vsix) {
  execFileSync(process.execPath, [required('AGENT_LSP_CODE_SERVER'),
    '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions,
    '--install-extension', vsix], {
    env: codeServerEnv(dirs), stdio: ['ignore', 2, 2], timeout: t(120_000),
  });
}

async function startCodeServer(dirs, port) {
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

async function stopCodeServer(cs) {
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
    await sleep(500);
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

// ---------------------------------------------------------------------------------------
// The browser side.

function loadPlaywright() {
  const dir = required('AGENT_LSP_PLAYWRIGHT_DIR');
  return createRequire(path.join(dir, 'package.json'))('playwright-core');
}

/** The log file VS Code keeps for an extension's output channel (exthost logs). */
function outputChannelLog(dirs, name) {
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
  return found.map((p) => fs.readFileSync(p, 'utf8')).join('\n');
}

async function palette(page, title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: t(30_000) });
  await input.fill(`>${title}`);
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  await row.waitFor({ state: 'visible', timeout: t(30_000) });
  await page.keyboard.press('Enter');
}

async function answerInputBox(page, text) {
  const widget = page.locator('.quick-input-widget');
  await widget.waitFor({ state: 'visible', timeout: t(30_000) });
  const input = widget.locator('input');
  await input.fill(text);
  await page.keyboard.press('Enter');
}

async function openFile(page, name) {
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: t(30_000) });
  await input.fill(name);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first()
    .waitFor({ state: 'visible', timeout: t(30_000) });
  await page.keyboard.press('Enter');
  await page.locator('.tabs-container .tab.active', { hasText: name })
    .waitFor({ state: 'visible', timeout: t(30_000) });
}

// Monaco renders spaces as U+00A0.
const plain = (text) => text.replace(/\u00a0/g, ' ');

async function editorText(page) {
  return plain(await page.locator('.editor-group-container .monaco-editor .view-lines').first().innerText());
}

async function outputPanelText(page) {
  return plain(await page.locator('.part.panel .monaco-editor .view-lines').first().innerText());
}

function toast(page, hasText) {
  return page.locator('.notifications-toasts .notification-toast', { hasText });
}

async function runScenario(page, dirs) {
  const r = {};
  await step('open calc.py', () => openFile(page, 'calc.py'));
  await waitFor('calc.py in the editor', async () => (await editorText(page)).includes(EXPECT_OLD), t(30_000));

  const tRun = Date.now();
  await step('Agent: Run Task…', async () => {
    await palette(page, 'Agent: Run Task…');
    await answerInputBox(page, RUN_TASK);
  });

  const approval = toast(page, 'edit_file').filter({ has: page.getByRole('button', { name: 'Allow', exact: true }) });
  await step('approval toast', async () => {
    await approval.first().waitFor({ state: 'visible', timeout: t(120_000) });
    r.approvalText = (await approval.first().innerText()).slice(0, 500);
    r.approvalButtons = await approval.first().locator('.monaco-button').allInnerTexts();
    await page.screenshot({ path: path.join(dirs.shots, 'approval.png') });
    await approval.first().getByRole('button', { name: 'Allow', exact: true }).click();
  });
  r.approvalMs = Date.now() - tRun;

  await step('edit in the editor', () =>
    waitFor('the agent edit in calc.py', async () => (await editorText(page)).includes(EXPECT_NEW), t(60_000)));
  r.editorText = await editorText(page);

  await step('run stopped', () =>
    waitFor('the stop event in the Agent output', () => /■/.test(outputChannelLog(dirs, 'Agent')), t(60_000)));
  r.runMs = Date.now() - tRun;
  await step('model text in the Agent output view', () =>
    waitFor('model text in the visible output panel', async () =>
      (await outputPanelText(page)).includes(EXPECT_TEXT), t(30_000)));
  r.outputPanelText = await outputPanelText(page);
  r.agentOutput = outputChannelLog(dirs, 'Agent');
  r.fileOnDisk = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  r.dirtyTabs = await page.locator('.tabs-container .tab.dirty').count();
  await page.waitForTimeout(500);
  await page.screenshot({ path: path.join(dirs.shots, 'screenshot.png') });
  return r;
}

async function cancelScenario(page, dirs) {
  const r = {};
  const before = outputChannelLog(dirs, 'Agent');
  await step('Agent: New Session', () => palette(page, 'Agent: New Session'));
  await step('Agent: Run Task… (slow)', async () => {
    await palette(page, 'Agent: Run Task…');
    await answerInputBox(page, CANCEL_TASK);
  });
  const progress = toast(page, 'Agent:').filter({ has: page.getByRole('button', { name: 'Cancel', exact: true }) });
  await step('progress notification', () => progress.first().waitFor({ state: 'visible', timeout: t(60_000) }));
  r.progressText = (await progress.first().innerText()).slice(0, 500);
  await page.screenshot({ path: path.join(dirs.shots, 'progress.png') });
  const tCancel = Date.now();
  await step('click Cancel', () => progress.first().getByRole('button', { name: 'Cancel', exact: true }).click());
  await step('stop reason cancelled', () =>
    waitFor('"cancelled" in the Agent output', () => {
      const text = outputChannelLog(dirs, 'Agent').slice(before.length);
      return /stop reason: cancelled|cancelled/.test(text) && /■/.test(text);
    }, t(15_000), 100));
  r.cancelMs = Date.now() - tCancel;
  await step('progress notification closed', () =>
    waitFor('the progress notification to close', async () => (await progress.count()) === 0, t(20_000)));
  r.agentOutput = outputChannelLog(dirs, 'Agent').slice(before.length);
  await waitFor('cancelled in the output panel', async () =>
    (await outputPanelText(page)).includes('cancelled'), t(30_000)).catch(() => false);
  r.outputPanelText = await outputPanelText(page);
  await page.screenshot({ path: path.join(dirs.shots, 'cancelled.png') });
  return r;
}

/** The server's "Ask agent about selection" code action, intercepted to ask the question. */
async function askScenario(page, dirs) {
  const r = {};
  const before = outputChannelLog(dirs, 'Agent');
  await step('Agent: New Session (ask)', () => palette(page, 'Agent: New Session'));
  await step('select add()', async () => {
    await page.locator('.editor-group-container .monaco-editor .view-lines').first().click();
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('Shift+ArrowDown');
    await page.keyboard.press('Shift+End');
  });
  await step('code action "Ask agent about selection"', async () => {
    await page.keyboard.press('Control+.');
    const row = page.locator('.action-widget .monaco-list-row', { hasText: 'Ask agent about selection' });
    await row.first().waitFor({ state: 'visible', timeout: t(30_000) });
    r.actions = (await page.locator('.action-widget .monaco-list-row').allInnerTexts()).map(plain);
    await page.screenshot({ path: path.join(dirs.shots, 'code-actions.png') });
    await row.first().click();
  });
  await step('question input box', () => answerInputBox(page, ASK_QUESTION));
  await step('answer in the Agent output', () =>
    waitFor('the answer in the Agent output', () => {
      const text = outputChannelLog(dirs, 'Agent').slice(before.length);
      return text.includes(ASK_ANSWER) && /stop reason: done/.test(text);
    }, t(60_000)));
  r.agentOutput = outputChannelLog(dirs, 'Agent').slice(before.length);
  return r;
}

/** Closing the approval toast (X) answers null: a denial, and the run goes on. */
async function dismissScenario(page, dirs) {
  const r = {};
  const before = outputChannelLog(dirs, 'Agent');
  await step('Agent: New Session (dismiss)', () => palette(page, 'Agent: New Session'));
  await step('Agent: Run Task… (dismiss)', async () => {
    await palette(page, 'Agent: Run Task…');
    await answerInputBox(page, DISMISS_TASK);
  });
  const approval = toast(page, 'edit_file').filter({ has: page.getByRole('button', { name: 'Deny', exact: true }) });
  await step('dismiss the approval toast', async () => {
    await approval.first().waitFor({ state: 'visible', timeout: t(60_000) });
    await approval.first().hover();
    await approval.first().locator('.codicon-notifications-clear').click();
  });
  await step('run goes on after the denial', () =>
    waitFor('"stop reason: done" after the dismissal', () =>
      outputChannelLog(dirs, 'Agent').slice(before.length).includes('stop reason: done'), t(60_000)));
  r.agentOutput = outputChannelLog(dirs, 'Agent').slice(before.length);
  r.fileOnDisk = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  r.editorText = await editorText(page);
  return r;
}

/** `Agent: Cancel Run` from the palette (the server's agentLsp.cancel). */
async function paletteCancelScenario(page, dirs) {
  const r = {};
  const before = outputChannelLog(dirs, 'Agent');
  await step('Agent: New Session (palette cancel)', () => palette(page, 'Agent: New Session'));
  await step('Agent: Run Task… (slow, palette cancel)', async () => {
    await palette(page, 'Agent: Run Task…');
    await answerInputBox(page, PALETTE_CANCEL_TASK);
  });
  const progress = toast(page, 'Agent:').filter({ has: page.getByRole('button', { name: 'Cancel', exact: true }) });
  await step('progress notification (palette cancel)', () =>
    progress.first().waitFor({ state: 'visible', timeout: t(60_000) }));
  const tCancel = Date.now();
  await step('Agent: Cancel Run', () => palette(page, 'Agent: Cancel Run'));
  await step('stop reason cancelled (palette)', () =>
    waitFor('"stop reason: cancelled" in the Agent output', () =>
      outputChannelLog(dirs, 'Agent').slice(before.length).includes('stop reason: cancelled'), t(15_000), 100));
  r.cancelMs = Date.now() - tCancel;
  await step('progress notification closed (palette)', () =>
    waitFor('the progress notification to close', async () => (await progress.count()) === 0, t(20_000)));
  r.agentOutput = outputChannelLog(dirs, 'Agent').slice(before.length);
  return r;
}

/** A machine-scoped setting (trust boundary) changed: the extension restarts the server. */
async function restartScenario(page, dirs) {
  const r = {};
  const started = () => (outputChannelLog(dirs, 'agent-lsp').match(/server started/g) ?? []).length;
  const before = started();
  const file = path.join(dirs.userData, 'Machine', 'settings.json');
  const machine = JSON.parse(fs.readFileSync(file, 'utf8'));
  machine['agentLsp.approval.allowCommands'] = ['pytest'];
  fs.writeFileSync(file, JSON.stringify(machine, null, 2));
  await step('server restarted after a machine-scoped change', () =>
    waitFor('a second "server started"', () => started() > before, t(120_000)));
  r.log = outputChannelLog(dirs, 'agent-lsp').split('\n').filter((l) => /restart|server started/.test(l));
  return r;
}

async function main() {
  const dirs = makeDirs();
  result.tmp = dirs.tmp;
  result.screenshots = dirs.shots;
  let cs;
  let browser;
  try {
    const vsix = await step('build and pack the extension', () => buildVsix(dirs.tmp));
    result.vsix = vsix;
    writeWorkspace(dirs.workspace);
    writeUserSettings(dirs);
    await step('install the .vsix into code-server', () => installExtension(dirs, vsix));
    const port = await freePort();
    cs = await step('start code-server', () => startCodeServer(dirs, port));
    const { chromium } = loadPlaywright();
    browser = await step('launch Chromium', () => chromium.launch({
      executablePath: env.AGENT_LSP_CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
    }));
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    page.setDefaultTimeout(t(45_000));
    const consoleErrors = [];
    page.on('pageerror', (err) => consoleErrors.push(String(err)));
    await step('load the workbench', async () => {
      await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`,
        { waitUntil: 'domcontentloaded', timeout: t(120_000) });
      await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: t(120_000) });
      await page.locator('.explorer-folders-view, .explorer-viewlet').first()
        .waitFor({ state: 'visible', timeout: t(120_000) });
    });
    await step('server started', () =>
      waitFor('the agent-lsp server to answer initialize', () =>
        /server started/.test(outputChannelLog(dirs, 'agent-lsp')), t(120_000)));
    result.scenarios.run = await runScenario(page, dirs);
    result.scenarios.cancel = await cancelScenario(page, dirs);
    result.scenarios.ask = await askScenario(page, dirs);
    result.scenarios.dismiss = await dismissScenario(page, dirs);
    result.scenarios.paletteCancel = await paletteCancelScenario(page, dirs);
    result.scenarios.restart = await restartScenario(page, dirs);
    result.consoleErrors = consoleErrors.slice(0, 20);
    result.ok = true;
  } catch (err) {
    result.error = String(err?.stack ?? err);
    if (browser) {
      for (const ctx of browser.contexts()) {
        for (const page of ctx.pages()) {
          await page.screenshot({ path: path.join(dirs.shots, 'failure.png') }).catch(() => {});
        }
      }
    }
  } finally {
    result.serverLog = outputChannelLog(dirs, 'agent-lsp').slice(-6000);
    if (!result.scenarios.run?.agentOutput || !result.ok) {
      result.agentOutput = outputChannelLog(dirs, 'Agent').slice(-6000);
    }
    if (cs) {
      result.codeServerLog = fs.readFileSync(cs.logFile, 'utf8').slice(-4000);
    }
    await browser?.close().catch(() => {});
    await stopCodeServer(cs);
    result.timings.totalMs = Date.now() - T0;
    // A failed run keeps its temp dir (logs, screenshots) for the developer; result.tmp names it.
    if (result.ok && result.orphans.length === 0 && !env.AGENT_LSP_KEEP_TMP) {
      fs.rmSync(dirs.tmp, { recursive: true, force: true });
    }
  }
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
  process.exitCode = result.ok && result.orphans.length === 0 ? 0 : 1;
}

await main();
