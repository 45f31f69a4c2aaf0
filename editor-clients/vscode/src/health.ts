/**
 * `Agent: Check Health`: shows the server's own checks (`agentLsp.health`, the ones
 * `agent-lsp doctor` prints: settings file, API key, the endpoint's GET /models, the model,
 * ripgrep, sandbox, MCP servers). The server computes them; what only the extension knows
 * (its version, the server command it started) is logged beside them.
 */
import * as vscode from 'vscode';
import { callServer, GetClient } from './callServer';
import { answeringExtensions } from './codeIntel';
import { describeError, log } from './logger';
import { RunRegistry } from './runs';
import * as settings from './settings';

const OPEN_SETTINGS = 'Open Settings';
const PICK_MODEL = 'Pick Model…';

export interface HealthCheck {
  name: string;
  ok: boolean;
  detail: string;
}

export interface HealthReport {
  ok: boolean;
  checks: HealthCheck[];
}

/** `quiet`: the start-up check, which only speaks up about a problem. */
export async function checkHealth(getClient: GetClient, runs: RunRegistry, quiet: boolean): Promise<void> {
  let report: HealthReport;
  try {
    // The model the next runs use (picked in this window) is the one checked.
    report = await callServer<HealthReport>(await getClient(), 'agentLsp.health', runs.model ? { model: runs.model } : {});
  } catch (err) {
    if (!quiet) {
      void vscode.window.showErrorMessage(`Agent: health check failed: ${describeError(err)}`);
    }
    return;
  }
  const version: string = vscode.extensions.getExtension('agent-lsp.agent-lsp')?.packageJSON?.version ?? '?';
  log.info(`health check: extension ${version}, server command ${settings.serverPath()}`);
  const answering = answeringExtensions();
  log.info(
    'health check: code intelligence: codeIntel is advertised; the agent asks VS Code\'s language features ' +
      (answering.length ? `(active now: ${answering.join(', ')})` : '(no language extension is active yet)'),
  );
  for (const check of report.checks) {
    if (check.ok) {
      log.info(`health check: ok ${check.name}: ${check.detail}`);
    } else {
      log.warn(`health check: FAILED ${check.name}: ${check.detail}`);
    }
  }
  const failed = report.checks.filter((c) => !c.ok);
  if (failed.length === 0) {
    if (!quiet) {
      const names = report.checks.map((c) => c.name).join(', ');
      void vscode.window.showInformationMessage(`Agent: all ${report.checks.length} checks pass (${names}); details in the Agent log.`);
    }
    return;
  }
  const [first, ...rest] = failed;
  const more = rest.length ? ` (also: ${rest.map((c) => c.name).join(', ')}; see the Agent log)` : '';
  const action = failed.some((c) => c.name === 'model') ? PICK_MODEL : OPEN_SETTINGS;
  const choice = await vscode.window.showErrorMessage(`Agent: ${first.name}: ${first.detail}${more}`, action);
  if (choice === OPEN_SETTINGS) {
    void vscode.commands.executeCommand('workbench.action.openSettings', '@ext:agent-lsp.agent-lsp');
  } else if (choice === PICK_MODEL) {
    void vscode.commands.executeCommand('agentLsp.client.pickModel');
  }
}
