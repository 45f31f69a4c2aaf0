/**
 * Shows a proposed agent edit as a real diff editor before it is approved: two read-only
 * virtual documents (the file as it is now, the file after the edit) in `vscode.diff`.
 */
import * as vscode from 'vscode';
import { HunkLenses, type HunkInfo } from './hunkLens';
import { log, describeError } from './logger';

const SCHEME = 'agent-lsp-diff';

export interface ProposedEdit {
  /** The file the edit is for. */
  uri: vscode.Uri;
  tool: string;
  /** The whole file after the edit (the `approval` event's `newText`). */
  newText: string;
}

/** The hunks an approval offers and the ones the user rejected so far (shared by its files). */
export interface HunkChoice {
  files: Map<string, HunkInfo[]>; // by the file's URI
  total: number;
  rejected: Set<number>;
}

export class DiffView implements vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly provider: vscode.Disposable;
  private counter = 0;
  readonly lenses = new HunkLenses();
  private readonly lensProvider: vscode.Disposable;

  constructor() {
    this.lensProvider = vscode.languages.registerCodeLensProvider({ scheme: SCHEME }, this.lenses);
    this.provider = vscode.workspace.registerTextDocumentContentProvider(SCHEME, {
      provideTextDocumentContent: (uri) => this.texts.get(uri.toString()) ?? '',
    });
  }

  /** Opens the diff as a tab of the active group; returns how to close it. */
  async show(edit: ProposedEdit, choice?: HunkChoice): Promise<() => Promise<void>> {
    const id = `${++this.counter}`;
    const name = vscode.workspace.asRelativePath(edit.uri);
    const before = this.virtualUri(id, 'current', edit.uri);
    const after = this.virtualUri(id, 'proposed', edit.uri);
    this.texts.set(before.toString(), await currentText(edit.uri));
    this.texts.set(after.toString(), edit.newText);
    this.offer(after, edit.uri, choice);
    try {
      await vscode.commands.executeCommand('vscode.diff', before, after, `Agent ${edit.tool}: ${name} (current ↔ proposed)`, {
        // Not a preview tab: it would replace the file's own preview tab, closing that editor.
        preview: false,
        preserveFocus: true,
      });
    } catch (err) {
      log.warn(`could not open the diff of ${name}: ${describeError(err)}`);
    }
    return async () => {
      await closeTabsOf(after);
      this.lenses.remove(after);
      this.texts.delete(before.toString());
      this.texts.delete(after.toString());
    };
  }

  private offer(proposed: vscode.Uri, file: vscode.Uri, choice: HunkChoice | undefined): void {
    const hunks = choice?.files.get(file.toString());
    if (choice && hunks) {
      this.lenses.add(proposed, hunks, choice.total, choice.rejected);
    }
  }

  /**
   * A multi-file edit (a rename) as one multi-diff editor (`vscode.changes`), each file's
   * proposed text made from its unified diff; one diff editor per file where VS Code has no
   * multi-diff editor.
   */
  async showMany(
    tool: string,
    files: { uri: vscode.Uri; diff: string }[],
    choice?: HunkChoice,
  ): Promise<() => Promise<void>> {
    const id = `${++this.counter}`;
    const title = `Agent ${tool} (current ↔ proposed)`; // VS Code adds "(N files)"
    const sides: [vscode.Uri, vscode.Uri, vscode.Uri][] = [];
    for (const file of files) {
      const current = await currentText(file.uri);
      const before = this.virtualUri(id, 'current', file.uri);
      const after = this.virtualUri(id, 'proposed', file.uri);
      this.texts.set(before.toString(), current);
      this.texts.set(after.toString(), applyUnifiedDiff(current, file.diff));
      this.offer(after, file.uri, choice);
      sides.push([file.uri, before, after]);
    }
    let multi = true;
    try {
      await vscode.commands.executeCommand('vscode.changes', title, sides);
    } catch (err) {
      multi = false;
      log.info(`no multi-diff editor (${describeError(err)}): one diff per file`);
      for (const [file, before, after] of sides) {
        const name = vscode.workspace.asRelativePath(file);
        await vscode.commands.executeCommand('vscode.diff', before, after, `Agent ${tool}: ${name} (current ↔ proposed)`, {
          preview: false,
          preserveFocus: true,
        }).then(undefined, (e) => log.warn(`could not open the diff of ${name}: ${describeError(e)}`));
      }
    }
    return async () => {
      if (multi) {
        await closeTabsLabelled(title);
      }
      for (const [, before, after] of sides) {
        await closeTabsOf(after);
        this.lenses.remove(after);
        this.texts.delete(before.toString());
        this.texts.delete(after.toString());
      }
    };
  }

  private virtualUri(id: string, side: string, file: vscode.Uri): vscode.Uri {
    // The file's own path keeps its name and language (syntax colouring) in the diff.
    return vscode.Uri.from({ scheme: SCHEME, path: file.path, query: `${side}-${id}` });
  }

  dispose(): void {
    this.provider.dispose();
    this.lensProvider.dispose();
    this.lenses.dispose();
    this.texts.clear();
  }
}

/** The file as the editor holds it (its buffer if open, else disk; a new file is empty). */
async function currentText(uri: vscode.Uri): Promise<string> {
  const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  if (open) {
    return open.getText();
  }
  try {
    return new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
  } catch {
    return '';
  }
}

async function closeTabsOf(modified: vscode.Uri): Promise<void> {
  const tabs = vscode.window.tabGroups.all
    .flatMap((g) => g.tabs)
    .filter((tab) => tab.input instanceof vscode.TabInputTextDiff && tab.input.modified.toString() === modified.toString());
  if (tabs.length > 0) {
    try {
      await vscode.window.tabGroups.close(tabs, true);
    } catch (err) {
      log.warn(`could not close the diff: ${describeError(err)}`);
    }
  }
}

async function closeTabsLabelled(label: string): Promise<void> {
  const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((tab) => tab.label.startsWith(label));
  if (tabs.length > 0) {
    try {
      await vscode.window.tabGroups.close(tabs, true);
    } catch (err) {
      log.warn(`could not close the diff: ${describeError(err)}`);
    }
  }
}

/** `text` with a unified diff's hunks applied (for display: a hunk that does not fit is
 * applied where its header says). */
export function applyUnifiedDiff(text: string, diff: string): string {
  const source = text.split('\n');
  const out: string[] = [];
  let next = 0; // index in source of the next line not yet copied
  let inHunk = false;
  for (const line of diff.split('\n')) {
    const header = /^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@/.exec(line);
    if (header) {
      const start = Math.max(0, Number(header[1]) - (header[2] === '0' ? 0 : 1));
      while (next < start && next < source.length) {
        out.push(source[next++]);
      }
      inHunk = true;
      continue;
    }
    if (!inHunk || line.startsWith('\\')) {
      continue;
    }
    if (line.startsWith('+')) {
      out.push(line.slice(1));
    } else if (line.startsWith('-')) {
      next++;
    } else if (line.startsWith(' ')) {
      out.push(source[next++] ?? line.slice(1));
    } else if (line === '') {
      continue;
    } else {
      inHunk = false; // a new file header (---/+++) or anything else
    }
  }
  while (next < source.length) {
    out.push(source[next++]);
  }
  return out.join('\n');
}
