/** The extension's own log: one LogOutputChannel shared with the language client. */
import * as vscode from 'vscode';

let channel: vscode.LogOutputChannel | undefined;

export function createLogChannel(): vscode.LogOutputChannel {
  channel ??= vscode.window.createOutputChannel('agent-lsp', { log: true });
  return channel;
}

export const log = {
  info(message: string): void {
    channel?.info(message);
  },
  warn(message: string): void {
    channel?.warn(message);
  },
  error(message: string, err?: unknown): void {
    channel?.error(err === undefined ? message : `${message}: ${describeError(err)}`);
  },
};

export function describeError(err: unknown): string {
  if (err instanceof Error) {
    return err.message;
  }
  if (typeof err === 'object' && err !== null && 'message' in err) {
    return String((err as { message: unknown }).message);
  }
  return String(err);
}
