/**
 * Per-hunk review in the diff editor (CONTRACT "Per-hunk review", Decision 58): a CodeLens above
 * each hunk of the proposed side toggles it between kept and rejected; Allow then sends
 * `agentLsp.approve` with the kept hunks only.
 */
import * as vscode from 'vscode';

export const TOGGLE_HUNK = 'agentLsp.client.toggleHunk';
/** The diff editor's title action: VS Code shows no CodeLens in diff editors by default. */
export const TOGGLE_HUNK_AT_CURSOR = 'agentLsp.client.toggleHunkAtCursor';

/** One hunk of an approval's `files[].hunks`: its global index and `@@` header. */
export interface HunkInfo {
  index: number;
  header: string;
}

interface Shown {
  hunks: HunkInfo[];
  total: number;
  rejected: Set<number>;
}

export class HunkLenses implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly shown = new Map<string, Shown>();
  private readonly changed = new vscode.EventEmitter<void>();
  private readonly toggled = new vscode.EventEmitter<ReadonlySet<number>>();
  /** A hunk was toggled in a diff editor: the approval's shared `rejected` set changed. */
  readonly onDidToggle = this.toggled.event;
  private readonly decoration = vscode.window.createTextEditorDecorationType({});
  readonly onDidChangeCodeLenses = this.changed.event;

  /** The proposed side `proposed` shows these hunks; `rejected` is shared by the approval. */
  add(proposed: vscode.Uri, hunks: HunkInfo[], total: number, rejected: Set<number>): void {
    if (hunks.length > 0) {
      this.shown.set(proposed.toString(), { hunks, total, rejected });
      this.offered();
      this.changed.fire();
      setTimeout(() => this.decorate(), 300); // once the diff editor is open
    }
  }

  remove(proposed: vscode.Uri): void {
    this.shown.delete(proposed.toString());
    this.offered();
  }

  /** The palette offers the hunk action while a diff with hunks is open: in a multi-file diff
   * editor (`vscode.changes`) `resourceScheme` is not the proposed side's. */
  private offered(): void {
    void vscode.commands.executeCommand('setContext', 'agentLsp.hunksOffered', this.shown.size > 0);
  }

  /** The title action: rejects or keeps the hunk the cursor of the active diff side is in. */
  toggleAtCursor(): void {
    const editor = vscode.window.activeTextEditor;
    const shown = editor && this.shown.get(editor.document.uri.toString());
    if (!editor || !shown) {
      void vscode.window.showInformationMessage('Agent: put the cursor in a hunk of the proposed side of the diff');
      return;
    }
    const line = editor.selection.active.line;
    const hunk = [...shown.hunks].reverse().find((h) => startLine(h.header) - 1 <= line) ?? shown.hunks[0];
    this.toggle(editor.document.uri.toString(), hunk.index);
  }

  toggle(proposed: string, index: number): void {
    const shown = this.shown.get(proposed);
    if (!shown) {
      return;
    }
    if (!shown.rejected.delete(index)) {
      shown.rejected.add(index);
    }
    this.refresh();
    this.toggled.fire(shown.rejected);
  }

  /** The shared `rejected` set changed elsewhere (the chat view): redraw the lenses. */
  refresh(): void {
    this.changed.fire();
    this.decorate();
  }

  /** Each hunk's state after its first line, in the diff editors that show it. */
  decorate(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      const shown = this.shown.get(editor.document.uri.toString());
      if (!shown) {
        continue;
      }
      const options = shown.hunks.map((hunk) => {
        const line = Math.min(Math.max(0, startLine(hunk.header) - 1), Math.max(0, editor.document.lineCount - 1));
        const rejected = shown.rejected.has(hunk.index);
        return {
          range: new vscode.Range(line, 0, line, 0),
          renderOptions: {
            after: {
              contentText: `  ${rejected ? '✗' : '✓'} hunk ${hunk.index + 1} of ${shown.total} ${rejected ? 'rejected' : 'kept'}`,
              color: new vscode.ThemeColor(rejected ? 'errorForeground' : 'descriptionForeground'),
            },
          },
        };
      });
      editor.setDecorations(this.decoration, options);
    }
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const shown = this.shown.get(document.uri.toString());
    if (!shown) {
      return [];
    }
    return shown.hunks.map((hunk) => {
      const line = Math.min(Math.max(0, startLine(hunk.header) - 1), Math.max(0, document.lineCount - 1));
      const n = `hunk ${hunk.index + 1} of ${shown.total}`;
      const title = shown.rejected.has(hunk.index) ? `✗ ${n} rejected: keep it` : `✓ ${n} kept: reject it`;
      return new vscode.CodeLens(new vscode.Range(line, 0, line, 0), {
        title,
        command: TOGGLE_HUNK,
        arguments: [document.uri.toString(), hunk.index],
      });
    });
  }

  dispose(): void {
    this.shown.clear();
    this.changed.dispose();
    this.toggled.dispose();
    this.decoration.dispose();
  }
}

/** The proposed side's first line of a hunk, from `@@ -a,b +c,d @@` (1-based). */
function startLine(header: string): number {
  const found = /^@@ -\d+(?:,\d+)? \+(\d+)/.exec(header);
  return found ? Number(found[1]) : 1;
}

/** The hunks to send with Allow: every offered hunk but the rejected ones (undefined: all). */
export function keptHunks(files: { hunks?: HunkInfo[] }[] | undefined, rejected: Set<number>): number[] | undefined {
  if (rejected.size === 0) {
    return undefined;
  }
  return (files ?? []).flatMap((f) => (f.hunks ?? []).map((h) => h.index)).filter((i) => !rejected.has(i));
}

/** An approval's hunks as the chat view reviews them (its `rejected` is the diff editor's). */
export interface HunkReview {
  files: { name: string; diff: string; hunks: HunkInfo[] }[];
  total: number;
  rejected: ReadonlySet<number>;
  /** Rejects or keeps one offered hunk, in the chat and the diff editor alike. */
  toggle(index: number): void;
  /** The diff editor toggled a hunk of this approval. */
  onDidChange(listener: () => void): vscode.Disposable;
}
