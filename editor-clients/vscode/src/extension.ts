/** Entry point: wires the server, the commands, the stream, the approvals and the status together. */
import * as vscode from 'vscode';
import { ApprovalView } from './approvals';
import { Chat } from './chat/chat';
import { CHAT_VIEW } from './chat/view';
import { AgentCommands } from './commands';
import { DiffView } from './diffView';
import { TOGGLE_HUNK, TOGGLE_HUNK_AT_CURSOR } from './hunkLens';
import { checkHealth } from './health';
import { registerSetupView, showSetup } from './setup';
import { createLogChannel, describeError, log } from './logger';
import { pickModel, resumeSession } from './pickers';
import { pickProcessToStop, ProcessRegistry } from './processes';
import { ProgressView } from './progress';
import { rewindRun } from './rewind';
import { RunRegistry } from './runs';
import { AgentServer } from './server';
import * as settings from './settings';
import { UsageStatus } from './status';
import { StreamView } from './stream';

let server: AgentServer | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const logChannel = createLogChannel();
  const runs = new RunRegistry();
  const stream = new StreamView();
  const usage = new UsageStatus();
  const processes = new ProcessRegistry();
  const diff = new DiffView();
  const approvals = new ApprovalView(diff);
  const client = () => agentServer.client();
  const chat = new Chat(context.extensionUri, client, runs, (runId, prompt) => stream.runStarted(runId, prompt));
  approvals.chat = chat;
  const commands: AgentCommands = new AgentCommands(client, runs, stream, () => agentServer.restart());
  const progress = new ProgressView(
    runs,
    (runId) => void commands.cancelFromProgress(runId),
    // The chat shows its runs itself: the Agent output comes forward only when it is hidden.
    () => (chat.visible ? undefined : stream.reveal()),
  );
  const agentServer: AgentServer = new AgentServer(
    {
      middleware: {
        ...commands.middleware,
        handleWorkDoneProgress: (token, value, next) => {
          next(token, value);
          progress.handle(token, value);
        },
      },
      approvals,
      onStream: (event) => {
        runs.seen(event.runId, event.runId);
        approvals.onStream(event);
        stream.handle(event);
        chat.onStream(event);
        usage.onStream(event);
        processes.onStream(event);
        if (event.kind === 'stop') {
          const report = event.report;
          log.info(`run ${event.runId} stopped: ${report?.stopReason ?? 'unknown'}`);
          commands.onStopped(runs.stopped(event.runId, report));
          progress.finish(event.runId, report ? `${report.stopReason}: ${report.summary ?? ''}` : undefined);
        }
      },
      onServerGone: () => {
        progress.closeAll();
        approvals.clear();
        chat.clear();
        usage.clear();
        processes.clear();
        runs.clear();
      },
      onServerStarted: () => {
        // Only a model the user chose is worth a check at start-up, and only a problem is said.
        if (settings.explicitModel() !== undefined) {
          void checkHealth(client, runs, true);
        }
      },
    },
    logChannel,
  );
  server = agentServer;
  const guard = (name: string, action: () => Promise<void>) => async () => {
    try {
      await action();
    } catch (err) {
      log.error(`${name} failed`, err);
      void vscode.window.showErrorMessage(`Agent: ${describeError(err)}`);
    }
  };
  const reg = vscode.commands.registerCommand;
  context.subscriptions.push(
    logChannel,
    stream,
    progress,
    usage,
    diff,
    approvals,
    chat,
    vscode.window.registerWebviewViewProvider(CHAT_VIEW, chat.webview, { webviewOptions: { retainContextWhenHidden: true } }),
    agentServer,
    ...commands.register(),
    ...chat.register(),
    reg('agentLsp.client.rewindRun', guard('rewind', () => rewindRun(client, runs, (line) => stream.note(line)))),
    reg('agentLsp.client.resumeSession', guard('resume', () => resumeSession(client, runs))),
    reg('agentLsp.client.pickModel', guard('pick model', () => pickModel(client, runs))),
    reg('agentLsp.client.backgroundProcesses', guard('background processes', () => pickProcessToStop(client, processes))),
    reg('agentLsp.client.checkHealth', guard('health check', () => checkHealth(client, runs, false))),
    registerSetupView(),
    reg('agentLsp.client.showSetup', guard('show setup', async () => { await showSetup(client); })),
    reg(TOGGLE_HUNK, (proposed: string, index: number) => diff.lenses.toggle(proposed, index)),
    reg(TOGGLE_HUNK_AT_CURSOR, () => diff.lenses.toggleAtCursor()),
  );
  // Not awaited: activation must not wait for the server; commands wait for it instead.
  void agentServer.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
}
