/**
 * Approvals answered in the chat view (CONTRACT Decision 79): the buttons the extension draws
 * for a request the server is waiting on, and the only answers it accepts (a key it made for
 * that request and one of the request's own titles).
 */
import * as crypto from 'node:crypto';
import type * as vscode from 'vscode';
import type { HunkReview } from '../hunkLens';
import { log } from '../logger';
import { reviewOf, type Conversation } from './conversation';

/** The parts of an approval request the chat needs (see ../approvals.ts). */
export interface ChatApprovalRequest {
  runId: string;
  callId: string;
  message: string;
  titles: string[];
  showDiff?: () => void;
  /** An edit's hunks, each kept or rejected before Allow (shared with the diff editor). */
  review?: HunkReview;
}

export interface ChatAnswer {
  title: string;
  reason?: string;
}

interface Waiting {
  request: ChatApprovalRequest;
  resolve: (answer: ChatAnswer | undefined) => void;
}

export class ChatApprovals {
  private readonly waiting = new Map<string, Waiting>();

  constructor(private readonly conversation: Conversation) {}

  /** Asks in the view; undefined when the request was withdrawn. */
  ask(request: ChatApprovalRequest, token: vscode.CancellationToken): Promise<ChatAnswer | undefined> {
    const key = crypto.randomBytes(16).toString('hex'); // the webview cannot guess another's
    this.conversation.askApproval(request.runId, request.callId, request.message, request.titles, key, !!request.showDiff);
    this.hunksChanged(request);
    // a hunk toggled in the diff editor shows in the view too
    const fromDiff = request.review?.onDidChange(() => this.hunksChanged(request));
    return new Promise((resolve) => {
      const done = (answer: ChatAnswer | undefined, state: string) => {
        sub.dispose();
        fromDiff?.dispose();
        this.waiting.delete(key);
        this.conversation.approvalSettled(request.runId, request.callId, state);
        resolve(answer);
      };
      const sub = token.onCancellationRequested(() => done(undefined, 'withdrawn'));
      this.waiting.set(key, { request, resolve: (a) => done(a, a ? 'answered' : 'withdrawn') });
    });
  }

  /** Only a button this extension drew for a waiting request answers it. */
  answer(key: string, title: string, reason: string | undefined): void {
    const waiting = this.waiting.get(key);
    if (!waiting || !waiting.request.titles.includes(title)) {
      log.warn('chat: an answer for no waiting approval was ignored');
      return;
    }
    waiting.resolve({ title, reason: title === 'Deny' && reason?.trim() ? reason.trim() : undefined });
  }

  /** Only a toggle this extension drew for a waiting request's offered hunk toggles it. */
  toggleHunk(key: string, index: number): void {
    const request = this.waiting.get(key)?.request;
    if (!request?.review || !Number.isInteger(index)) {
      log.warn('chat: a hunk toggle for no waiting approval was ignored');
      return;
    }
    request.review.toggle(index);
    this.hunksChanged(request);
  }

  private hunksChanged(request: ChatApprovalRequest): void {
    if (request.review) {
      this.conversation.hunksChanged(request.runId, request.callId, reviewOf(request.review));
    }
  }

  showDiff(key: string): void {
    this.waiting.get(key)?.request.showDiff?.();
  }

  /** The server went away: nothing waits any more. */
  withdrawAll(): void {
    for (const w of [...this.waiting.values()]) {
      w.resolve(undefined);
    }
  }
}
