// The debugger through VS Code (CONTRACT "The debugger (turn 4)", Source 1): the agent's
// debug_start runs in VS Code's own JavaScript debugger (js-debug, shipped with code-server),
// so the Run and Debug view shows the session. Played only when named in AGENT_LSP_SCENARIOS
// (test_vscode_code_intel.py, in the code-intel window).
import fs from 'node:fs';
import path from 'node:path';
import { outputChannelLog, step, t, waitFor } from './harness.mjs';
import { useServer } from './scenarios-codeintel.mjs';
import { answerInputBox, clickToastButton, palette, plain, toastWithButton } from './workbench.mjs';

export const AVG_JS = [
  'function average(values) {',
  '  let total = 0;',
  '  for (const v of values) {',
  '    total += v;',
  '  }',
  '  const count = values.length - 1;',
  '  return total / count;',
  '}',
  "console.log('average', average([4, 6, 8]));",
  '',
].join('\n');

/** Processes running avg.js (the program the agent debugs). */
function debuggees() {
  return fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      return fs.readFileSync(`/proc/${p}/cmdline`, 'latin1').split('\0').some((a) => a.endsWith('avg.js'));
    } catch {
      return false;
    }
  });
}

export const CRASH_JS = [
  'const items = [1, 2, 3];',
  'function last(xs) {',
  '  return xs[xs.length].toFixed(2);',
  '}',
  'console.log(last(items));',
  '',
].join('\n');

const agentLog = (dirs) => outputChannelLog(dirs, 'Agent');
const toolbar = (page) => page.locator('.debug-toolbar');

/** Run Task: debug_start (allowed) stops at the breakpoint in VS Code's debugger; while the
 * debug_eval approval waits, the debug view shows the paused session; the run's end leaves no
 * debug session. */
export async function debugInVsCode({ page, dirs, tasks }) {
  const r = {};
  await useServer(dirs, tasks.agentServer);
  fs.writeFileSync(path.join(dirs.workspace, 'avg.js'), AVG_JS);
  fs.writeFileSync(path.join(dirs.workspace, 'crash.js'), CRASH_JS);
  fs.writeFileSync(path.join(dirs.workspace, 'spin.js'), 'let n = 0;\nwhile (true) {\n  n += 1;\n}\n');
  const before = agentLog(dirs);
  await palette(page, 'Agent: New Session'); // the model's script is found by the session's first prompt
  await palette(page, 'Agent: Run Task…');
  await answerInputBox(page, tasks.debug);
  const start = await step('debug_start approval', () => toastWithButton(page, 'debug_start', 'Allow', 120_000));
  r.startApproval = plain(await start.innerText()).slice(0, 1000);
  await clickToastButton(start, 'Allow');
  const evalApproval = await step('debug_eval approval', () => toastWithButton(page, 'debug_eval', 'Allow', 120_000));
  // The program is paused at the breakpoint now: VS Code shows it.
  await step('the debug toolbar', () => toolbar(page).first().waitFor({ state: 'visible', timeout: t(30_000) }));
  const callStack = page.locator('.debug-call-stack, .pane:has(.title:text-is("Call Stack"))').first();
  await step('CALL STACK says paused', () =>
    waitFor('"Paused on breakpoint" in the call stack', async () =>
      /Paused on breakpoint/i.test(plain(await callStack.innerText().catch(() => ''))), t(30_000)));
  r.callStack = plain(await callStack.innerText()).slice(0, 2000);
  r.debugViewText = plain(await page.locator('.sidebar').first().innerText().catch(() => '')).slice(0, 3000);
  await page.screenshot({ path: path.join(dirs.shots, 'debug-paused.png') });
  await clickToastButton(evalApproval, 'Allow');
  // next, continue to the end, crash.js, calc.py, spin.js (each asked), then avg.js again (asked): paused at the run's end
  const crash = await step('crash.js debug_start approval', () => toastWithButton(page, 'crash.js', 'Allow', 120_000));
  await clickToastButton(crash, 'Allow');
  // calc.py: code-server has no Python Debugger extension, so VS Code says so
  const py = await step('calc.py debug_start approval', () => toastWithButton(page, 'calc.py', 'Allow', 120_000));
  await clickToastButton(py, 'Allow');
  // spin.js never stops by itself: paused at the request's timeout
  const spin = await step('spin.js debug_start approval', () => toastWithButton(page, 'spin.js', 'Allow', 120_000));
  await clickToastButton(spin, 'Allow');
  const again = await step('second avg.js debug_start approval', () => toastWithButton(page, 'debug_start', 'Allow', 120_000));
  await clickToastButton(again, 'Allow');
  await step('run stopped', () => waitFor('the stop event in the Agent output',
    () => /■/.test(agentLog(dirs).slice(before.length)), t(120_000)));
  await step('no debug session left', () => waitFor('the debug toolbar to go', async () =>
    !(await toolbar(page).first().isVisible().catch(() => false)), t(30_000)));
  r.toolbarAfter = await toolbar(page).first().isVisible().catch(() => false);
  await waitFor('the debugged node process to end', () => debuggees().length === 0, t(30_000)).catch(() => {});
  r.debuggeesAfter = debuggees();
  r.agentOutput = agentLog(dirs).slice(before.length);
  return r;
}
