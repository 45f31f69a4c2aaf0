/**
 * Answers the server's `agentLsp/diagnostics` request with what VS Code shows (every
 * language server's and extension's problems), so the model's `diagnostics` tool and its
 * post-edit check see the editor's view (CONTRACT "Editor diagnostics", Decision 15).
 */
import * as vscode from 'vscode';
import type { Diagnostic as LspDiagnostic, LanguageClient } from 'vscode-languageclient/node';

export const DIAGNOSTICS_REQUEST = 'agentLsp/diagnostics';
/** Decision 15: answer once fresh diagnostics came for the version, or after 2 s. */
const AFTER_VERSION_WAIT_MS = 2000;

interface DiagnosticsParams {
  uris?: string[];
  afterVersion?: number;
}

interface FileDiagnostics {
  uri: string;
  diagnostics: LspDiagnostic[];
}

export async function answerDiagnostics(
  client: LanguageClient,
  params: DiagnosticsParams | null | undefined,
  token: vscode.CancellationToken,
): Promise<FileDiagnostics[]> {
  const p2c = client.protocol2CodeConverter;
  const c2p = client.code2ProtocolConverter;
  const uris = Array.isArray(params?.uris) ? params!.uris.map((u) => p2c.asUri(u)) : undefined;
  if (uris && typeof params?.afterVersion === 'number') {
    await freshDiagnostics(uris, params.afterVersion, token);
  }
  const entries: [vscode.Uri, readonly vscode.Diagnostic[]][] = uris
    ? uris.map((uri) => [uri, vscode.languages.getDiagnostics(uri)])
    : vscode.languages.getDiagnostics();
  return entries.map(([uri, diagnostics]) => ({
    uri: c2p.asUri(uri),
    diagnostics: c2p.asDiagnosticsSync([...diagnostics]),
  }));
}

/**
 * VS Code does not say which document version a diagnostic was computed for. The next
 * diagnostics change for the file once the buffer holds that version is the best sign
 * (language servers publish after each change); a file whose problems stay the same
 * publishes nothing new, hence the 2 s bound.
 */
function freshDiagnostics(uris: vscode.Uri[], afterVersion: number, token: vscode.CancellationToken): Promise<void> {
  const wanted = new Set(uris.map((u) => u.toString()));
  const reached = (): boolean =>
    vscode.workspace.textDocuments.some((d) => wanted.has(d.uri.toString()) && d.version >= afterVersion);
  return new Promise((resolve) => {
    const disposables: vscode.Disposable[] = [];
    const done = (): void => {
      clearTimeout(timer);
      disposables.forEach((d) => d.dispose());
      resolve();
    };
    const timer = setTimeout(done, AFTER_VERSION_WAIT_MS);
    disposables.push(
      token.onCancellationRequested(done),
      vscode.languages.onDidChangeDiagnostics((e) => {
        if (e.uris.some((u) => wanted.has(u.toString())) && reached()) {
          done();
        }
      }),
    );
  });
}
