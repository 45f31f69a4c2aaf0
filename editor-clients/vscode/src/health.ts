/**
 * `Agent: Check Health`: reaches the model endpoint through the server (`agentLsp.models`,
 * the endpoint's GET /models) and says precisely what is wrong: no key, unreachable URL,
 * an HTTP error, or a model the endpoint does not offer.
 */
import * as vscode from 'vscode';
import { callServer, GetClient } from './callServer';
import { describeError, log } from './logger';
import type { ModelList } from './pickers';
import { RunRegistry } from './runs';
import * as settings from './settings';

const OPEN_SETTINGS = 'Open Settings';
const PICK_MODEL = 'Pick Model…';

/** `quiet`: the start-up check, which only speaks up about a problem. */
export async function checkHealth(getClient: GetClient, runs: RunRegistry, quiet: boolean): Promise<void> {
  const endpoint = settings.baseUrl() ?? 'the default endpoint (OPENAI_BASE_URL or the SDK default)';
  let list: ModelList;
  try {
    list = await callServer<ModelList>(await getClient(), 'agentLsp.models', {});
  } catch (err) {
    if (!quiet) {
      void vscode.window.showErrorMessage(`Agent: health check failed: ${describeError(err)}`);
    }
    return;
  }
  const model = runs.model ?? list.current;
  let problem: string | undefined;
  let action = OPEN_SETTINGS;
  if (list.error) {
    problem = `the model endpoint cannot be used: ${list.error}`;
  } else if (list.models.length === 0) {
    problem = `${endpoint} lists no models (GET /models answered an empty list)`;
  } else if (!list.models.includes(model)) {
    const offered = list.models.slice(0, 10).join(', ') + (list.models.length > 10 ? ', …' : '');
    problem = `the model "${model}" is not offered by ${endpoint}; it offers: ${offered}`;
    action = PICK_MODEL;
  }
  if (problem === undefined) {
    log.info(`health check: ${endpoint} answers, model ${model} is offered`);
    if (!quiet) {
      void vscode.window.showInformationMessage(`Agent: ${endpoint} answers and offers the model "${model}".`);
    }
    return;
  }
  log.warn(`health check: ${problem}`);
  const choice = await vscode.window.showErrorMessage(`Agent: ${problem}`, action);
  if (choice === OPEN_SETTINGS) {
    void vscode.commands.executeCommand('workbench.action.openSettings', '@ext:agent-lsp.agent-lsp');
  } else if (choice === PICK_MODEL) {
    void vscode.commands.executeCommand('agentLsp.client.pickModel');
  }
}
