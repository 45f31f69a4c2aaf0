/** Reads the `agentLsp.*` settings and shapes them as the server's nested camelCase object. */
import * as os from 'os';
import * as vscode from 'vscode';

export const SECTION = 'agentLsp';

/**
 * Keys that only the user's own configuration may set (CONTRACT "Trust boundary"): they are
 * declared machine-scoped, go to the server in `initializationOptions` only, and a change
 * restarts the server. `serverPath` is client-side but just as sensitive.
 */
const TRUSTED_KEYS = [
  'baseUrl',
  'apiKeyEnv',
  'transcriptDir',
  'memoryFiles',
  'approval.default',
  'approval.tools',
  'approval.allowCommands',
  'approval.timeout',
  'approval.sandboxed',
  'mcpServers',
  'mcp.workspaceServers',
  'sandbox.mode',
  'sandbox.network',
  'sandbox.hide',
  'budget.maxCostUsd',
  'pricing',
  'hooks',
  'languageServers',
  'verify.commands',
  'verify.diagnostics',
  'verify.maxRounds',
  'verify.recognize',
  'debug.evalWithoutAsking',
  'debug.python',
  'debugAdapters',
  'modelAliases',
  'permissions',
] as const;

/** Keys a workspace may set; answered over `workspace/configuration` as well. */
const WORKSPACE_KEYS = [
  'model',
  'maxTurns',
  'delegateMaxTurns',
  'requestTimeout',
  'streamUsage',
  'contextWindow',
  'toolOutputLimit',
] as const;

/** The nested object the server reads, e.g. `{model, approval: {default}}`. */
export type ServerSettings = Record<string, unknown>;

function config(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(SECTION);
}

/** Empty strings in the settings UI mean "not set": the server's own default applies. */
function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

function setPath(target: ServerSettings, dotted: string, value: unknown): void {
  const parts = dotted.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    node = (node[part] ??= {}) as ServerSettings;
  }
  node[parts[parts.length - 1]] = value;
}

/**
 * Only values the user actually set are forwarded, never package.json defaults: a forwarded
 * default would beat the environment (`AGENT_LSP_MODEL`, `OPENAI_BASE_URL`) on the server.
 */
function explicitValue(cfg: vscode.WorkspaceConfiguration, key: string, userOnly: boolean): unknown {
  const info = cfg.inspect(key);
  if (info === undefined) {
    return undefined;
  }
  if (userOnly) {
    return info.globalValue;
  }
  const explicit =
    info.workspaceFolderValue !== undefined ||
    info.workspaceValue !== undefined ||
    info.globalValue !== undefined;
  return explicit ? cfg.get(key) : undefined;
}

function collect(keys: readonly string[], userOnly: boolean): ServerSettings {
  const cfg = config();
  const result: ServerSettings = {};
  for (const key of keys) {
    const value = explicitValue(cfg, key, userOnly);
    if (isSet(value)) {
      setPath(result, key, value);
    }
  }
  return result;
}

function mergeDeep(a: ServerSettings, b: ServerSettings): ServerSettings {
  const out: ServerSettings = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const prev = out[key];
    out[key] =
      isPlainObject(prev) && isPlainObject(value) ? mergeDeep(prev, value) : value;
  }
  return out;
}

function isPlainObject(v: unknown): v is ServerSettings {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The object sent as `initializationOptions`: everything the user set. */
export function initializationOptions(): ServerSettings {
  return mergeDeep(collect(WORKSPACE_KEYS, false), collect(TRUSTED_KEYS, true));
}

/** The answer to `workspace/configuration` for section `agentLsp`: no trust-boundary keys. */
export function workspaceSettings(): ServerSettings {
  return collect(WORKSPACE_KEYS, false);
}

/** What a restart depends on: the server command line and the trust-boundary values. */
export function restartFingerprint(): string {
  return JSON.stringify({ serverPath: serverPath(), editPreview: editPreview(), trusted: collect(TRUSTED_KEYS, true) });
}

/** Whether edits are reviewed in VS Code's Refactor Preview (sent as a capability at start). */
export function editPreview(): boolean {
  return config().get<boolean>('editPreview', true);
}

/** The model the settings name (what `agentLsp.models` calls `current`), if the user set one. */
export function explicitModel(): string | undefined {
  const value = explicitValue(config(), 'model', false);
  return isSet(value) ? String(value) : undefined;
}

/** The endpoint as the user configured it, for messages (empty: the server's default). */
export function baseUrl(): string | undefined {
  const value = config().inspect<string>('baseUrl')?.globalValue;
  return isSet(value) ? String(value) : undefined;
}

export function serverPath(): string {
  const cfg = config();
  const value = cfg.inspect<string>('serverPath')?.globalValue;
  const path = isSet(value) ? String(value) : 'agent-lsp';
  return path.startsWith('~/') ? os.homedir() + path.slice(1) : path;
}

export function saveAfterEdit(): boolean {
  return config().get<boolean>('saveAfterEdit', true);
}

/**
 * Answers one `workspace/configuration` item for our section, or a key inside it
 * (`agentLsp.model`). Returns `undefined` for sections that are not ours.
 */
export function answerConfigurationItem(section: string | undefined): { ours: boolean; value?: unknown } {
  if (section === SECTION) {
    return { ours: true, value: workspaceSettings() };
  }
  if (section?.startsWith(SECTION + '.')) {
    let node: unknown = workspaceSettings();
    for (const part of section.slice(SECTION.length + 1).split('.')) {
      node = isPlainObject(node) ? node[part] : undefined;
    }
    return { ours: true, value: node ?? null };
  }
  return { ours: false };
}
