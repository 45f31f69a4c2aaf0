// Code intelligence through VS Code (CONTRACT "Code intelligence", Source 1): the built-in
// TypeScript language features answer agentLsp/codeIntel. Played only when named in
// AGENT_LSP_SCENARIOS (test_vscode_code_intel.py).
import fs from 'node:fs';
import { env, step, t, waitFor } from './harness.mjs';
import { openFile } from './workbench.mjs';

/** agent-lsp's probe server asks its plan once the first file is open; the answers land in
 * AGENT_LSP_PROBE_OUT. */
export async function codeIntelProbe({ page }) {
  await step('open shapes.ts', () => openFile(page, 'shapes.ts'));
  const out = env.AGENT_LSP_PROBE_OUT;
  await step('the probe got its answers', () =>
    waitFor('the probe\'s answers', () => fs.existsSync(out), t(180_000), 500));
  return { answers: JSON.parse(fs.readFileSync(out, 'utf8')) };
}
