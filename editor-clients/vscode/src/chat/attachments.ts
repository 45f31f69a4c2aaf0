/**
 * What the next chat message carries besides its text: files ("@", a quick pick), selections
 * ("Agent: Add Selection to Chat") and pasted images, sent as `agentLsp.run`'s `context` and
 * `images` (CONTRACT Decisions 53, 54).
 */
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import type { GetClient } from '../callServer';
import type { FromWebview } from './view';

interface FileRef {
  uri: vscode.Uri;
  range?: vscode.Range;
}

interface Image {
  name: string;
  mimeType: string;
  data: string;
}

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif']);
/** The server takes at most 5 MB decoded per image: refuse it here, with the reason. */
const MAX_IMAGE_BASE64 = Math.ceil((5 * 1024 * 1024 * 4) / 3);

export class Attachments {
  private files: FileRef[] = [];
  private images: Image[] = [];

  constructor(
    private readonly client: GetClient,
    private readonly changed: () => void,
  ) {}

  labels(): { index: number; label: string }[] {
    const files = this.files.map((f, index) => ({
      index,
      label: vscode.workspace.asRelativePath(f.uri) + (f.range ? `:${f.range.start.line + 1}-${f.range.end.line + 1}` : ''),
    }));
    const images = this.images.map((img, i) => ({ index: this.files.length + i, label: `image: ${img.name}` }));
    return [...files, ...images];
  }

  async onMessage(m: FromWebview): Promise<void> {
    if (m.type === 'attachFile') {
      await this.pickFile();
    } else if (m.type === 'image') {
      this.addImage(String(m.name ?? 'pasted'), String(m.mimeType ?? ''), String(m.data ?? ''));
    } else if (m.type === 'removeAttachment') {
      this.remove(Number(m.index));
    }
  }

  async pickFile(): Promise<void> {
    const found = await vscode.workspace.findFiles('**/*', '**/{node_modules,.git,.venv,__pycache__}/**', 2000);
    const pick = await vscode.window.showQuickPick(
      found
        .map((uri) => ({ label: vscode.workspace.asRelativePath(uri), uri }))
        .sort((a, b) => a.label.localeCompare(b.label)),
      { title: 'Agent: Attach a File to the Chat', placeHolder: 'The file goes with your next message' },
    );
    if (pick) {
      this.files.push({ uri: pick.uri });
      this.changed();
    }
  }

  /** "Agent: Add Selection to Chat". */
  addSelection(editor: vscode.TextEditor | undefined): boolean {
    if (!editor || editor.selection.isEmpty) {
      void vscode.window.showWarningMessage('Agent: select some text in an editor first.');
      return false;
    }
    this.files.push({ uri: editor.document.uri, range: editor.selection });
    this.changed();
    return true;
  }

  private addImage(name: string, mimeType: string, data: string): void {
    if (!IMAGE_TYPES.has(mimeType)) {
      void vscode.window.showWarningMessage(`Agent: ${mimeType || 'this file'} is not an image the agent takes (PNG, JPEG, WebP, GIF).`);
      return;
    }
    if (data.length > MAX_IMAGE_BASE64 || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) {
      void vscode.window.showWarningMessage('Agent: the image is over 5 MB (or unreadable); it was not attached.');
      return;
    }
    this.images.push({ name, mimeType, data });
    this.changed();
  }

  private remove(index: number): void {
    if (index < this.files.length) {
      this.files.splice(index, 1);
    } else {
      this.images.splice(index - this.files.length, 1);
    }
    this.changed();
  }

  /** What is attached now, to put back if the message could not be sent. */
  snapshot(): { files: FileRef[]; images: Image[] } {
    return { files: [...this.files], images: [...this.images] };
  }

  restore(saved: { files: FileRef[]; images: Image[] }): void {
    this.files = saved.files;
    this.images = saved.images;
    this.changed();
  }

  /** The run's `context` and `images`; the next message starts with none. */
  async take(client?: LanguageClient): Promise<{ context?: object[]; images?: object[] }> {
    const c2p = (client ?? (await this.client())).code2ProtocolConverter;
    const taken: { context?: object[]; images?: object[] } = {};
    if (this.files.length) {
      taken.context = this.files.map((f) => (f.range ? { uri: c2p.asUri(f.uri), range: c2p.asRange(f.range) } : { uri: c2p.asUri(f.uri) }));
    }
    if (this.images.length) {
      taken.images = this.images.map((img) => ({ mimeType: img.mimeType, data: img.data }));
    }
    this.files = [];
    this.images = [];
    this.changed();
    return taken;
  }
}
