/** Entry point: wires the server, the commands, the stream and the progress together. */
import * as vscode from 'vscode';
import { AgentCommands } from './commands';
import { createLogChannel } from './logger';
import { ProgressView } from './progress';
import { RunRegistry } from './runs';
import { AgentServer } from './server';
import { StreamView } from './stream';

let server: AgentServer | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const logChannel = createLogChannel();
  const runs = new RunRegistry();
  const stream = new StreamView();
  const commands: AgentCommands = new AgentCommands(
    () => agentServer.client(),
    runs,
    stream,
    () => agentServer.restart(),
  );
  const progress = new ProgressView(
    runs,
    (runId) => void commands.cancelFromProgress(runId),
    () => stream.reveal(),
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
      onStream: (event) => {
        stream.handle(event);
        if (event.kind === 'stop') {
          const report = event.report;
          progress.finish(event.runId, report ? `${report.stopReason}: ${report.summary ?? ''}` : undefined);
        }
      },
      onServerGone: () => {
        progress.closeAll();
        runs.clear();
      },
    },
    logChannel,
  );
  server = agentServer;
  context.subscriptions.push(logChannel, stream, progress, agentServer, ...commands.register());
  // Not awaited: activation must not wait for the server; commands wait for it instead.
  void agentServer.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
}
