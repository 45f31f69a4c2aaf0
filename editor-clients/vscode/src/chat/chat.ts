/**
 * The chat: one session's conversation with the agent (CONTRACT "Conversation (turn 4)",
 * Decisions 56, 74, 79). Idle, a message is a follow-up run in the same session; while a run
 * runs it steers it (or, with Queue ticked, queues the next run); Stop cancels the queued runs
 * newest first, then the running one. Approvals of the chat's runs are answered in it while it
 * is visible.
 */
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { callServer, GetClient } from '../callServer';
import { describeError, log } from '../logger';
import { RunRegistry, RunStarted, shortTitle } from '../runs';
import * as settings from '../settings';
import type { StreamEvent } from '../stream';
import { ChatAnswer, ChatApprovalRequest, ChatApprovals } from './approvals';
import { Attachments } from './attachments';
import { Conversation } from './conversation';
import { ChatWebview, FromWebview } from './view';

interface Queued {
  runId: string;
  text: string;
}

/** Events of runs not known to be the chat's are kept this long (`agentLsp.run` may answer
 * after its run's first events), without the whole new text of an edit. */
const EARLY_EVENTS = 400;

export class Chat implements vscode.Disposable {
  readonly webview: ChatWebview;
  private readonly conversation: Conversation;
  readonly attachments: Attachments;
  private sessionId: string | undefined;
  private title = 'New session';
  private running: string | undefined;
  private readonly queued: Queued[] = [];
  /** The runs of this chat (started here or rendered from a session's history). */
  private readonly mine = new Set<string>();
  /** Events of runs not (yet) known to be the chat's: `agentLsp.run` may answer after them. */
  private early: StreamEvent[] = [];
  private readonly approvals: ChatApprovals;
  private meter = '';
  private status = '';

  constructor(
    extensionUri: vscode.Uri,
    private readonly client: GetClient,
    private readonly runs: RunRegistry,
    private readonly onRunStarted: (runId: string, prompt: string) => void,
  ) {
    this.webview = new ChatWebview(extensionUri, (m) => void this.guard(() => this.onMessage(m)), () => this.redraw());
    this.conversation = new Conversation((item) => this.webview.changed(item), settings.editPreview);
    this.attachments = new Attachments(client, () => this.postState());
    this.approvals = new ChatApprovals(this.conversation);
  }

  get visible(): boolean {
    return this.webview.visible;
  }

  async reveal(): Promise<void> {
    await this.webview.reveal();
  }

  register(): vscode.Disposable[] {
    const reg = vscode.commands.registerCommand;
    return [
      reg('agentLsp.client.openChat', async () => {
        await this.webview.reveal();
        void this.webview.post({ type: 'focus' });
      }),
      reg('agentLsp.client.addSelectionToChat', async () => {
        if (this.attachments.addSelection(vscode.window.activeTextEditor)) {
          await this.webview.reveal();
          void this.webview.post({ type: 'focus' });
        }
      }),
    ];
  }

  /** Every `agentLsp/stream` event of the server. */
  onStream(event: StreamEvent): void {
    if (!this.mine.has(event.runId)) {
      this.early.push(event.newText === undefined ? event : { ...event, newText: undefined });
      if (this.early.length > EARLY_EVENTS) {
        this.early = this.early.slice(-EARLY_EVENTS / 2);
      }
      return;
    }
    this.apply(event);
  }

  private apply(event: StreamEvent): void {
    const queued = this.queued.findIndex((q) => q.runId === event.runId);
    if (queued >= 0) {
      const [run] = this.queued.splice(queued, 1);
      if (event.kind === 'stop') {
        this.postState();
        return; // removed before it started: it never entered the session
      }
      this.conversation.userPrompt(run.runId, run.text);
      this.running = run.runId;
    }
    if (event.kind === 'usage') {
      this.updateMeter(event);
      return;
    }
    if (event.kind === 'status') {
      this.status = (event.text ?? event.state ?? '').trim();
      this.postState();
      return;
    }
    this.conversation.handle(event);
    if (event.kind === 'stop' && event.runId === this.running) {
      this.running = undefined;
      this.status = '';
      this.webview.flush();
      this.postState();
    }
  }

  private adopt(runId: string): void {
    this.mine.add(runId);
    const mine = this.early.filter((e) => e.runId === runId);
    this.early = this.early.filter((e) => e.runId !== runId);
    for (const event of mine) {
      this.apply(event);
    }
  }

  /** The whole view again: a new webview, or another session. */
  private redraw(): void {
    this.webview.reset(this.conversation.items.values());
    this.postState();
  }

  private postState(): void {
    void this.webview.post({
      type: 'state',
      running: this.running !== undefined,
      session: this.title,
      meter: this.meter,
      status: this.status,
      queued: this.queued.map((q) => ({ runId: q.runId, text: q.text })),
      attachments: this.attachments.labels(),
    });
  }

  private updateMeter(event: StreamEvent): void {
    const parts: string[] = [];
    if (event.contextWindow) {
      parts.push(`ctx ${Math.round((event.contextTokens ?? 0) / 1000)}k/${Math.round(event.contextWindow / 1000)}k`);
    }
    if (typeof event.costUsd === 'number') {
      parts.push(`$${event.costUsd < 1 ? event.costUsd.toFixed(3) : event.costUsd.toFixed(2)}`);
    }
    this.meter = parts.join(' · ');
    this.postState();
  }

  private async onMessage(m: FromWebview): Promise<void> {
    switch (m.type) {
      case 'send':
        await this.send(String(m.text ?? ''), m.queue === true);
        return;
      case 'stop':
        await this.stop();
        return;
      case 'approve':
        this.approvals.answer(String(m.key ?? ''), String(m.title ?? ''), typeof m.reason === 'string' ? m.reason : undefined);
        return;
      case 'showDiff':
        this.approvals.showDiff(String(m.key ?? ''));
        return;
      case 'toggleHunk':
        this.approvals.toggleHunk(String(m.key ?? ''), Number(m.index));
        return;
      case 'removeQueued':
        await this.removeQueued(String(m.runId ?? ''));
        return;
      case 'fork':
        await this.fork(String(m.runId ?? ''));
        return;
      case 'rewind':
        await this.rewindTo(String(m.runId ?? ''));
        return;
      case 'sessions':
        await this.pickSession();
        return;
      case 'copy':
        await vscode.env.clipboard.writeText(String(m.text ?? ''));
        return;
      case 'openLink':
        await openLink(String(m.href ?? ''));
        return;
      case 'focusEditor':
        await vscode.commands.executeCommand('workbench.action.focusActiveEditorGroup');
        return;
      default:
        await this.attachments.onMessage(m);
    }
  }

  /** Enter in the input: a follow-up, a steer, or (Queue ticked) a queued run. A message the
   * server refused goes back into the input with its attachments: nothing typed is lost. */
  async send(text: string, queue: boolean): Promise<void> {
    if (!text.trim()) {
      return;
    }
    const saved = this.attachments.snapshot();
    try {
      await this.sendNow(text, queue);
    } catch (err) {
      this.attachments.restore(saved);
      void this.webview.post({ type: 'input', text });
      throw err;
    }
  }

  private async sendNow(text: string, queue: boolean): Promise<void> {
    const client = await this.client();
    if (this.running && !queue) {
      const landed = await callServer<boolean>(client, 'agentLsp.steer', { runId: this.running, text });
      if (landed === true) {
        return; // the `steer` event shows where it landed
      }
      // The run ended meanwhile: the message becomes a follow-up.
    }
    const args: Record<string, unknown> = { prompt: text, ...(await this.attachments.take(client)) };
    if (this.sessionId) {
      args.sessionId = this.sessionId;
    }
    if (this.running && queue) {
      args.queue = true;
    }
    if (this.runs.model) {
      args.model = this.runs.model;
    }
    const result = await callServer<RunStarted & { queued?: boolean }>(client, 'agentLsp.run', args);
    this.sessionId = result.sessionId;
    if (this.title === 'New session') {
      this.title = shortTitle(text, 40);
    }
    this.runs.started(result, shortTitle(text));
    this.onRunStarted(result.runId, text);
    if (result.queued) {
      this.queued.push({ runId: result.runId, text });
    } else {
      this.conversation.userPrompt(result.runId, text);
      this.running = result.runId;
    }
    this.postState();
    this.adopt(result.runId);
  }

  /** Decision 74: the queued runs newest first, then the running one. */
  async stop(): Promise<void> {
    const client = await this.client();
    for (const q of [...this.queued].reverse()) {
      await this.cancel(client, q.runId);
    }
    if (this.running) {
      await this.cancel(client, this.running);
    }
  }

  private async removeQueued(runId: string): Promise<void> {
    if (this.queued.some((q) => q.runId === runId)) {
      await this.cancel(await this.client(), runId);
    }
  }

  private async cancel(client: LanguageClient, runId: string): Promise<void> {
    log.info(`cancel sent for run ${runId} (chat)`);
    await callServer<boolean>(client, 'agentLsp.cancel', { runId });
  }

  /** "Edit and resend": a fork before that run, its prompt back in the input. */
  private async fork(runId: string): Promise<void> {
    const prompt = this.conversation.items.get(`${runId}:prompt`);
    if (!this.sessionId || prompt?.kind !== 'user') {
      return;
    }
    const forked = await callServer<{ sessionId: string }>(await this.client(), 'agentLsp.fork', {
      sessionId: this.sessionId,
      runId,
    });
    await this.load(forked.sessionId);
    void this.webview.post({ type: 'input', text: prompt.text });
  }

  /** "Rewind to here": the files as they were before that run (later runs included). */
  private async rewindTo(runId: string): Promise<void> {
    const choice = await vscode.window.showWarningMessage(
      'Agent: put the files back as they were before this prompt (its run and every later one)?',
      { modal: true },
      'Rewind',
    );
    if (choice !== 'Rewind') {
      return;
    }
    const result = await callServer<{ restored: string[]; conflicts: { uri: string; reason: string }[] }>(
      await this.client(),
      'agentLsp.rewind',
      { runId, includeLater: true },
    );
    const conflicts = result.conflicts.length ? `; changed since, left alone: ${result.conflicts.length}` : '';
    void vscode.window.showInformationMessage(`Agent: rewound ${result.restored.length} file(s)${conflicts}.`);
    if (this.sessionId) {
      await this.load(this.sessionId);
    }
  }

  /** The session picker: a new session, or one of `agentLsp.sessions` rendered from its history. */
  async pickSession(): Promise<void> {
    const client = await this.client();
    const sessions = await callServer<{ sessionId: string; title: string; runs: number }[]>(client, 'agentLsp.sessions', {});
    const items: (vscode.QuickPickItem & { sessionId?: string })[] = [
      { label: '$(add) New session' },
      ...(Array.isArray(sessions) ? sessions : []).map((s) => ({
        label: s.title || s.sessionId,
        description: `${s.runs} run${s.runs === 1 ? '' : 's'}${s.sessionId === this.sessionId ? ' · current' : ''}`,
        sessionId: s.sessionId,
      })),
    ];
    const pick = await vscode.window.showQuickPick(items, { title: 'Agent: Chat Session' });
    if (!pick) {
      return;
    }
    if (pick.sessionId) {
      await this.load(pick.sessionId);
    } else {
      this.newSession();
    }
  }

  /** Another session in the view: the runs of the one it showed are no longer drawn. */
  private leaveSession(): void {
    this.mine.clear();
    this.queued.length = 0;
    this.running = undefined;
    this.conversation.clear();
  }

  newSession(): void {
    this.leaveSession();
    this.sessionId = undefined;
    this.title = 'New session';
    this.meter = '';
    this.redraw();
  }

  /** Shows a session as it was seen live, from `agentLsp.history`; the next message continues it. */
  async load(sessionId: string): Promise<void> {
    const history = await callServer<HistoryAnswer>(await this.client(), 'agentLsp.history', { sessionId });
    this.leaveSession();
    this.sessionId = history.sessionId;
    this.title = history.title || 'Session';
    for (const run of history.runs ?? []) {
      this.mine.add(run.runId);
      this.conversation.userPrompt(run.runId, run.prompt);
      for (const event of run.events ?? []) {
        this.conversation.handle({ ...event, runId: run.runId, kind: event.kind ?? event.type ?? '' });
      }
      if (run.stop === null) {
        this.running = run.runId;
      }
    }
    this.redraw();
  }

  /** Asks in the view; undefined when the request was withdrawn (Decision 79). */
  ask(request: ChatApprovalRequest, token: vscode.CancellationToken): Promise<ChatAnswer | undefined> {
    return this.approvals.ask(request, token);
  }

  private async guard(action: () => Promise<void>): Promise<void> {
    try {
      await action();
    } catch (err) {
      log.error('chat failed', err);
      void vscode.window.showErrorMessage(`Agent: ${describeError(err)}`);
    }
  }

  /** The server went away: its runs are over. */
  clear(): void {
    this.approvals.withdrawAll();
    this.running = undefined;
    this.queued.length = 0;
    this.postState();
  }

  dispose(): void {
    this.clear();
    this.webview.dispose();
  }
}

interface HistoryAnswer {
  sessionId: string;
  title: string;
  runs: { runId: string; prompt: string; stop: string | null; events: (StreamEvent & { type?: string })[] }[];
}

/** A link in the conversation: opened by the extension, web links only, after asking. */
async function openLink(href: string): Promise<void> {
  let uri: vscode.Uri;
  try {
    uri = vscode.Uri.parse(href, true);
  } catch {
    return;
  }
  if (!['http', 'https', 'mailto'].includes(uri.scheme)) {
    log.warn(`chat: a ${uri.scheme}: link was not opened`);
    return;
  }
  const choice = await vscode.window.showWarningMessage(`Agent: open ${href}?`, { modal: true }, 'Open');
  if (choice === 'Open') {
    await vscode.env.openExternal(uri);
  }
}
