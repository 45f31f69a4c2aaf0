// Code intelligence through VS Code (CONTRACT "Code intelligence", Source 1): the built-in
// TypeScript language features answer agentLsp/codeIntel. Played only when named in
// AGENT_LSP_SCENARIOS (test_vscode_code_intel.py, which plays them in one window: the probe's
// server first, then the real server through agentLsp.serverPath).
import fs from 'node:fs';
import path from 'node:path';
import { editMachineSettings, env, outputChannelLog, serverStarts, step, t, waitFor } from './harness.mjs';
import { answerInputBox, clickToastButton, editorText, openFile, palette, tabLabels, toastWithButton } from './workbench.mjs';

// The workspace's TypeScript (run-test.mjs writes it; the preview's rename starts from it again).
export const SHAPES_TS = [
  'export class Greeter {',
  '  greet(name: string): string {',
  "    return 'hello ' + name;",
  '  }',
  '}',
  '',
  'export class Other {',
  '  greet(): string {',
  "    return 'not this one';",
  '  }',
  '}',
  '',
  'export function welcome(g: Greeter): string {',
  "  return g.greet('you');",
  '}',
  '',
].join('\n');
export const MAIN_TS = [
  "import { Greeter, welcome } from './shapes';",
  '',
  'const g = new Greeter();',
  "console.log(g.greet('a'), welcome(g), 'greet'); // greet in a comment",
  '',
].join('\n');

/** agentLsp.serverPath set to `server` (tasks.agentServer: the real server after the probe's),
 * waiting for the restart that change causes; nothing when it is set already or not asked. */
export async function useServer(dirs, server) {
  const file = path.join(dirs.userData, 'Machine', 'settings.json');
  if (!server || JSON.parse(fs.readFileSync(file, 'utf8'))['agentLsp.serverPath'] === server) {
    return;
  }
  const starts = serverStarts(dirs);
  editMachineSettings(dirs, (m) => { m['agentLsp.serverPath'] = server; });
  await step('server restarted (agentLsp.serverPath)', () =>
    waitFor('a new "server started"', () => serverStarts(dirs) > starts, t(60_000)));
}

/** agent-lsp's probe server asks its plan once the first file is open; the answers land in
 * AGENT_LSP_PROBE_OUT. */
export async function codeIntelProbe({ page, dirs }) {
  await step('open shapes.ts', () => openFile(page, 'shapes.ts'));
  const out = env.AGENT_LSP_PROBE_OUT;
  await step('the probe got its answers', () =>
    waitFor('the probe\'s answers', () => fs.existsSync(out), t(180_000), 500));
  // the probe server's log as it stands (its health check), before another server logs
  return { answers: JSON.parse(fs.readFileSync(out, 'utf8')), serverLog: outputChannelLog(dirs, 'agent-lsp') };
}

const agentLog = (dirs) => outputChannelLog(dirs, 'Agent');

/** Run Task: the model's find_references and rename_symbol, answered by the TypeScript
 * features; the rename's one approval (screenshot), Allow, both files change. */
export async function codeIntelTools({ page, dirs, tasks }) {
  const r = {};
  await useServer(dirs, tasks.agentServer);
  await palette(page, 'Agent: New Session'); // the model's script is found by the session's first prompt
  // both files open: tsserver answers from open files even before the project is loaded
  await step('open main.ts', () => openFile(page, 'main.ts'));
  await step('open shapes.ts', () => openFile(page, 'shapes.ts'));
  await palette(page, 'Agent: Run Task…');
  await answerInputBox(page, tasks.codeIntel);
  const approval = await step('approval toast', () => toastWithButton(page, 'rename_symbol', 'Allow', 120_000));
  r.approvalText = (await approval.innerText()).slice(0, 1000);
  // the multi-file diff of the rename, open beside the approval
  await step('the rename\'s multi-file diff', () =>
    waitFor('a "(current ↔ proposed) (2 files)" tab', async () =>
      (await tabLabels(page)).some((l) => l.includes('(current ↔ proposed) (2 files)')), t(30_000)));
  const pane = page.locator('.editor-group-container .editor-container').first();
  await waitFor('both files renamed in the diff', async () => {
    const text = await pane.innerText();
    return text.includes('main.ts') && text.includes('salute');
  }, t(30_000)).catch(() => {});
  r.diffTabs = (await tabLabels(page)).filter((l) => l.includes('proposed'));
  r.diffPaneText = (await pane.innerText()).slice(0, 4000);
  await page.screenshot({ path: path.join(dirs.shots, 'rename-approval.png') });
  await clickToastButton(approval, 'Allow');
  await step('run stopped', () => waitFor('the stop event in the Agent output', () => /■/.test(agentLog(dirs)), t(60_000)));
  await step('both files renamed on disk', () =>
    waitFor('salute in main.ts', () => fs.readFileSync(path.join(dirs.workspace, 'main.ts'), 'utf8').includes('g.salute('), t(30_000)));
  r.shapes = fs.readFileSync(path.join(dirs.workspace, 'shapes.ts'), 'utf8');
  r.main = fs.readFileSync(path.join(dirs.workspace, 'main.ts'), 'utf8');
  r.agentOutput = agentLog(dirs);
  r.diffTabsAfter = (await tabLabels(page)).filter((l) => l.includes('proposed'));
  return r;
}

/** rename_symbol with agentLsp.editPreview on (CONTRACT "Edit review"): the rename of both
 * files opens in VS Code's Refactor Preview (screenshot rename-preview.png), no approval toast,
 * each renamed place ticked; Apply alone, and both files change. */
export async function codeIntelRenamePreview({ page, dirs, tasks }) {
  const r = {};
  await step('the server started', () => waitFor('"server started"', () => serverStarts(dirs) >= 1, t(60_000)));
  await useServer(dirs, tasks.agentServer);
  // greet again, where an earlier scenario (codeIntelTools) renamed it: the files as written
  fs.writeFileSync(path.join(dirs.workspace, 'shapes.ts'), SHAPES_TS);
  fs.writeFileSync(path.join(dirs.workspace, 'main.ts'), MAIN_TS);
  const starts = serverStarts(dirs);
  editMachineSettings(dirs, (m) => { m['agentLsp.editPreview'] = true; });
  await step('server restarted (editPreview)', () => waitFor('a new "server started"', () => serverStarts(dirs) > starts, t(60_000)));
  for (const [file, text] of [['main.ts', "g.greet('a')"], ['shapes.ts', 'greet(name: string)']]) {
    await step(`open ${file}`, () => openFile(page, file));
    await step(`${file} as written`, () => waitFor(`"${text}" in the editor`, async () => (await editorText(page)).includes(text), t(30_000)));
  }
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session');
  await palette(page, 'Agent: Run Task…');
  await answerInputBox(page, tasks.codeIntelPreview);
  const panel = page.locator('.bulk-edit-panel');
  await step('the Refactor Preview opens', () => panel.first().waitFor({ state: 'visible', timeout: t(120_000) }));
  await waitFor('both files in the preview', async () => {
    const text = await panel.first().innerText();
    return text.includes('main.ts') && text.includes('shapes.ts');
  }, t(15_000)).catch(() => {});
  // Decision 80: every renamed place opens ticked (only the confirming no-op entry is not), so
  // Apply alone renames in both files. Rows are read once the places are listed.
  const rows = panel.locator('.monaco-list-row');
  await waitFor('the renamed places listed', async () => (await rows.filter({ hasText: "('you')" }).count()) > 0, t(15_000))
    .catch(() => {});
  r.rowsBefore = await Promise.all((await rows.all()).map(async (row) => ({
    text: (await row.innerText()).replace(/\u00a0/g, ' ').slice(0, 200),
    aria: await row.getAttribute('aria-label'),
    checked: (await row.locator('.edit-checkbox.checked').count()) > 0,
  })));
  await page.screenshot({ path: path.join(dirs.shots, 'rename-preview.png') });
  r.panelText = (await panel.first().innerText()).replace(/\u00a0/g, ' ').slice(0, 3000);
  r.toasts = await page.locator('.notifications-toasts .notification-toast').allInnerTexts();
  await panel.getByRole('button', { name: 'Apply', exact: true }).click();
  await step('run stopped', () => waitFor('the stop event in the Agent output',
    () => /■/.test(agentLog(dirs).slice(before.length)), t(60_000)));
  await step('both files renamed on disk', () =>
    waitFor('salute in main.ts', () => fs.readFileSync(path.join(dirs.workspace, 'main.ts'), 'utf8').includes('g.salute('), t(30_000)));
  r.shapes = fs.readFileSync(path.join(dirs.workspace, 'shapes.ts'), 'utf8');
  r.main = fs.readFileSync(path.join(dirs.workspace, 'main.ts'), 'utf8');
  r.agentOutput = agentLog(dirs).slice(before.length);
  return r;
}
