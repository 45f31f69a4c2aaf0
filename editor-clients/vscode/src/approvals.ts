/**
 * Answers the server's approval requests (`window/showMessageRequest`): for an edit, the diff
 * opens first (matched to the request by the action items' runId + callId, CONTRACT
 * Decision 13), and after Deny the user may type a reason that goes back with the answer.
 */
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { DiffView, type HunkChoice } from './diffView';
import { keptHunks, type HunkInfo, type HunkLenses, type HunkReview } from './hunkLens';
import { describeError, log } from './logger';
import type { StreamEvent } from './stream';
import type { ChatApprovalRequest } from './chat/approvals';

export const SHOW_MESSAGE_REQUEST = 'window/showMessageRequest';

/** The notification's extra button while the chat view is hidden (Decision 79). */
const OPEN_CHAT = 'Open chat';

/** The chat view's side of an approval (src/chat/chat.ts). */
export interface ApprovalChat {
  readonly visible: boolean;
  reveal(): Promise<void>;
  ask(request: ChatApprovalRequest, token: vscode.CancellationToken): Promise<{ title: string; reason?: string } | undefined>;
}

interface ActionItem {
  title: string;
  runId?: string;
  callId?: string;
  [extra: string]: unknown;
}

interface MessageRequestParams {
  type: number;
  message: string;
  actions?: ActionItem[];
}

export class ApprovalView implements vscode.Disposable {
  /** `pending` approval events of edit tools, by runId + callId, until their request comes. */
  private readonly proposed = new Map<string, StreamEvent>();

  /** The chat view: while it is visible, approvals are answered in it (Decision 79). */
  chat: ApprovalChat | undefined;

  constructor(private readonly diff: DiffView) {}

  /** Every `agentLsp/stream` event: keeps the edits that wait for an answer. */
  onStream(event: StreamEvent): void {
    if (event.kind !== 'approval' || !event.callId) {
      return;
    }
    const key = keyOf(event.runId, event.callId);
    if (event.state === 'pending' && ((event.uri && typeof event.newText === 'string') || event.files?.length)) {
      this.proposed.set(key, event);
    } else if (event.state !== 'pending') {
      this.proposed.delete(key);
    }
  }

  /** The `window/showMessageRequest` handler (replaces the language client's stock one). */
  async handle(client: LanguageClient, params: MessageRequestParams, token: vscode.CancellationToken): Promise<ActionItem | null> {
    const actions = params.actions ?? [];
    const ref = actions.find((a) => typeof a.runId === 'string' && typeof a.callId === 'string');
    const edit = ref ? this.proposed.get(keyOf(ref.runId!, ref.callId!)) : undefined;
    let closeDiff: (() => Promise<void>) | undefined;
    const choice = edit ? hunkChoice(client, edit) : undefined;
    const review = edit && choice ? hunkReview(client, edit, choice, this.diff.lenses) : undefined;
    const openDiff = async () => {
      await closeDiff?.(); // "Show diff" again: one diff tab, not two
      // one file: its text beside the proposed one; several (a rename): each file's diff (every
      // edit approval lists its files with their hunks, so the single file goes first)
      if (edit?.uri && typeof edit.newText === 'string') {
        closeDiff = await this.diff.show(
          { uri: client.protocol2CodeConverter.asUri(edit.uri), tool: edit.tool ?? 'edit', newText: edit.newText },
          choice,
        );
      } else if (edit?.files?.length) {
        closeDiff = await this.diff.showMany(
          edit.tool ?? 'edit',
          edit.files.map((f) => ({ uri: client.protocol2CodeConverter.asUri(f.uri), diff: f.diff })),
          choice,
        );
      }
    };
    await openDiff();
    // Allow with hunks rejected in the diff editor: answered by agentLsp.approve {hunks}, which
    // withdraws this request (null)
    const withHunks = async (chosen: ActionItem | null): Promise<ActionItem | null> => {
      const kept = ref && choice && chosen?.title === 'Allow' ? keptHunks(edit?.files, choice.rejected) : undefined;
      if (!kept) {
        return chosen;
      }
      await client.sendRequest('workspace/executeCommand', {
        command: 'agentLsp.approve',
        arguments: [{ runId: ref!.runId, callId: ref!.callId, decision: 'allow', hunks: kept }],
      });
      return null;
    };
    try {
      if (ref && this.chat?.visible) {
        return await withHunks(await this.askInChat(ref, params.message, actions, token, edit ? openDiff : undefined, review));
      }
      const show =
        params.type === 1
          ? vscode.window.showErrorMessage
          : params.type === 2
            ? vscode.window.showWarningMessage
            : vscode.window.showInformationMessage;
      const hunksNote = choice ? '; its title action rejects single hunks before Allow' : '';
      const message = closeDiff
        ? `${firstLine(params.message)} (the diff is open in the editor${hunksNote})${alwaysNote(params.message)}`
        : params.message;
      // A withdrawn request (the run was cancelled or timed out) cannot close the toast, but
      // our answer no longer matters then: stop waiting for it.
      const offered = ref && this.chat ? [...actions, { title: OPEN_CHAT }] : actions;
      const chosen = await raceCancel(Promise.resolve(show<ActionItem>(message, ...offered)), token);
      if (chosen === undefined) {
        return null;
      }
      if (ref && this.chat && chosen.title === OPEN_CHAT) {
        await this.chat.reveal();
        return await withHunks(await this.askInChat(ref, params.message, actions, token, edit ? openDiff : undefined, review));
      }
      if (chosen.title === 'Allow') {
        return await withHunks(chosen);
      }
      if (ref && chosen.title === 'Deny') {
        const reason = await vscode.window.showInputBox(
          {
            title: 'Agent: why not? (optional)',
            prompt: 'A reason the agent is told with the denial (Enter to skip, Escape for none)',
            placeHolder: 'e.g. keep the old behaviour, fix the caller instead',
            ignoreFocusOut: true,
          },
          token,
        );
        return reason?.trim() ? { ...chosen, reason: reason.trim() } : chosen;
      }
      return chosen;
    } catch (err) {
      log.warn(`approval request: ${describeError(err)}`);
      return null;
    } finally {
      if (ref) {
        this.proposed.delete(keyOf(ref.runId!, ref.callId!));
      }
      await closeDiff?.();
    }
  }

  /** Asked in the chat view with the server's own action items; only one of them answers. */
  private async askInChat(
    ref: ActionItem,
    message: string,
    actions: ActionItem[],
    token: vscode.CancellationToken,
    showDiff: (() => Promise<void>) | undefined,
    review: HunkReview | undefined,
  ): Promise<ActionItem | null> {
    const answer = await this.chat!.ask(
      {
        runId: ref.runId!,
        callId: ref.callId!,
        message,
        titles: actions.map((a) => a.title),
        showDiff: showDiff ? () => void showDiff() : undefined,
        review,
      },
      token,
    );
    const chosen = answer && actions.find((a) => a.title === answer.title);
    if (!chosen) {
      return null;
    }
    return answer.reason ? { ...chosen, reason: answer.reason } : chosen;
  }

  /** The server went away: nothing waits any more. */
  clear(): void {
    this.proposed.clear();
  }

  dispose(): void {
    this.clear();
  }
}

/** The hunks the approval offers, by file (none when its diff was cut). */
function hunkChoice(client: LanguageClient, edit: StreamEvent): HunkChoice | undefined {
  const files = new Map<string, HunkInfo[]>();
  let total = 0;
  for (const file of edit.files ?? []) {
    if (file.hunks?.length) {
      files.set(client.protocol2CodeConverter.asUri(file.uri).toString(), file.hunks);
      total += file.hunks.length;
    }
  }
  return total > 0 ? { files, total, rejected: new Set<number>() } : undefined;
}

/** The chat view's side of the hunk choice: the same `rejected` set as the diff editor's
 * lenses, so a hunk rejected in either place is rejected (only offered hunks toggle). */
function hunkReview(client: LanguageClient, edit: StreamEvent, choice: HunkChoice, lenses: HunkLenses): HunkReview {
  const offered = new Set([...choice.files.values()].flat().map((h) => h.index));
  return {
    files: (edit.files ?? [])
      .filter((f) => f.hunks?.length)
      .map((f) => ({
        name: vscode.workspace.asRelativePath(client.protocol2CodeConverter.asUri(f.uri)),
        diff: f.diff,
        hunks: f.hunks ?? [],
      })),
    total: choice.total,
    rejected: choice.rejected,
    toggle: (index) => {
      if (offered.has(index)) {
        if (!choice.rejected.delete(index)) {
          choice.rejected.add(index);
        }
        lenses.refresh();
      }
    },
    onDidChange: (listener) => lenses.onDidToggle((set) => set === choice.rejected && listener()),
  };
}

function keyOf(runId: string, callId: string): string {
  return `${runId}\u0000${callId}`;
}

function firstLine(text: string): string {
  const [head, ...rest] = text.split('\n');
  // Notifications show one paragraph: keep the command or path, drop the diff summary.
  return rest.length > 0 ? `${head} ${rest[0]}` : head;
}

/** The server's line naming the rule "Always allow" would save (Decision 27), kept when the
 * message is shortened: what is saved must be seen before it is chosen. */
function alwaysNote(text: string): string {
  const line = text.split('\n').find((l) => l.startsWith('(Always allow saves the rule '));
  return line ? ` ${line}` : '';
}

function raceCancel<T>(promise: Promise<T>, token: vscode.CancellationToken): Promise<T | undefined> {
  if (token.isCancellationRequested) {
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const sub = token.onCancellationRequested(() => {
      sub.dispose();
      resolve(undefined);
    });
    promise.then(
      (v) => {
        sub.dispose();
        resolve(v);
      },
      (e) => {
        sub.dispose();
        reject(e);
      },
    );
  });
}
