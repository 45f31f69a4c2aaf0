/**
 * The `agentLsp.chat` webview view: its HTML (a strict Content-Security-Policy, one nonce
 * script, no remote content, no command URIs), and the coalesced posting of changed items.
 */
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import { ChatItem, toWire } from './conversation';

export const CHAT_VIEW = 'agentLsp.chat';

/** A streamed answer is re-drawn at most this often (ms): the webview stays responsive. */
const FLUSH_MS = 50;

export type FromWebview = { type: string; [field: string]: unknown };

export class ChatWebview implements vscode.WebviewViewProvider, vscode.Disposable {
  private view: vscode.WebviewView | undefined;
  private readonly dirty = new Map<string, ChatItem>();
  private timer: NodeJS.Timeout | undefined;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: (message: FromWebview) => void,
    /** The whole state again (the view was created or re-created). */
    private readonly onReady: () => void,
  ) {}

  get visible(): boolean {
    return this.view?.visible === true;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    view.webview.options = { enableScripts: true, enableCommandUris: false, localResourceRoots: [media] };
    view.webview.html = this.html(view.webview, media);
    this.subscriptions.push(
      view.webview.onDidReceiveMessage((m: FromWebview) => {
        if (m?.type === 'ready') {
          this.onReady();
        } else if (typeof m?.type === 'string') {
          this.onMessage(m);
        }
      }),
      view.onDidDispose(() => {
        this.view = undefined;
      }),
    );
  }

  async reveal(): Promise<void> {
    await vscode.commands.executeCommand(`${CHAT_VIEW}.focus`);
  }

  /** An item changed: drawn at the next flush (a streamed answer changes many times). */
  changed(item: ChatItem): void {
    this.dirty.set(item.id, item);
    this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const items = [...this.dirty.values()].map(toWire);
    this.dirty.clear();
    if (items.length > 0) {
      void this.post({ type: 'items', items });
    }
  }

  /** Every item again, in order (a session was switched to, or the view was re-created). */
  reset(items: Iterable<ChatItem>): void {
    this.dirty.clear();
    void this.post({ type: 'reset', items: [...items].map(toWire) });
  }

  post(message: object): Thenable<boolean> {
    return this.view?.webview.postMessage(message) ?? Promise.resolve(false);
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = crypto.randomBytes(16).toString('base64');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css'));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `script-src 'nonce-${nonce}'`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Agent</title>
</head>
<body>
<header id="bar">
  <button id="sessions" type="button" title="New session or resume one">Sessions…</button>
  <span id="session-title"></span>
  <span id="meter" title="Context used and cost of this session"></span>
</header>
<main id="log" role="log" aria-live="polite"></main>
<section id="queue" aria-label="Queued prompts"></section>
<footer id="composer">
  <div id="attachments" aria-label="Attachments"></div>
  <textarea id="input" rows="3" placeholder="Ask the agent (Enter sends, Shift+Enter for a new line, @ attaches a file)" aria-label="Message"></textarea>
  <div id="actions">
    <label title="While a run runs, queue the message as the next run instead of steering this one"><input type="checkbox" id="queue-mode"> Queue</label>
    <span id="status"></span>
    <button id="attach" type="button" title="Attach a file (@)">@</button>
    <button id="stop" type="button" disabled>Stop</button>
    <button id="send" type="button">Send</button>
  </div>
</footer>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    for (const s of this.subscriptions) {
      s.dispose();
    }
  }
}
