/**
 * `Agent: Background Processes`: the runs' background processes still running (the agent's
 * `run_command` with `background: true`), from the `process` stream events; the one picked
 * is stopped with the server's `agentLsp.stopProcess` (CONTRACT "Background processes").
 */
import * as vscode from 'vscode';
import { callServer, GetClient } from './callServer';
import { describeError, log } from './logger';
import { StreamEvent } from './stream';

export interface BackgroundProcess {
  runId: string;
  processId: string;
  command: string;
  state: string;
  exitCode?: number | null;
}

export class ProcessRegistry {
  private readonly processes = new Map<string, BackgroundProcess>();

  /** Keeps `process` events; a run's `stop` ends its processes (the server stopped them). */
  onStream(event: StreamEvent): void {
    if (event.kind === 'process' && typeof event.processId === 'string') {
      this.processes.set(`${event.runId}/${event.processId}`, {
        runId: event.runId,
        processId: event.processId,
        command: typeof event.command === 'string' ? event.command : '',
        state: event.state ?? 'running',
        exitCode: event.exitCode,
      });
    } else if (event.kind === 'stop') {
      for (const entry of this.processes.values()) {
        if (entry.runId === event.runId && entry.state === 'running') {
          entry.state = 'stopped';
        }
      }
    }
  }

  /** Running ones, newest first. */
  running(): BackgroundProcess[] {
    return [...this.processes.values()].filter((p) => p.state === 'running').reverse();
  }

  clear(): void {
    this.processes.clear();
  }
}

export async function pickProcessToStop(getClient: GetClient, registry: ProcessRegistry): Promise<void> {
  const running = registry.running();
  if (running.length === 0) {
    void vscode.window.showInformationMessage('Agent: no background process is running.');
    return;
  }
  const pick = await vscode.window.showQuickPick(
    running.map((p) => ({ label: `$(debug-stop) ${p.processId}`, description: p.command, detail: `run ${p.runId}`, p })),
    { title: 'Agent: Background Processes', placeHolder: 'Pick one to stop it (the run\'s end stops them all)' },
  );
  if (!pick) {
    return;
  }
  const { runId, processId } = pick.p;
  try {
    const stopped = await callServer<boolean>(await getClient(), 'agentLsp.stopProcess', { runId, processId });
    if (stopped === true) {
      void vscode.window.showInformationMessage(`Agent: stopped ${processId} (${pick.p.command}).`);
    } else {
      pick.p.state = 'exited';
      void vscode.window.showInformationMessage(`Agent: ${processId} was no longer running.`);
    }
  } catch (err) {
    log.warn(`agentLsp.stopProcess: ${describeError(err)}`);
    void vscode.window.showErrorMessage(`Agent: stopping ${processId} failed: ${describeError(err)}`);
  }
}
