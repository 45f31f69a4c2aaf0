/**
 * Answers the server's `agentLsp/codeIntel {method, params}` request (CONTRACT "Code
 * intelligence", Source 1) from VS Code's own language features: whatever language extensions
 * the user has installed answer the agent's find-definition, references, hover, symbols, call
 * hierarchy and rename, through the `vscode.execute…Provider` commands. The answer is the LSP
 * result of `method` as JSON (positions in UTF-16, as VS Code counts them), or null.
 */
import * as vscode from 'vscode';

export const CODE_INTEL_REQUEST = 'agentLsp/codeIntel';

interface CodeIntelParams {
  method: string;
  params: Record<string, any>;
}

type Json = any;

// -- LSP JSON -> VS Code ---------------------------------------------------------------------
const uriOf = (value: string): vscode.Uri => vscode.Uri.parse(value);
const position = (p: Json): vscode.Position => new vscode.Position(p.line, p.character);

// -- VS Code -> LSP JSON ---------------------------------------------------------------------
const lspPosition = (p: vscode.Position): Json => ({ line: p.line, character: p.character });
const lspRange = (r: vscode.Range): Json => ({ start: lspPosition(r.start), end: lspPosition(r.end) });
const lspUri = (u: vscode.Uri): string => u.toString();
// vscode.SymbolKind counts from 0, LSP's from 1
const lspKind = (kind: vscode.SymbolKind): number => kind + 1;

function lspLocation(value: vscode.Location | vscode.LocationLink): Json {
  if ('targetUri' in value) {
    return {
      targetUri: lspUri(value.targetUri),
      targetRange: lspRange(value.targetRange),
      targetSelectionRange: lspRange(value.targetSelectionRange ?? value.targetRange),
      ...(value.originSelectionRange ? { originSelectionRange: lspRange(value.originSelectionRange) } : {}),
    };
  }
  return { uri: lspUri(value.uri), range: lspRange(value.range) };
}

function markdown(content: vscode.MarkdownString | vscode.MarkedString): string {
  if (typeof content === 'string') {
    return content;
  }
  if ('language' in content && typeof content.language === 'string') {
    return '```' + content.language + '\n' + content.value + '\n```';
  }
  return content.value;
}

function lspHover(hovers: vscode.Hover[]): Json {
  const parts = hovers.flatMap((h) => h.contents.map(markdown)).filter((p) => p.trim() !== '');
  if (parts.length === 0) {
    return null;
  }
  const first = hovers.find((h) => h.range);
  return {
    contents: { kind: 'markdown', value: parts.join('\n\n---\n\n') },
    ...(first?.range ? { range: lspRange(first.range) } : {}),
  };
}

function lspDocumentSymbol(symbol: vscode.DocumentSymbol): Json {
  return {
    name: symbol.name,
    detail: symbol.detail || undefined,
    kind: lspKind(symbol.kind),
    range: lspRange(symbol.range),
    selectionRange: lspRange(symbol.selectionRange),
    children: (symbol.children ?? []).map(lspDocumentSymbol),
  };
}

function lspSymbolInformation(symbol: vscode.SymbolInformation): Json {
  return {
    name: symbol.name,
    kind: lspKind(symbol.kind),
    containerName: symbol.containerName || undefined,
    location: { uri: lspUri(symbol.location.uri), range: lspRange(symbol.location.range) },
  };
}

// The call hierarchy items VS Code handed out: its provideIncoming/OutgoingCalls commands know
// only items of a live session, so the LSP item carries an id of the original in `data`.
const items = new Map<string, vscode.CallHierarchyItem>();
let nextItem = 0;

function lspCallItem(item: vscode.CallHierarchyItem): Json {
  const id = `agentLsp-${++nextItem}`;
  items.set(id, item);
  while (items.size > 500) {
    items.delete(items.keys().next().value as string);
  }
  return {
    name: item.name,
    kind: lspKind(item.kind),
    detail: item.detail || undefined,
    uri: lspUri(item.uri),
    range: lspRange(item.range),
    selectionRange: lspRange(item.selectionRange),
    data: { agentLspItem: id },
  };
}

async function callItem(item: Json): Promise<vscode.CallHierarchyItem | undefined> {
  const known = items.get(item?.data?.agentLspItem);
  if (known) {
    return known;
  }
  // an item of an earlier session (or from elsewhere): prepare it again where it points
  const prepared = await vscode.commands.executeCommand<vscode.CallHierarchyItem[]>(
    'vscode.prepareCallHierarchy', uriOf(item.uri), position(item.selectionRange.start));
  return prepared?.[0];
}

function lspWorkspaceEdit(edit: vscode.WorkspaceEdit | undefined): Json {
  if (!edit) {
    return null;
  }
  const changes: Record<string, Json[]> = {};
  for (const [uri, edits] of edit.entries()) {
    const list = (changes[lspUri(uri)] ??= []);
    for (const e of edits) {
      list.push({ range: lspRange(e.range), newText: e.newText });
    }
  }
  return { changes };
}

const same = (a: Json, b: Json): boolean =>
  a.uri === b.uri && JSON.stringify(a.range) === JSON.stringify(b.range);

// -- the request -----------------------------------------------------------------------------
async function answer(method: string, p: Record<string, any>): Promise<Json> {
  const exec = <T>(command: string, ...args: unknown[]): Thenable<T> => vscode.commands.executeCommand<T>(command, ...args);
  const doc = p.textDocument?.uri ? uriOf(p.textDocument.uri) : undefined;
  const at = p.position ? position(p.position) : undefined;
  switch (method) {
    case 'textDocument/definition': {
      const found = await exec<(vscode.Location | vscode.LocationLink)[]>('vscode.executeDefinitionProvider', doc, at);
      return found?.length ? found.map(lspLocation) : null;
    }
    case 'textDocument/references': {
      const found = (await exec<vscode.Location[]>('vscode.executeReferenceProvider', doc, at)) ?? [];
      let refs = found.map(lspLocation);
      if (p.context?.includeDeclaration === false) {
        // VS Code's command always includes the declaration: take out what the definition is
        const defs = ((await exec<(vscode.Location | vscode.LocationLink)[]>('vscode.executeDefinitionProvider', doc, at)) ?? [])
          .map((d) => ('targetUri' in d
            ? { uri: lspUri(d.targetUri), range: lspRange(d.targetSelectionRange ?? d.targetRange) }
            : lspLocation(d)));
        refs = refs.filter((r) => !defs.some((d) => same(r, d)));
      }
      return refs.length ? refs : null;
    }
    case 'textDocument/hover':
      return lspHover((await exec<vscode.Hover[]>('vscode.executeHoverProvider', doc, at)) ?? []);
    case 'textDocument/documentSymbol': {
      const found = (await exec<(vscode.DocumentSymbol | vscode.SymbolInformation)[]>('vscode.executeDocumentSymbolProvider', doc)) ?? [];
      if (found.length === 0) {
        return null;
      }
      return found.map((s) => ('selectionRange' in s ? lspDocumentSymbol(s) : lspSymbolInformation(s)));
    }
    case 'workspace/symbol': {
      const found = (await exec<vscode.SymbolInformation[]>('vscode.executeWorkspaceSymbolProvider', String(p.query ?? ''))) ?? [];
      return found.length ? found.map(lspSymbolInformation) : null;
    }
    case 'textDocument/prepareCallHierarchy': {
      const found = (await exec<vscode.CallHierarchyItem[]>('vscode.prepareCallHierarchy', doc, at)) ?? [];
      return found.length ? found.map(lspCallItem) : null;
    }
    case 'callHierarchy/incomingCalls': {
      const item = await callItem(p.item);
      const calls = item ? ((await exec<vscode.CallHierarchyIncomingCall[]>('vscode.provideIncomingCalls', item)) ?? []) : [];
      return calls.length ? calls.map((c) => ({ from: lspCallItem(c.from), fromRanges: c.fromRanges.map(lspRange) })) : null;
    }
    case 'callHierarchy/outgoingCalls': {
      const item = await callItem(p.item);
      const calls = item ? ((await exec<vscode.CallHierarchyOutgoingCall[]>('vscode.provideOutgoingCalls', item)) ?? []) : [];
      return calls.length ? calls.map((c) => ({ to: lspCallItem(c.to), fromRanges: c.fromRanges.map(lspRange) })) : null;
    }
    case 'textDocument/prepareRename': {
      const found = await exec<{ range: vscode.Range; placeholder: string } | undefined>('vscode.prepareRename', doc, at);
      return found ? { range: lspRange(found.range), placeholder: found.placeholder } : null;
    }
    case 'textDocument/rename':
      return lspWorkspaceEdit(await exec<vscode.WorkspaceEdit>('vscode.executeDocumentRenameProvider', doc, at, String(p.newName)));
    default:
      return null;
  }
}

/** The handler of `agentLsp/codeIntel`: a provider's refusal (e.g. "cannot rename this
 * element") becomes the JSON-RPC error the server shows the model. */
export async function answerCodeIntel(params: CodeIntelParams | null | undefined): Promise<Json> {
  if (!params || typeof params.method !== 'string' || typeof params.params !== 'object') {
    throw new Error('agentLsp/codeIntel: expected {method, params}');
  }
  return (await answer(params.method, params.params ?? {})) ?? null;
}

/** For the health check: the active extensions that provide language features. */
export function answeringExtensions(): string[] {
  return vscode.extensions.all
    .filter((e) => e.isActive && (e.packageJSON?.activationEvents ?? []).some((a: string) => a.startsWith('onLanguage')))
    .map((e) => e.id)
    .sort();
}
