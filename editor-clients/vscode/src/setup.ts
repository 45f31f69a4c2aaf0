/**
 * `Agent: Show Setup`: what the server found of the user's setup, and from where
 * (`agentLsp.setup`, what `agent-lsp doctor` prints): permission rules, hooks with their state
 * (active, needs-consent, denied, ignored), skills, commands, agents, memory files, language
 * servers, MCP servers, the keys of Claude Code's files it does not read, and the malformed
 * files with their error. Shown as a read-only Markdown document (nothing to save when it
 * closes); the server starts nothing for it.
 */
import * as vscode from 'vscode';
import { callServer, GetClient } from './callServer';
import { log } from './logger';

type Row = Record<string, unknown>;
export type Setup = Record<string, Row[] | undefined>;

const s = (v: unknown): string => (v === undefined || v === null ? '' : String(v));
const promptFile = (p: Row): string =>
  `${s(p.name)}: ${p.error ? `not used: ${s(p.error)}` : s(p.description) || '-'}  (${s(p.scope)}: ${s(p.path)})`;

const GROUPS: [string, string, (r: Row) => string][] = [
  ['rules', 'Permission rules', (r) =>
    `${s(r.state)} ${s(r.effect)} ${s(r.rule)}  (${s(r.scope)}: ${s(r.source)})${r.why ? ` (${s(r.why)})` : ''}`],
  ['hooks', 'Hooks', (h) =>
    `${s(h.state)} ${s(h.event)}${h.matcher ? ` [${s(h.matcher)}]` : ''}: ${s(h.command)}  (${s(h.scope)}: ${s(h.source)})`],
  ['skills', 'Skills', promptFile],
  ['commands', 'Commands', promptFile],
  ['agents', 'Agents', promptFile],
  ['memoryFiles', 'Memory files', (m) => `${m.present ? 'present' : 'absent'} ${s(m.path)}`],
  ['languageServers', 'Language servers', (l) =>
    `${s(l.state)} ${s(l.name)} (${s(l.source)})${Array.isArray(l.command) && l.command.length ? `: ${l.command.join(' ')}` : ''}`],
  ['mcpServers', 'MCP servers', (m) => `${s(m.state)} ${s(m.name)} (${s(m.source)})${m.error ? `: ${s(m.error)}` : ''}`],
  ['ignored', "Not read from Claude Code's files", (i) => `${s(i.path)}: ${s(i.key)}`],
];

/** The setup as Markdown: the problems first, then each group, one entry a line. */
export function renderSetup(setup: Setup): string {
  const problems = setup.problems ?? [];
  const out = ['# Agent: your setup', ''];
  out.push(problems.length ? '## Problems (these files are not used)' : '## Problems: none');
  for (const p of problems) {
    out.push(`- ${p.path ? `${s(p.path)}: ` : ''}${s(p.error)}`);
  }
  for (const [key, title, line] of GROUPS) {
    const rows = setup[key] ?? [];
    out.push('', rows.length ? `## ${title}` : `## ${title}: none`);
    for (const row of rows) {
      out.push(`- ${line(row)}`);
    }
  }
  return out.join('\n') + '\n';
}

const SCHEME = 'agent-lsp-setup';
const URI = vscode.Uri.from({ scheme: SCHEME, path: '/Agent setup.md' });
let latest = '';
const changed = new vscode.EventEmitter<vscode.Uri>();

/** The read-only document's provider: register it once at activation. */
export function registerSetupView(): vscode.Disposable {
  return vscode.Disposable.from(
    changed,
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, {
      onDidChange: changed.event,
      provideTextDocumentContent: () => latest,
    }),
  );
}

export async function showSetup(getClient: GetClient): Promise<Setup> {
  const setup = await callServer<Setup>(await getClient(), 'agentLsp.setup', {});
  const text = renderSetup(setup);
  log.info(`setup:\n${text}`);
  latest = text;
  changed.fire(URI); // an open view shows the new answer
  const doc = await vscode.workspace.openTextDocument(URI);
  await vscode.window.showTextDocument(doc, { preview: true });
  const problems = setup.problems ?? [];
  if (problems.length) {
    const first = problems[0];
    const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : '';
    void vscode.window.showWarningMessage(`Agent: ${s(first.path)} is not used: ${s(first.error)}${more}`);
  }
  return setup;
}
