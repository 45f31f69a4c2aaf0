/** `Agent: Resume Session…` and `Agent: Pick Model…`: picks from the server's lists. */
import * as vscode from 'vscode';
import { callServer, GetClient } from './callServer';
import { RunRegistry } from './runs';

interface SessionItem {
  sessionId: string;
  title: string;
  created: string;
  updated: string;
  runs: number;
  lastStop: string | null;
  editedFiles: string[];
}

export interface ModelList {
  current: string;
  models: string[];
  error?: string;
}

export async function resumeSession(getClient: GetClient, runs: RunRegistry): Promise<void> {
  const client = await getClient();
  const sessions = await callServer<SessionItem[]>(client, 'agentLsp.sessions', {});
  if (!Array.isArray(sessions) || sessions.length === 0) {
    void vscode.window.showInformationMessage('Agent: this workspace has no past sessions yet.');
    return;
  }
  const pick = await vscode.window.showQuickPick(
    sessions.map((s) => ({
      label: s.title || s.sessionId,
      description: [
        when(s.updated),
        `${s.runs} run${s.runs === 1 ? '' : 's'}`,
        s.lastStop ?? 'running',
        s.sessionId === runs.session ? 'current' : '',
      ]
        .filter(Boolean)
        .join(' · '),
      detail:
        s.editedFiles.length > 0
          ? `edited: ${s.editedFiles.map((u) => vscode.workspace.asRelativePath(client.protocol2CodeConverter.asUri(u))).join(', ')}`
          : undefined,
      session: s,
    })),
    { title: 'Agent: Resume Session', placeHolder: 'The next runs continue the session you pick', matchOnDescription: true },
  );
  if (!pick) {
    return;
  }
  runs.resume(pick.session.sessionId);
  void vscode.window.showInformationMessage(`Agent: the next run continues "${pick.label}".`);
}

export async function pickModel(getClient: GetClient, runs: RunRegistry): Promise<void> {
  const list = await callServer<ModelList>(await getClient(), 'agentLsp.models', {});
  if (list.error && list.models.length === 0) {
    void vscode.window.showErrorMessage(`Agent: cannot list the endpoint's models: ${list.error}`);
    return;
  }
  const inUse = runs.model ?? list.current;
  const items: (vscode.QuickPickItem & { model?: string })[] = list.models.map((id) => ({
    label: id,
    description: [id === list.current ? 'the setting' : '', id === inUse ? 'in use' : ''].filter(Boolean).join(' · '),
    model: id,
  }));
  if (runs.model) {
    items.unshift({ label: `Back to the setting (${list.current})`, description: 'agentLsp.model' });
  }
  const pick = await vscode.window.showQuickPick(items, {
    title: `Agent: Pick Model${list.error ? ` (warning: ${list.error})` : ''}`,
    placeHolder: `The next runs use the model you pick (now: ${inUse})`,
  });
  if (!pick) {
    return;
  }
  runs.model = pick.model;
  void vscode.window.showInformationMessage(`Agent: the next runs use ${pick.model ?? list.current}.`);
}

function when(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}
