// Scenarios of the session features: plan and carry out, model pick, an MCP tool with the
// status bar's context fill, editor diagnostics, resume after a server restart, two
// workspace folders, the Refactor Preview, and the health check.
import fs from 'node:fs';
import path from 'node:path';
import { editMachineSettings, log, outputChannelLog, serverStarts, step, t, waitFor } from './harness.mjs';
import {
  answerInputBox, clearNotifications, clickToastButton, diffModifiedText, editorText, openFile, palette, pickQuickItem, plain,
  settled, statusBarTexts, toast, toastWithButton,
} from './workbench.mjs';

const agentLog = (dirs) => outputChannelLog(dirs, 'Agent');
const serverLog = (dirs) => outputChannelLog(dirs, 'agent-lsp');
const since = (dirs, before) => agentLog(dirs).slice(before.length);
const count = (text, re) => (text.match(re) ?? []).length;

async function runTask(page, task) {
  await palette(page, 'Agent: Run Task…');
  await answerInputBox(page, task);
}

async function waitDone(dirs, before, n = 1, timeoutMs = 60_000) {
  await waitFor(`${n} x "stop reason: done"`, () => count(since(dirs, before), /stop reason: done/g) >= n, t(timeoutMs));
}

/** The start-up health check: the configured model is not one the endpoint lists. */
export async function startupHealth({ page }) {
  const found = await step('start-up health toast', () => toastWithButton(page, "is not among the endpoint's models", 'Pick Model…', 60_000));
  const r = { text: plain(await found.innerText()) };
  await clearNotifications(page);
  return r;
}

/** Agent: Plan… (read-only tools), then "Carry Out Plan" from the notification (every tool). */
export async function plan({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Plan…', async () => {
    await palette(page, 'Agent: Plan…');
    await answerInputBox(page, tasks.plan);
  });
  const ready = await step('"plan is ready" notification', () => toastWithButton(page, 'plan', 'Carry Out Plan'));
  r.readyText = plain(await ready.innerText());
  r.planOutput = since(dirs, before);
  await clickToastButton(ready, 'Carry Out Plan');
  await step('the follow-up run is done', () => waitDone(dirs, before, 2));
  r.agentOutput = since(dirs, before);
  return r;
}

/** Agent: Pick Model…: the next run's request names the picked model. */
export async function pickModel({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await step('Agent: Pick Model…', () => palette(page, 'Agent: Pick Model…'));
  r.rows = await step('pick "scripted"', () => pickQuickItem(page, tasks.pickedModel));
  await step('picked', () => toast(page, `use ${tasks.pickedModel}`).first().waitFor({ state: 'visible', timeout: t(30_000) }));
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Task… (model)', () => runTask(page, tasks.model));
  await step('run done (model)', () => waitDone(dirs, before));
  await clearNotifications(page);
  return r;
}

/** Agent: Run Command…: a prompt file from agentLsp.commands, its arguments, run as `/name args`. */
export async function runCommand({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Command…', () => palette(page, 'Agent: Run Command…'));
  r.rows = await step(`pick /${tasks.commandName}`, () => pickQuickItem(page, `/${tasks.commandName}`));
  await step('type its arguments', () => answerInputBox(page, tasks.commandArgs, `/${tasks.commandName}`));
  await step('run done (command)', () => waitDone(dirs, before));
  r.agentOutput = since(dirs, before);
  await clearNotifications(page);
  return r;
}

// The usage item's text (after its icon) starts with the context fill; the message a run's end
// leaves in the status bar for 15 s ("Agent: done: … (ctx 0k/128k)") is another item.
const usageItem = (text) => /^ctx \d+k\/\d+k/.test(text.trim());

/** An MCP tool (mcp-server-time) approved and run; the status bar shows the context fill meanwhile. */
export async function mcpAndStatus({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Task… (mcp)', () => runTask(page, tasks.mcp));
  const approval = await step('MCP approval toast', () => toastWithButton(page, 'time__get_current_time', 'Allow', 120_000));
  r.statusText = await step('context fill in the status bar', () =>
    waitFor('ctx …k/…k in the status bar', async () => (await statusBarTexts(page)).find(usageItem), t(30_000)));
  await settled(approval);
  await page.screenshot({ path: path.join(dirs.shots, 'status.png') });
  await clickToastButton(approval, 'Allow');
  await step('run done (mcp)', () => waitDone(dirs, before));
  await step('status bar item hidden after the run', () =>
    waitFor('no ctx item', async () => !(await statusBarTexts(page)).some(usageItem), t(30_000)));
  r.agentOutput = since(dirs, before);
  return r;
}

/** The model's `diagnostics` tool sees the JSON syntax error VS Code's JSON support shows. */
export async function diagnostics({ page, dirs, tasks }) {
  const r = {};
  const before = agentLog(dirs);
  await step('open bad.json', () => openFile(page, 'bad.json'));
  await step('the editor flags bad.json', () =>
    waitFor('an error squiggle in bad.json', async () =>
      (await page.locator('.editor-group-container .monaco-editor .squiggly-error').count()) > 0, t(60_000)));
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Task… (diagnostics)', () => runTask(page, tasks.diagnostics));
  await step('run done (diagnostics)', () => waitDone(dirs, before));
  r.agentOutput = since(dirs, before);
  return r;
}

/** A new server process (Agent: Restart Server), then Agent: Resume Session… of an earlier session. */
export async function resume({ page, dirs, tasks }) {
  const r = {};
  const starts = serverStarts(dirs);
  await step('Agent: Restart Server', () => palette(page, 'Agent: Restart Server'));
  await step('server restarted', () => waitFor('a new "server started"', () => serverStarts(dirs) > starts, t(60_000)));
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Resume Session…', () => palette(page, 'Agent: Resume Session…'));
  r.rows = await step('pick the session', () => pickQuickItem(page, tasks.resumeTitle));
  await step('resumed', () => toast(page, 'the next run continues').first().waitFor({ state: 'visible', timeout: t(30_000) }));
  await step('Agent: Run Task… (resumed)', () => runTask(page, tasks.resumePrompt));
  await step('run done (resumed)', () => waitDone(dirs, before));
  r.agentOutput = since(dirs, before);
  await clearNotifications(page);
  return r;
}

/** A .code-workspace of two folders: a run reads and edits `second/notes.txt`. */
export async function multiRoot({ page, dirs, tasks, port }) {
  const r = {};
  const file = path.join(dirs.tmp, 'two.code-workspace');
  fs.writeFileSync(file, JSON.stringify({ folders: [{ path: dirs.workspace }, { path: dirs.second }] }, null, 2));
  const starts = serverStarts(dirs);
  await step('open the two-folder workspace', async () => {
    await page.goto(`http://127.0.0.1:${port}/?workspace=${encodeURIComponent(file)}`, { waitUntil: 'domcontentloaded', timeout: t(120_000) });
    await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: t(120_000) });
  });
  // Under load code-server sometimes shows a workspace file as "No Folder Opened" at first (a
  // CI run saw the agent started with no second folder): wait until the Explorer lists the
  // second folder, reloading the page once if it does not.
  await step('the Explorer lists both folders', async () => {
    const second = page.locator('.explorer-folders-view .monaco-list-row').filter({ hasText: path.basename(dirs.second) }).first();
    // the Explorer's welcome for a window without folders once the window's server started
    // (it has settled so): reload at once, not after 30 s
    const noFolder = page.locator('.welcome-view-content', { hasText: /not yet (opened|added) a folder/ }).first();
    const settledEmpty = async () => serverStarts(dirs) > starts && (await noFolder.isVisible());
    const shown = await waitFor('the second folder (or "no folder") in the Explorer', async () =>
      ((await second.isVisible()) && 'listed') || ((await settledEmpty()) && 'no folder'), t(30_000)).catch(() => 'neither');
    if (shown !== 'listed') {
      log(`multiRoot: the Explorer showed ${shown}: reloading the window`);
      await page.screenshot({ path: path.join(dirs.shots, `multi-root-${shown.replace(' ', '-')}.png`) });
      await page.reload({ waitUntil: 'domcontentloaded', timeout: t(120_000) });
      await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: t(120_000) });
      await second.waitFor({ state: 'visible', timeout: t(60_000) });
    }
  });
  await step('server started (two folders)', () => waitFor('a new "server started"', () => serverStarts(dirs) > starts, t(120_000)));
  const before = agentLog(dirs);
  await step('Agent: Run Task… (two folders)', () => runTask(page, tasks.multi));
  const approval = await step('approval toast (second folder)', () => toastWithButton(page, 'edit_file', 'Allow', 120_000));
  await step('the diff of second/notes.txt', () =>
    waitFor('the proposed text', async () => (await diffModifiedText(page)).includes(tasks.multiNew), t(30_000)));
  await clickToastButton(approval, 'Allow');
  await step('second/notes.txt edited on disk', () =>
    waitFor('the edit on disk', () => fs.readFileSync(path.join(dirs.second, 'notes.txt'), 'utf8').includes(tasks.multiNew), t(60_000)));
  await step('run done (two folders)', () => waitDone(dirs, before));
  r.fileOnDisk = fs.readFileSync(path.join(dirs.second, 'notes.txt'), 'utf8');
  r.agentOutput = since(dirs, before);
  return r;
}

/** VS Code's Refactor Preview for an annotated edit (agentLsp.editPreview): accept, then discard. */
export async function editPreview({ page, dirs, tasks }) {
  const r = {};
  const starts = serverStarts(dirs);
  editMachineSettings(dirs, (m) => { m['agentLsp.editPreview'] = true; });
  await step('server restarted (editPreview)', () => waitFor('a new "server started"', () => serverStarts(dirs) > starts, t(60_000)));
  await clearNotifications(page);
  await step('open calc.py (preview)', () => openFile(page, 'calc.py'));
  const panel = page.locator('.bulk-edit-panel');
  let before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Task… (preview accept)', () => runTask(page, tasks.previewAccept));
  await step('the Refactor Preview opens', () => panel.first().waitFor({ state: 'visible', timeout: t(60_000) }));
  await page.screenshot({ path: path.join(dirs.shots, 'edit-preview.png') });
  r.panelText = plain(await panel.first().innerText()).slice(0, 2000);
  r.checkboxes = await panel.locator('.edit-checkbox').count();
  r.checkedBefore = await panel.locator('.edit-checkbox.checked').count();
  r.toasts = await page.locator('.notifications-toasts .notification-toast').allInnerTexts();
  // the hunks open ticked; the confirming no-op entry does not: ticking it too changes nothing
  const unchecked = panel.locator('.edit-checkbox:not(.checked)');
  for (let i = 0; i < 5 && (await unchecked.count()) > 0; i++) {
    await unchecked.first().click();
  }
  r.checkedAfter = await panel.locator('.edit-checkbox.checked').count();
  await panel.getByRole('button', { name: 'Apply', exact: true }).click();
  await step('the previewed edit applied', () =>
    waitFor('the previewed edit in calc.py', async () => (await editorText(page)).includes(tasks.previewNew), t(30_000)));
  await step('run done (preview accept)', () => waitDone(dirs, before));
  r.acceptOutput = since(dirs, before);
  r.fileAfterAccept = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');

  before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Task… (preview discard)', () => runTask(page, tasks.previewReject));
  await step('the Refactor Preview opens again', () => panel.first().waitFor({ state: 'visible', timeout: t(60_000) }));
  const discard = panel.getByRole('button', { name: 'Discard', exact: true });
  await step('its Discard button', () => discard.waitFor({ state: 'visible', timeout: t(30_000) }));
  // the run's progress and output arrive meanwhile: the Output must not cover the preview
  await page.waitForTimeout(1500);
  r.previewInFrontAfterOutput = await discard.isVisible();
  await discard.click();
  await step('run done (preview discard)', () => waitDone(dirs, before));
  r.rejectOutput = since(dirs, before);
  r.fileAfterReject = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
  return r;
}

/**
 * Per-hunk review in the diff editor (Decision 58): with the cursor in the second hunk of the
 * approval's diff, the title action rejects it; Allow then lands the first and third only.
 */
export async function diffHunks({ page, dirs, tasks }) {
  const r = {};
  const file = path.join(dirs.workspace, 'hunks2.txt');
  fs.writeFileSync(file, tasks.hunksBefore);
  await clearNotifications(page);
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Task… (diff hunks)', () => runTask(page, tasks.diffHunks));
  const approval = await step('approval toast (hunks)', () => toastWithButton(page, 'write_file', 'Allow', 120_000));
  // VS Code shows no CodeLens in diff editors by default: the title action rejects the hunk
  // the cursor is in (on the proposed side)
  const side = page.locator('.monaco-diff-editor .editor.modified .view-lines').first();
  await step('the proposed side of the diff', () => side.waitFor({ state: 'visible', timeout: t(30_000) }));
  await side.click();
  await page.keyboard.press('Control+g');  // line 41: "forty-one", in the second hunk
  await page.keyboard.type('41');
  await page.keyboard.press('Enter');
  r.titleAction = await page.locator('.editor-actions .action-label[aria-label^="Agent: Reject or Keep the Hunk"]').count();
  await step('Agent: Reject or Keep the Hunk at the Cursor', () => palette(page, 'Agent: Reject or Keep the Hunk at the Cursor'));
  await page.waitForTimeout(500);
  r.approvalText = (await approval.innerText()).slice(0, 500);
  await page.screenshot({ path: path.join(dirs.shots, 'diff-hunks.png') });
  await clickToastButton(approval, 'Allow');
  await step('run done (diff hunks)', () => waitDone(dirs, before));
  await step('the kept hunks on disk (diff)', () =>
    waitFor('LINE FIVE in hunks2.txt', () => fs.readFileSync(file, 'utf8').includes('LINE FIVE'), t(30_000)));
  r.output = since(dirs, before);
  r.fileAfter = fs.readFileSync(file, 'utf8');
  return r;
}

/**
 * The Refactor Preview hunk by hunk (Decision 80): an edit of three hunks opens with every hunk
 * ticked (only the confirming no-op entry unticked); unticking the second hunk and applying
 * lands the first and third only (screenshot hunk-preview.png).
 */
export async function editPreviewHunks({ page, dirs, tasks }) {
  const r = {};
  const file = path.join(dirs.workspace, 'hunks.txt');
  fs.writeFileSync(file, tasks.hunksBefore);
  const starts = serverStarts(dirs);
  let restarted = false;
  editMachineSettings(dirs, (m) => { restarted = m['agentLsp.editPreview'] !== true; m['agentLsp.editPreview'] = true; });
  if (restarted) {
    await step('server restarted (editPreview, hunks)', () => waitFor('a new "server started"', () => serverStarts(dirs) > starts, t(60_000)));
  }
  await clearNotifications(page);
  await step('open hunks.txt', () => openFile(page, 'hunks.txt'));
  const panel = page.locator('.bulk-edit-panel');
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await step('Agent: Run Task… (hunks)', () => runTask(page, tasks.hunks));
  await step('the Refactor Preview opens (hunks)', () => panel.first().waitFor({ state: 'visible', timeout: t(60_000) }));
  const rows = panel.locator('.monaco-list-row');
  await waitFor('the hunks listed in the preview', async () => (await rows.filter({ hasText: 'forty' }).count()) > 0, t(15_000))
    .catch(async () => {  // collapsed: open the file's row
      await rows.filter({ hasText: 'hunks.txt' }).first().locator('.monaco-tl-twistie').click();
    });
  await page.screenshot({ path: path.join(dirs.shots, 'hunk-preview.png') });
  r.panelText = plain(await panel.first().innerText()).slice(0, 3000);
  r.checkboxes = await panel.locator('.edit-checkbox').count();
  r.checkedBefore = await panel.locator('.edit-checkbox.checked').count();
  r.rowsBefore = await Promise.all((await rows.all()).map(async (row) => ({
    text: plain(await row.innerText()).slice(0, 200),
    checked: (await row.locator('.edit-checkbox.checked').count()) > 0,
  })));
  const second = rows.filter({ hasText: 'forty' }).first();
  // the row's (empty) twistie lies over its checkbox: click the checkbox itself
  await step('untick the second hunk', () => second.locator('.edit-checkbox').dispatchEvent('click'));
  r.checkedAfter = await panel.locator('.edit-checkbox.checked').count();
  await panel.getByRole('button', { name: 'Apply', exact: true }).click();
  await step('run done (hunks)', () => waitDone(dirs, before));
  await step('the kept hunks on disk', () =>
    waitFor('LINE FIVE in hunks.txt', () => fs.readFileSync(file, 'utf8').includes('LINE FIVE'), t(30_000)));
  r.output = since(dirs, before);
  r.fileAfter = fs.readFileSync(file, 'utf8');
  return r;
}

/** An unreachable endpoint: the start-up check and `Agent: Check Health` name it. */
export async function healthUnreachable({ page, dirs, tasks }) {
  const r = {};
  const starts = serverStarts(dirs);
  await clearNotifications(page);
  editMachineSettings(dirs, (m) => { m['agentLsp.baseUrl'] = tasks.deadUrl; });
  await step('server restarted (dead endpoint)', () => waitFor('a new "server started"', () => serverStarts(dirs) > starts, t(60_000)));
  r.restartLog = serverLog(dirs).split('\n').filter((l) => /restarting the server/.test(l));
  await clearNotifications(page);
  await step('Agent: Check Health', () => palette(page, 'Agent: Check Health'));
  const found = await step('health error toast', () => toastWithButton(page, tasks.deadUrl.replace(/\/v1$/, ''), 'Open Settings'));
  r.text = plain(await found.innerText());
  await page.screenshot({ path: path.join(dirs.shots, 'health.png') });
  return r;
}

/**
 * `Agent: Show Setup` (agentLsp.setup): a user skill, a project hook and allow rule waiting for
 * consent and a malformed agent file, shown as a document (the malformed file also in a warning); the files
 * are removed afterwards so that no later scenario sees them.
 */
export async function showSetup({ page, dirs }) {
  const r = {};
  const files = {
    [path.join(dirs.home, '.claude', 'skills', 'style', 'SKILL.md')]: '---\nname: style\ndescription: House style.\n---\nBe brief.\n',
    [path.join(dirs.workspace, '.claude', 'settings.json')]:
      JSON.stringify({ hooks: { Stop: [{ hooks: [{ type: 'command', command: 'make check' }] }] },
        permissions: { allow: ['Bash(make:*)'] } }),
    [path.join(dirs.workspace, '.claude', 'agents', 'bad.md')]: '---\nname: [unclosed\n---\nx\n',
  };
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
  try {
    await clearNotifications(page);
    await step('Agent: Show Setup', () => palette(page, 'Agent: Show Setup'));
    r.text = await step('the setup document', () =>
      waitFor('# Agent: your setup in the editor', async () => {
        const text = await editorText(page);
        return text.includes('# Agent: your setup') && text;
      }, t(30_000)));
    const warning = toast(page, 'bad.md');
    await step('the malformed file in a warning', () => warning.first().waitFor({ state: 'visible', timeout: t(30_000) }));
    r.warning = plain(await warning.first().innerText());
    await page.screenshot({ path: path.join(dirs.shots, 'setup.png') });
    await clearNotifications(page);
  } finally {
    fs.rmSync(path.join(dirs.home, '.claude', 'skills'), { recursive: true, force: true });
    fs.rmSync(path.join(dirs.workspace, '.claude', 'settings.json'), { force: true });
    fs.rmSync(path.join(dirs.workspace, '.claude', 'agents'), { recursive: true, force: true });
  }
  return r;
}
