// Scenarios of the basic loop: a run whose edit is shown as a diff and allowed, a denial
// with a typed reason, a rewind, cancels (progress button and palette), the selection code
// action, and a dismissed approval.
import fs from 'node:fs';
import path from 'node:path';
import { logInterval, outputChannelLog, step, t, userSettingsFile, waitFor } from './harness.mjs';
import {
  answerInputBox, button, clearNotifications, clickToastButton, diffModifiedText, editorText, openFile, outputPanelText, palette, pickQuickItem, plain,
  settled, tabLabels, toast, toastWithButton,
} from './workbench.mjs';

const agentLog = (dirs) => outputChannelLog(dirs, 'Agent');
const serverLog = (dirs) => outputChannelLog(dirs, 'agent-lsp');
const since = (dirs, before) => agentLog(dirs).slice(before.length);

async function runTask(page, task) {
  await palette(page, 'Agent: Run Task…');
  await answerInputBox(page, task);
}

async function newSession(page) {
  await palette(page, 'Agent: New Session');
}

/** Run Task; the edit's diff opens with the approval toast; Allow; the edit lands and is saved. */
export async function run({ page, dirs, tasks }) {
  const r = {};
  await step('open calc.py', () => openFile(page, 'calc.py'));
  await waitFor('calc.py in the editor', async () => (await editorText(page)).includes('return a - b'), t(30_000));
  await step('Agent: Run Task…', () => runTask(page, tasks.run));
  const approval = await step('approval toast', () => toastWithButton(page, 'edit_file', 'Allow', 120_000));
  await step('the diff editor shows the proposed edit', () =>
    waitFor('the proposed text in a diff editor', async () => (await diffModifiedText(page)).includes('return a + b'), t(30_000)));
  r.approvalText = (await approval.innerText()).slice(0, 500);
  r.approvalButtons = await approval.locator('.monaco-button').allInnerTexts();
  r.diffTabs = (await tabLabels(page)).filter((l) => l.includes('proposed'));
  r.diffText = await diffModifiedText(page);
  await page.screenshot({ path: path.join(dirs.shots, 'approval.png') });
  await clickToastButton(approval, 'Allow');

  await step('edit in the editor', () =>
    waitFor('the agent edit in calc.py', async () => (await editorText(page)).includes('return a + b'), t(60_000)));
  r.editorText = await editorText(page);
  await step('run stopped', () => waitFor('the stop event in the Agent output', () => /■/.test(agentLog(dirs)), t(60_000)));
  await step('model text in the Agent output view', () =>
    waitFor('model text in the visible output panel', async () =>
      (await outputPanelText(page)).includes(tasks.runFinal), t(30_000)));
  r.diffTabsAfter = (await tabLabels(page)).filter((l) => l.includes('proposed'));
  r.outputPanelText = await outputPanelText(page);
  r.agentOutput = agentLog(dirs);
  r.fileOnDisk = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  r.dirtyTabs = await page.locator('.tabs-container .tab.dirty').count();
  await page.screenshot({ path: path.join(dirs.shots, 'screenshot.png') });
  return r;
}

/** Agent: Rewind Run… on the run above: calc.py is back as before, in the buffer and on disk. */
export async function rewind({ page, dirs, tasks }) {
  const r = {};
  await step('Agent: Rewind Run…', () => palette(page, 'Agent: Rewind Run…'));
  r.pickRows = await step('pick the run', () => pickQuickItem(page, tasks.run.slice(0, 30)));
  const note = await step('rewind notification', async () => {
    const found = toast(page, 'rewind of').first();
    await found.waitFor({ state: 'visible', timeout: t(30_000) });
    return found;
  });
  r.notification = plain(await note.innerText());
  await step('calc.py restored in the editor', () =>
    waitFor('return a - b back in the buffer', async () => (await editorText(page)).includes('return a - b'), t(30_000)));
  r.editorText = await editorText(page);
  await step('calc.py restored on disk', () =>
    waitFor('return a - b back on disk', () =>
      fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8').includes('return a - b'), t(30_000)));
  r.fileOnDisk = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  r.dirtyTabs = await page.locator('.tabs-container .tab.dirty').count();
  await step('the rewind in the Agent output', () =>
    waitFor('the ↺ line in the output panel', async () => (await outputPanelText(page)).includes('↺ rewind'), t(30_000)));
  r.outputLine = (await outputPanelText(page)).split('\n').find((l) => l.includes('↺ rewind'));
  await settled(note);
  await page.screenshot({ path: path.join(dirs.shots, 'rewind.png') });
  return r;
}

/** Deny, then a typed reason: the model is told the reason with the denial. */
export async function denyWithReason({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await newSession(page);
  await step('Agent: Run Task… (deny)', () => runTask(page, tasks.deny));
  const approval = await step('approval toast (deny)', () => toastWithButton(page, 'edit_file', 'Deny'));
  await clickToastButton(approval, 'Deny');
  await step('type the reason', () => answerInputBox(page, tasks.denyReason, 'why not'));
  await step('run goes on after the denial', () =>
    waitFor('"stop reason: done"', () => since(dirs, before).includes('stop reason: done'), t(60_000)));
  r.agentOutput = since(dirs, before);
  r.fileOnDisk = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  r.diffTabsAfter = (await tabLabels(page)).filter((l) => l.includes('proposed'));
  return r;
}

/** The progress notification's Cancel button (window/workDoneProgress/cancel). */
export async function cancel({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  const beforeServer = serverLog(dirs);
  await newSession(page);
  await step('Agent: Run Task… (slow)', () => runTask(page, tasks.cancel));
  const progress = toast(page, 'Agent:').filter({ has: button(page, 'Cancel') });
  await step('progress notification', () => progress.first().waitFor({ state: 'visible', timeout: t(60_000) }));
  r.progressText = (await progress.first().innerText()).slice(0, 500);
  await step('click Cancel', () => progress.first().getByRole('button', { name: 'Cancel', exact: true }).click());
  await step('stop reason cancelled', () =>
    waitFor('"stop reason: cancelled" in the Agent output', () =>
      since(dirs, before).includes('stop reason: cancelled'), t(30_000), 100));
  await step('progress notification closed', () =>
    waitFor('the progress notification to close', async () => (await progress.count()) === 0, t(20_000)));
  // Timed by the extension's own log (cancel sent -> stop received): the browser's and the
  // log files' latencies on a loaded machine are not the server's.
  const server = serverLog(dirs).slice(beforeServer.length);
  r.cancelMs = logInterval(server, /cancel sent for run .* \(progress\)/, /run \S+ stopped: cancelled/);
  r.serverLog = server.split('\n').filter((l) => /cancel|stopped|still going/.test(l));
  r.agentOutput = since(dirs, before);
  await page.screenshot({ path: path.join(dirs.shots, 'cancelled.png') });
  return r;
}

/** The server's "Ask agent about selection" code action, intercepted to ask the question. */
export async function ask({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await newSession(page);
  await step('open calc.py (ask)', () => openFile(page, 'calc.py'));
  await step('select add()', async () => {
    await page.locator('.editor-group-container .monaco-editor .view-lines').first().click();
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('Shift+ArrowDown');
    await page.keyboard.press('Shift+End');
  });
  await step('code action "Ask agent about selection"', async () => {
    const row = page.locator('.action-widget .monaco-list-row', { hasText: 'Ask agent about selection' });
    // The menu lists the actions known when it opens: a server slow to answer (a loaded
    // machine) leaves ours out, so the menu is closed and opened again until it is there.
    await waitFor('"Ask agent about selection" in the code actions', async () => {
      await page.keyboard.press('Control+.');
      if (await row.first().waitFor({ state: 'visible', timeout: 5_000 }).then(() => true, () => false)) {
        return true;
      }
      await page.keyboard.press('Escape');
      return false;
    }, t(60_000));
    r.actions = (await page.locator('.action-widget .monaco-list-row').allInnerTexts()).map(plain);
    await page.screenshot({ path: path.join(dirs.shots, 'code-actions.png') });
    await row.first().click();
  });
  await step('question input box', () => answerInputBox(page, tasks.askQuestion));
  await step('answer in the Agent output', () =>
    waitFor('the answer in the Agent output', () => {
      const text = since(dirs, before);
      return text.includes(tasks.askAnswer) && /stop reason: done/.test(text);
    }, t(60_000)));
  r.agentOutput = since(dirs, before);
  return r;
}

/** Closing the approval toast (X) answers null: a denial, and the run goes on. */
export async function dismiss({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await newSession(page);
  await step('Agent: Run Task… (dismiss)', () => runTask(page, tasks.dismiss));
  const approval = await step('approval toast (dismiss)', () => toastWithButton(page, 'edit_file', 'Deny'));
  await approval.hover();
  await approval.locator('.codicon-notifications-clear').click();
  await step('run goes on after the dismissal', () =>
    waitFor('"stop reason: done" after the dismissal', () => since(dirs, before).includes('stop reason: done'), t(60_000)));
  r.agentOutput = since(dirs, before);
  r.fileOnDisk = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  r.editorText = await editorText(page);
  return r;
}

/** `Agent: Cancel Run` from the palette (the server's agentLsp.cancel). */
export async function paletteCancel({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  const beforeServer = serverLog(dirs);
  await newSession(page);
  await step('Agent: Run Task… (slow, palette cancel)', () => runTask(page, tasks.paletteCancel));
  const progress = toast(page, 'Agent:').filter({ has: button(page, 'Cancel') });
  await step('progress notification (palette cancel)', () => progress.first().waitFor({ state: 'visible', timeout: t(60_000) }));
  await step('Agent: Cancel Run', () => palette(page, 'Agent: Cancel Run'));
  await step('stop reason cancelled (palette)', () =>
    waitFor('"stop reason: cancelled" in the Agent output', () =>
      since(dirs, before).includes('stop reason: cancelled'), t(30_000), 100));
  await step('progress notification closed (palette)', () =>
    waitFor('the progress notification to close', async () => (await progress.count()) === 0, t(20_000)));
  const server = serverLog(dirs).slice(beforeServer.length);
  r.cancelMs = logInterval(server, /cancel sent for run .* \(agentLsp\.cancel\)/, /run \S+ stopped: cancelled/);
  r.agentOutput = since(dirs, before);
  return r;
}

/**
 * "Always allow" on a command's approval toast (Decision 27): the command runs, its exact rule
 * lands in the user settings file, and the same command in a new session asks nothing.
 */
export async function alwaysAllow({ page, dirs, tasks }) {
  const r = {};
  const touched = path.join(dirs.workspace, 'one');
  const before = agentLog(dirs);
  await newSession(page);
  await step('Agent: Run Task… (a command)', () => runTask(page, tasks.alwaysAllow));
  const approval = await step('approval toast (command)', () => toastWithButton(page, 'touch one', 'Always allow'));
  r.approvalText = (await approval.innerText()).slice(0, 800);
  r.approvalButtons = await approval.locator('.monaco-button').allInnerTexts();
  await clickToastButton(approval, 'Always allow');
  await step('the first run ends', () =>
    waitFor('"stop reason: done"', () => since(dirs, before).includes('stop reason: done'), t(60_000)));
  r.agentOutput = since(dirs, before);
  r.saved = fs.readFileSync(userSettingsFile(dirs), 'utf8');
  r.touched = fs.existsSync(touched);
  fs.rmSync(touched, { force: true });
  const between = agentLog(dirs);
  await newSession(page);
  await step('Agent: Run Task… (the command again)', () => runTask(page, tasks.alwaysAgain));
  await step('the second run ends', () =>
    waitFor('"stop reason: done"', () => since(dirs, between).includes('stop reason: done'), t(60_000)));
  r.agentOutputAgain = since(dirs, between);
  r.touchedAgain = fs.existsSync(touched);
  r.toastsAgain = await toast(page, 'wants to run a command').count();
  return r;
}

/** A run whose stop the test's pipe (`newer_server.py`) precedes with a `steer`, a kind no client
 * knows and a report field no client knows: the Agent output shows the run as usual. */
export async function unknownKinds({ page, dirs, tasks }) {
  await newSession(page); // the scripted model knows the task as a session's first prompt
  const before = agentLog(dirs);
  await step('Agent: Run Task…', () => runTask(page, tasks.kinds));
  await step('run stopped', () => waitFor('the stop line and report of the run', () =>
    /■[^]*stop reason: done/.test(since(dirs, before)), t(60_000)));
  return {
    agentOutput: since(dirs, before),
    toasts: await page.locator('.notifications-toasts .notification-toast').allInnerTexts(),
  };
}

/**
 * `Agent: Background Processes` (issue 35): while the run holds, the quick pick lists the
 * background process its command started; picking it stops it (agentLsp.stopProcess).
 */
export async function backgroundProcesses({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await newSession(page);
  await step('Agent: Run Task… (a background command)', () => runTask(page, tasks.background));
  const approval = await step('approval toast (background command)', () =>
    toastWithButton(page, tasks.backgroundCommand, 'Allow').catch((err) => {
      throw new Error(`${err.message}\nAgent output so far:\n${since(dirs, before)}`);
    }));
  r.approvalText = (await approval.innerText()).slice(0, 800);
  await clickToastButton(approval, 'Allow');
  await step('the command answered (its process runs)', () =>
    waitFor('the run_command result in the Agent output', () => /✓ run_command/.test(since(dirs, before)), t(60_000)));
  await step('Agent: Background Processes', () => palette(page, 'Agent: Background Processes'));
  r.items = await step('the running process in the quick pick', () => pickQuickItem(page, 'p1'));
  await step('the process stopped', () =>
    waitFor('"background process p1 stopped" in the Agent output', () =>
      since(dirs, before).includes('background process p1 stopped'), t(30_000), 100));
  await step('Agent: Background Processes (none left)', () => palette(page, 'Agent: Background Processes'));
  await step('the "none" message', () => toast(page, 'no background process is running').first().waitFor({ state: 'visible', timeout: t(20_000) }));
  await step('Agent: Cancel Run (ends the held run)', () => palette(page, 'Agent: Cancel Run'));
  await step('stop reason cancelled', () =>
    waitFor('"stop reason: cancelled"', () => since(dirs, before).includes('stop reason: cancelled'), t(30_000), 100));
  r.agentOutput = since(dirs, before);
  await clearNotifications(page); // its messages must not stand in a later scenario's way
  return r;
}

/**
 * Decision 81: the user has unsaved changes in calc.py when an agent edit lands there; the
 * extension leaves that document unsaved (the edit in the buffer, not on disk). Reverted after,
 * so the scenarios that follow find calc.py as it was.
 */
export async function keepDirty({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await newSession(page);
  await step('open calc.py (keepDirty)', () => openFile(page, 'calc.py'));
  await page.locator('.editor-group-container .monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type(tasks.keepDirtyTyped);
  await page.keyboard.press('Escape');
  await step('calc.py dirty', () =>
    waitFor('a dirty calc.py tab', async () => (await page.locator('.tabs-container .tab.dirty').count()) > 0, t(30_000)));
  await step('Agent: Run Task… (keepDirty)', () => runTask(page, tasks.keepDirty));
  const approval = await step('approval toast (keepDirty)', () => toastWithButton(page, 'edit_file', 'Allow', 120_000));
  await clickToastButton(approval, 'Allow');
  await step('the agent edit in the dirty buffer', () =>
    waitFor('the agent edit in calc.py', async () => (await editorText(page)).includes(tasks.keepDirtyNew), t(60_000)));
  await step('run done (keepDirty)', () =>
    waitFor('"stop reason: done"', () => since(dirs, before).includes('stop reason: done'), t(60_000)));
  r.editorText = await editorText(page);
  r.dirtyTabs = await page.locator('.tabs-container .tab.dirty').count();
  r.fileOnDisk = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  await palette(page, 'File: Revert File');
  await step('calc.py reverted', () =>
    waitFor('a clean calc.py', async () => (await page.locator('.tabs-container .tab.dirty').count()) === 0, t(30_000)));
  return r;
}
