/** The status bar item with the running run's context fill and cost (`usage` stream events). */
import * as vscode from 'vscode';
import type { StreamEvent } from './stream';

export class UsageStatus implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  /** The latest usage line of each running run; the newest run's is shown. */
  private readonly running = new Map<string, string>();

  constructor() {
    this.item = vscode.window.createStatusBarItem('agentLsp.usage', vscode.StatusBarAlignment.Left, 10);
    this.item.name = 'Agent: context and cost';
    this.item.command = 'agentLsp.client.showOutput';
  }

  onStream(event: StreamEvent): void {
    if (event.kind === 'usage' && (event.agentId ?? 'main') === 'main' && event.text) {
      // Re-inserted so the run that reported last is shown.
      this.running.delete(event.runId);
      this.running.set(event.runId, event.text);
      this.render();
    } else if (event.kind === 'stop') {
      this.finished(event.runId);
    }
  }

  finished(runId: string): void {
    if (this.running.delete(runId)) {
      this.render();
    }
  }

  clear(): void {
    this.running.clear();
    this.render();
  }

  private render(): void {
    const entries = [...this.running.entries()];
    if (entries.length === 0) {
      this.item.hide();
      return;
    }
    const [runId, text] = entries[entries.length - 1];
    const more = entries.length > 1 ? ` (+${entries.length - 1})` : '';
    this.item.text = `$(hubot) ${text}${more}`;
    this.item.tooltip = `Agent run ${runId}: context used / context window · cost so far (of its budget, when it has one). Click for the Agent output.`;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
