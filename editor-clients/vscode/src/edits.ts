/** Applies the server's `workspace/applyEdit` requests and saves what they touched. */
import * as vscode from 'vscode';
import {
  ApplyWorkspaceEditParams,
  ApplyWorkspaceEditResult,
  CreateFile,
  LanguageClient,
  RenameFile,
  TextDocumentEdit,
} from 'vscode-languageclient/node';
import { describeError, log } from './logger';
import * as settings from './settings';

/**
 * Refactor Previews this window has open. The Output (stream.ts) is not revealed over one: it
 * shares the panel, and a run's output shown a moment after its preview opened hid the preview.
 */
export const openPreviews = { count: 0 };

/**
 * Replaces the client's `workspace/applyEdit` handler (it has no middleware hook) to save the
 * touched documents afterwards, so commands the agent runs next see the edit on disk; a document
 * the user had unsaved changes in is left unsaved (Decision 81).
 */
export async function applyEditAndSave(
  client: LanguageClient,
  params: ApplyWorkspaceEditParams,
): Promise<ApplyWorkspaceEditResult> {
  const edit = params.edit;
  // Same stale-version guard as the stock handler: VS Code itself does not check versions.
  for (const change of edit.documentChanges ?? []) {
    if (TextDocumentEdit.is(change) && typeof change.textDocument.version === 'number') {
      const uri = client.protocol2CodeConverter.asUri(change.textDocument.uri).toString();
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
      if (doc && doc.version !== change.textDocument.version) {
        return {
          applied: false,
          failureReason: `${uri} changed since the agent read it (version ${doc.version}, edit for ${change.textDocument.version})`,
        };
      }
    }
  }
  // Decision 81: a buffer the user had unsaved changes in stays unsaved (the server says so).
  const dirtyBefore = new Set(vscode.workspace.textDocuments.filter((d) => d.isDirty).map((d) => d.uri.toString()));
  const converted = await client.protocol2CodeConverter.asWorkspaceEdit(edit);
  // An edit whose change annotation needs confirmation opens VS Code's Refactor Preview
  // (docs/edit-preview.md); there `false` means the user discarded it.
  const previewed = Object.values(edit.changeAnnotations ?? {}).some((a) => a.needsConfirmation === true);
  openPreviews.count += previewed ? 1 : 0;
  let applied: boolean;
  try {
    applied = await vscode.workspace.applyEdit(converted);
  } finally {
    openPreviews.count -= previewed ? 1 : 0;
  }
  if (!applied) {
    // No failureReason for a discarded preview: the server tells the model "the user rejected it".
    return previewed ? { applied: false } : { applied: false, failureReason: 'VS Code refused the edit' };
  }
  if (settings.saveAfterEdit()) {
    await saveTouched(client, edit, dirtyBefore);
  }
  return { applied: true };
}

/** Saves the documents the edit touched, except those that were dirty before it (the user's). */
async function saveTouched(
  client: LanguageClient,
  edit: ApplyWorkspaceEditParams['edit'],
  dirtyBefore: Set<string>,
): Promise<void> {
  const uris = new Set<string>(Object.keys(edit.changes ?? {}));
  for (const change of edit.documentChanges ?? []) {
    if (TextDocumentEdit.is(change)) {
      uris.add(change.textDocument.uri);
    } else if (CreateFile.is(change)) {
      uris.add(change.uri);
    } else if (RenameFile.is(change)) {
      uris.add(change.newUri);
    }
  }
  for (const raw of uris) {
    const uri = client.protocol2CodeConverter.asUri(raw).toString();
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
    if (doc?.isDirty && !dirtyBefore.has(uri)) {
      try {
        if (!(await doc.save())) {
          log.warn(`could not save ${uri} after an agent edit`);
        }
      } catch (err) {
        log.warn(`saving ${uri}: ${describeError(err)}`);
      }
    }
  }
}
