/**
 * `Agent: Rewind Run…`: pick one of this window's runs that changed files and put those
 * files back as they were before it (CONTRACT "Rewind"); conflicts can be forced.
 */
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { callServer, GetClient } from './callServer';
import { log } from './logger';
import { RunInfo, RunRegistry } from './runs';

interface RewindResult {
  rewindId: string;
  restored: string[];
  conflicts: { uri: string; reason: string }[];
  notRestorable: { uri: string; reason: string }[];
}

const FORCE = 'Rewind anyway (force)';

export async function rewindRun(getClient: GetClient, runs: RunRegistry, note: (line: string) => void): Promise<void> {
  const candidates = runs.withChanges();
  if (candidates.length === 0) {
    void vscode.window.showInformationMessage(
      'Agent: no run of this window changed files yet (the "Agent: rewind last run" code action also covers earlier ones).',
    );
    return;
  }
  const client = await getClient();
  const pick = await vscode.window.showQuickPick(
    candidates.map((run) => ({
      label: run.title,
      description: `${run.runId} · ${run.stopReason ?? 'stopped'}${run.rewindable ? '' : ' · nothing restorable'}`,
      detail: run.editedFiles.map((uri) => relative(client, uri)).join(', '),
      run,
    })),
    { title: 'Agent: Rewind Run', placeHolder: 'Which run? Its files go back to how they were before it.', matchOnDetail: true },
  );
  if (!pick) {
    return;
  }
  await rewind(client, runs, pick.run, false, note);
}

async function rewind(client: LanguageClient, runs: RunRegistry, run: RunInfo, force: boolean, note: (line: string) => void): Promise<void> {
  const result = await callServer<RewindResult>(client, 'agentLsp.rewind', { runId: run.runId, force });
  log.info(`rewind of ${run.runId}${force ? ' (forced)' : ''}: ${JSON.stringify(result)}`);
  if (result.restored.length > 0) {
    runs.rewound(result.rewindId, run, result.restored);
  }
  const restored = result.restored.map((uri) => relative(client, uri));
  const lines = [
    restored.length > 0 ? `restored ${restored.join(', ')}` : 'restored nothing',
    ...result.notRestorable.map((c) => `not restorable: ${relative(client, c.uri)} (${c.reason})`),
  ];
  note(`↺ rewind ${result.rewindId} of run ${run.runId}${force ? ' (forced)' : ''}: ${lines.join('; ')}` +
    result.conflicts.map((c) => `; changed since, left alone: ${relative(client, c.uri)} (${c.reason})`).join(''));
  if (result.conflicts.length > 0) {
    const conflicts = result.conflicts.map((c) => `${relative(client, c.uri)} (${c.reason})`).join('; ');
    const choice = await vscode.window.showWarningMessage(
      `Agent: rewind of "${run.title}": ${lines.join('; ')}. Changed since the run, left alone: ${conflicts}.`,
      FORCE,
    );
    if (choice === FORCE) {
      await rewind(client, runs, run, true, note);
    }
    return;
  }
  const show = result.notRestorable.length > 0 ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
  void show(`Agent: rewind of "${run.title}": ${lines.join('; ')}.`);
}

function relative(client: LanguageClient, uri: string): string {
  return vscode.workspace.asRelativePath(client.protocol2CodeConverter.asUri(uri));
}
