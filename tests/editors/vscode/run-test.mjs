#!/usr/bin/env node
// Drives the agent-lsp VS Code extension in a real VS Code (code-server) from Debian's
// Chromium with playwright-core: builds and packs the .vsix, installs it into a fresh
// code-server and plays the scenarios of scenarios-core.mjs and scenarios-features.mjs
// against the scripted model, one after the other in the same window. A failing scenario is
// recorded (its error and a screenshot) and the next one still runs.
// Prints one JSON object on stdout (the pytest wrapper asserts on it); logs go to stderr.
//
// Environment (tests/editors/vscode/setup.sh prints most of it):
//   AGENT_LSP_SERVER          executable started as `<it> serve --stdio` (required)
//   AGENT_LSP_MODEL_URL       base URL of the scripted model, e.g. http://127.0.0.1:PORT/v1 (required)
//   AGENT_LSP_TASKS           JSON: the task texts and expectations (see test_vscode.py)
//   AGENT_LSP_SCENARIOS       comma-separated subset of scenarios to play (default: all)
//   AGENT_LSP_MCP_TIME        mcp-server-time executable (the MCP scenario)
//   AGENT_LSP_CODE_SERVER     code-server's out/node/entry.js
//   AGENT_LSP_PLAYWRIGHT_DIR  folder whose node_modules holds playwright-core
//   AGENT_LSP_NPM_CLI         npm-cli.js of this Node (to build and pack the extension)
//   AGENT_LSP_CHROMIUM        default /usr/bin/chromium
//   AGENT_LSP_CHROMIUM_ARGS   more Chromium switches, space-separated. Headless Chromium here
//                             draws ~1 frame a second, and every Playwright click waits for two
//                             stable frames (1-4 s); `--disable-frame-rate-limit` makes clicks
//                             ~0.3 s but keeps a core busy, so it is not the default
//   AGENT_LSP_VSIX            a ready .vsix: skips the build and pack
//   AGENT_LSP_VSIX_COPY       where to copy the packed .vsix (the test reads its README)
//   AGENT_LSP_SCREENSHOT_DIR  where screenshots go (default: the run's temp dir)
//   AGENT_LSP_KEEP_TMP=1      keep the temp dir for debugging
//   AGENT_LSP_E2E_MARKER      tags every process started (so a caller can clean up after a kill)
import fs from 'node:fs';
import path from 'node:path';
import {
  buildVsix, env, freePort, installExtension, loadPlaywright, log, makeDirs, outputChannelLog, required, result,
  startCodeServer, step, stopCodeServer, t, userSettingsFile, waitFor,
} from './harness.mjs';
import * as chat from './scenarios-chat.mjs';
import * as codeIntel from './scenarios-codeintel.mjs';
import * as core from './scenarios-core.mjs';
import * as debug from './scenarios-debug.mjs';
import * as features from './scenarios-features.mjs';

const T_START = Date.now();
const tasks = JSON.parse(env.AGENT_LSP_TASKS || '{}');

// Order matters: rewind undoes `run`; the resumed session is `dismiss`'s; the two-folder
// workspace reloads the window; the last two restart the server with other settings.
const SCENARIOS = [
  ['startupHealth', features.startupHealth],
  ['run', core.run],
  ['rewind', core.rewind],
  ['keepDirty', core.keepDirty],
  ['denyWithReason', core.denyWithReason],
  ['cancel', core.cancel],
  ['ask', core.ask],
  ['unknownKinds', core.unknownKinds],
  ['dismiss', core.dismiss],
  ['paletteCancel', core.paletteCancel],
  ['backgroundProcesses', core.backgroundProcesses],
  ['plan', features.plan],
  ['pickModel', features.pickModel],
  ['runCommand', features.runCommand],
  ['mcpAndStatus', features.mcpAndStatus],
  ['diagnostics', features.diagnostics],
  ['alwaysAllow', core.alwaysAllow],
  ['resume', features.resume],
  ['multiRoot', features.multiRoot],
  ['diffHunks', features.diffHunks],
  ['editPreview', features.editPreview],
  ['editPreviewHunks', features.editPreviewHunks],
  ['healthUnreachable', features.healthUnreachable],
  ['showSetup', features.showSetup],
];
// Played only when AGENT_LSP_SCENARIOS names them (they need another server or script).
const NAMED_ONLY = [
  ['codeIntelProbe', codeIntel.codeIntelProbe],
  ['codeIntelTools', codeIntel.codeIntelTools],
  ['debugInVsCode', debug.debugInVsCode],
  // last of these: it turns agentLsp.editPreview on
  ['codeIntelRenamePreview', codeIntel.codeIntelRenamePreview],
  ['chatMarkdownAndFollowUp', chat.chatMarkdownAndFollowUp],
  ['chatApproval', chat.chatApproval],
  ['chatHunks', chat.chatHunks],
  ['chatSteer', chat.chatSteer],
  ['chatStop', chat.chatStop],
  ['chatQueue', chat.chatQueue],
  ['chatForkAndResume', chat.chatForkAndResume],
  ['chatHiddenApproval', chat.chatHiddenApproval],
  ['chatAttach', chat.chatAttach],
  ['chatStopQueued', chat.chatStopQueued],
  ['chatRewind', chat.chatRewind],
  ['chatUnknownKinds', chat.chatUnknownKinds],
  ['chatBench', chat.chatBench],
];

function writeWorkspace(dirs) {
  fs.writeFileSync(path.join(dirs.workspace, 'calc.py'),
    'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n');
  fs.writeFileSync(path.join(dirs.workspace, 'test_calc.py'),
    'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n');
  fs.writeFileSync(path.join(dirs.workspace, 'README.md'), '# sample\n');
  // editPreviewHunks opens it by name: there from the start, quick open knows it
  fs.writeFileSync(path.join(dirs.workspace, 'hunks.txt'), tasks.hunksBefore ?? '');
  // A prompt file for `Agent: Run Command…` (the runCommand scenario).
  fs.mkdirSync(path.join(dirs.workspace, '.claude', 'commands'), { recursive: true });
  fs.writeFileSync(path.join(dirs.workspace, '.claude', 'commands', 'explain.md'),
    '---\ndescription: Explain a function\nargument-hint: <function>\n---\nExplain the function $1 in one line.\n');
  // VS Code's own JSON support flags this (the diagnostics scenario).
  fs.writeFileSync(path.join(dirs.workspace, 'bad.json'), '{\n  "name": "sample",\n  "version": \n}\n');
  fs.writeFileSync(path.join(dirs.second, 'notes.txt'), tasks.multiOld ? `${tasks.multiOld}\n` : 'notes\n');
  // TypeScript for code intelligence: VS Code's built-in TypeScript features answer for it.
  fs.writeFileSync(path.join(dirs.workspace, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { strict: true, target: 'es2020', module: 'commonjs' }, files: ['shapes.ts', 'main.ts'] }));
  fs.writeFileSync(path.join(dirs.workspace, 'shapes.ts'), codeIntel.SHAPES_TS);
  fs.writeFileSync(path.join(dirs.workspace, 'main.ts'), codeIntel.MAIN_TS);
}

function writeUserSettings(dirs) {
  // code-server is a remote to its workbench: machine-scoped settings count only in the
  // remote ("Machine") settings file, where a code-server user puts them too.
  const machine = {
    'agentLsp.serverPath': required('AGENT_LSP_SERVER'),
    'agentLsp.baseUrl': required('AGENT_LSP_MODEL_URL'),
    // The diff editor + notification path first; the editPreview scenario turns it on.
    'agentLsp.editPreview': false,
  };
  if (env.AGENT_LSP_MCP_TIME) {
    machine['agentLsp.mcpServers'] = { time: { command: env.AGENT_LSP_MCP_TIME, args: ['--local-timezone', 'UTC'] } };
    // Its tools say readOnlyHint, so they would run unasked: make the approval the test needs.
    machine['agentLsp.approval.tools'] = { time__get_current_time: 'ask' };
  }
  const settings = {
    'agentLsp.model': tasks.configuredModel ?? 'm',
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
  // The agent-lsp user settings file: "Always allow" adds its rule beside this deny rule.
  fs.writeFileSync(userSettingsFile(dirs), JSON.stringify({ permissions: { deny: ['Bash(rm:*)'] } }));
}

async function playScenarios(page, ctx) {
  const wanted = env.AGENT_LSP_SCENARIOS ? new Set(env.AGENT_LSP_SCENARIOS.split(',')) : undefined;
  for (const [name, play] of [...SCENARIOS, ...NAMED_ONLY]) {
    if ((wanted && !wanted.has(name)) || (!wanted && NAMED_ONLY.some(([n]) => n === name))) {
      continue;
    }
    const started = Date.now();
    log(`=== scenario ${name}`);
    try {
      result.scenarios[name] = { ...(await play(ctx)), ms: Date.now() - started };
    } catch (err) {
      result.scenarios[name] = { error: String(err?.stack ?? err), ms: Date.now() - started };
      log(`scenario ${name} failed: ${err}`);
      await page.screenshot({ path: path.join(ctx.dirs.shots, `failure-${name}.png`) }).catch(() => {});
      // Leave nothing open for the next scenario (a quick input, a toast waiting for an answer).
      await page.keyboard.press('Escape').catch(() => {});
    }
  }
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
    if (env.AGENT_LSP_VSIX_COPY) {
      fs.copyFileSync(vsix, env.AGENT_LSP_VSIX_COPY);
    }
    writeWorkspace(dirs);
    writeUserSettings(dirs);
    await step('install the .vsix into code-server', () => installExtension(dirs, vsix));
    const port = await freePort();
    cs = await step('start code-server', () => startCodeServer(dirs, port));
    const { chromium } = loadPlaywright();
    browser = await step('launch Chromium', () => chromium.launch({
      executablePath: env.AGENT_LSP_CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
        ...(env.AGENT_LSP_CHROMIUM_ARGS ? env.AGENT_LSP_CHROMIUM_ARGS.split(' ') : [])],
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
    await playScenarios(page, { page, dirs, tasks, port });
    result.consoleErrors = consoleErrors.slice(0, 20);
    result.ok = Object.values(result.scenarios).every((s) => !s.error);
    if (!result.ok) {
      result.error = Object.entries(result.scenarios).filter(([, s]) => s.error).map(([n, s]) => `${n}: ${s.error}`).join('\n');
    }
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
    result.serverLog = outputChannelLog(dirs, 'agent-lsp').slice(-8000);
    if (!result.ok) {
      result.agentOutput = outputChannelLog(dirs, 'Agent').slice(-8000);
    }
    if (cs) {
      result.codeServerLog = fs.readFileSync(cs.logFile, 'utf8').slice(-4000);
    }
    await browser?.close().catch(() => {});
    await stopCodeServer(cs);
    result.timings.totalMs = Date.now() - T_START;
    // A failed run keeps its temp dir (logs, screenshots) for the developer; result.tmp names it.
    if (result.ok && result.orphans.length === 0 && !env.AGENT_LSP_KEEP_TMP) {
      fs.rmSync(dirs.tmp, { recursive: true, force: true });
    }
  }
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
  process.exitCode = result.ok && result.orphans.length === 0 ? 0 : 1;
}

await main();
