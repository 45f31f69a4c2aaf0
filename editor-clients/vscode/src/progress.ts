/**
 * Shows each run's work-done progress as a notification with a Cancel button: the language
 * client's own progress sits in the status bar, where VS Code offers no cancel.
 */
import * as vscode from 'vscode';
import type {
  ProgressToken,
  WorkDoneProgressBegin,
  WorkDoneProgressEnd,
  WorkDoneProgressReport,
} from 'vscode-languageclient/node';
import { RunRegistry, shortTitle } from './runs';

type ProgressValue = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

interface OpenProgress {
  report: (message: string) => void;
  close: () => void;
}

export class ProgressView implements vscode.Disposable {
  private readonly open = new Map<string, OpenProgress>();
  /** Runs whose notification closed: a late `begin` must not reopen it. */
  private readonly closed = new Set<string>();

  constructor(
    private readonly runs: RunRegistry,
    private readonly cancel: (runId: string) => void,
    private readonly onBegin: (runId: string) => void,
  ) {}

  /** The language client's `handleWorkDoneProgress` middleware. */
  handle(token: ProgressToken, value: ProgressValue): void {
    const runId = String(token);
    switch (value.kind) {
      case 'begin':
        this.begin(runId, value);
        break;
      case 'report':
        if (value.message) {
          this.open.get(runId)?.report(value.message);
        }
        break;
      case 'end':
        this.finish(runId, value.message);
        break;
    }
  }

  /** The run stopped (stream `stop` event or progress `end`): close its notification. */
  finish(runId: string, message?: string): void {
    this.runs.finished(runId);
    this.closed.add(runId);
    const progress = this.open.get(runId);
    if (progress) {
      this.open.delete(runId);
      progress.close();
      if (message) {
        vscode.window.setStatusBarMessage(`Agent: ${shortTitle(message, 100)}`, 15000);
      }
    }
  }

  private begin(runId: string, value: WorkDoneProgressBegin): void {
    if (this.open.has(runId) || this.closed.has(runId) || this.runs.isFinished(runId)) {
      return;
    }
    const title = shortTitle(value.title || 'Agent run');
    this.runs.seen(runId, title);
    this.onBegin(runId);
    let current: vscode.Progress<{ message?: string }> | undefined;
    let pending = value.message;
    let close!: () => void;
    const done = new Promise<void>((resolve) => (close = resolve));
    this.open.set(runId, {
      report: (message) => (current ? current.report({ message }) : (pending = message)),
      close,
    });
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        // The server's titles usually name us already ("Agent: <task>").
        title: /^agent\b/i.test(title) ? title : `Agent: ${title}`,
        cancellable: value.cancellable !== false,
      },
      (progress, token) => {
        current = progress;
        if (pending) {
          progress.report({ message: pending });
        }
        token.onCancellationRequested(() => {
          if (!this.closed.has(runId)) {
            this.cancel(runId);
          }
        });
        return done;
      },
    );
  }

  /** The server went away: its runs will never report again. */
  closeAll(): void {
    for (const runId of [...this.open.keys()]) {
      this.finish(runId);
    }
  }

  dispose(): void {
    this.closeAll();
  }
}
