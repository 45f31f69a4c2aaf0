/** Starts, restarts and stops the `agent-lsp` language server and its language client. */
import * as vscode from 'vscode';
import {
  ApplyWorkspaceEditRequest,
  ClientCapabilities,
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  Middleware,
  ServerOptions,
  StaticFeature,
} from 'vscode-languageclient/node';
import { ApprovalView, SHOW_MESSAGE_REQUEST } from './approvals';
import { answerCodeIntel, CODE_INTEL_REQUEST } from './codeIntel';
import { answerDebug, DEBUG_REQUEST } from './debug';
import { answerDiagnostics, DIAGNOSTICS_REQUEST } from './diagnostics';
import { applyEditAndSave } from './edits';
import { describeError, log } from './logger';
import * as settings from './settings';
import { STREAM_NOTIFICATION, StreamEvent } from './stream';

export interface ServerHooks {
  /** Middleware for commands (the `ask: true` code action) and work-done progress. */
  middleware: Middleware;
  onStream(event: StreamEvent): void;
  /** The server stopped or is being replaced: its runs are gone. */
  onServerGone(): void;
  /** A server answered `initialize` (the start-up health check runs here). */
  onServerStarted(): void;
  approvals: ApprovalView;
}

/**
 * Our experimental client capabilities (CONTRACT "Editor diagnostics", "Edit review", "Code
 * intelligence", "The debugger"): we answer `agentLsp/diagnostics`, `agentLsp/codeIntel` and
 * `agentLsp/debug` (VS Code's own debugger), and, when the user
 * wants it, review edits in the Refactor Preview (vscode-languageclient already advertises
 * changeAnnotationSupport).
 */
function agentCapabilities(editPreview: boolean): StaticFeature {
  return {
    fillClientCapabilities(capabilities: ClientCapabilities): void {
      const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
      capabilities.experimental = { ...experimental, agentLsp: { diagnostics: true, codeIntel: true, debug: true, editPreview } };
    },
    initialize(): void {},
    getState: () => ({ kind: 'static' }),
    clear(): void {},
  };
}

export class AgentServer implements vscode.Disposable {
  private current: LanguageClient | undefined;
  private fingerprint = '';
  private readonly disposables: vscode.Disposable[] = [];
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly hooks: ServerHooks,
    private readonly logChannel: vscode.LogOutputChannel,
  ) {
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigurationChanged(e)),
    );
  }

  /** The running client once a pending start finishes, or an error the user can act on. */
  async client(): Promise<LanguageClient> {
    await this.queue;
    if (!this.current || !this.current.isRunning()) {
      throw new Error('the agent-lsp server is not running (see the "agent-lsp" output).');
    }
    return this.current;
  }

  start(): Promise<void> {
    return this.serialize(() => this.doStart());
  }

  restart(): Promise<void> {
    return this.serialize(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.serialize(() => this.doStop());
  }

  /** Start/stop/restart one at a time: a settings change during start must not race it. */
  private serialize(step: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(step, step);
    return this.queue;
  }

  private async doStart(): Promise<void> {
    const command = settings.serverPath();
    this.fingerprint = settings.restartFingerprint();
    const serverOptions: ServerOptions = {
      command,
      args: ['serve', '--stdio'],
      options: { env: process.env },
    };
    const clientOptions: LanguageClientOptions = {
      // The agent works on any file: every open buffer is synced so its reads see the editor.
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      outputChannel: this.logChannel,
      traceOutputChannel: this.logChannel,
      initializationOptions: () => settings.initializationOptions(),
      middleware: {
        ...this.hooks.middleware,
        workspace: {
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) {
              return answers;
            }
            return params.items.map((item, i) => {
              const ours = settings.answerConfigurationItem(item.section);
              return ours.ours ? ours.value : answers[i];
            });
          },
        },
      },
    };
    const client = new LanguageClient('agentLsp', 'agent-lsp', serverOptions, clientOptions);
    client.onNotification(STREAM_NOTIFICATION, (event: StreamEvent) => this.hooks.onStream(event));
    client.registerFeature(agentCapabilities(settings.editPreview()));
    // Handlers registered before start() replace the client's stock ones.
    client.onRequest(ApplyWorkspaceEditRequest.type, (params) => applyEditAndSave(client, params));
    client.onRequest(SHOW_MESSAGE_REQUEST, (params, token) => this.hooks.approvals.handle(client, params, token));
    client.onRequest(DIAGNOSTICS_REQUEST, (params, token) => answerDiagnostics(client, params, token));
    client.onRequest(CODE_INTEL_REQUEST, (params) => answerCodeIntel(params));
    client.onRequest(DEBUG_REQUEST, (params) => answerDebug(params));
    this.current = client;
    log.info(`starting ${command} serve --stdio`);
    try {
      await client.start();
      const info = client.initializeResult?.serverInfo;
      log.info(`server started: ${info ? `${info.name} ${info.version ?? ''}`.trim() : command}`);
      this.hooks.onServerStarted();
    } catch (err) {
      log.error('could not start the server', err);
      void vscode.window
        .showErrorMessage(
          `agent-lsp: could not start "${command}": ${describeError(err)}. ` +
            'Install it from a clone of agent-lsp (pipx install . in the clone; not on PyPI yet, ' +
            'once published: pipx install agent-lsp-server) or set "agentLsp.serverPath".',
          'Open Settings',
        )
        .then((choice) => {
          if (choice) {
            void vscode.commands.executeCommand('workbench.action.openSettings', 'agentLsp.serverPath');
          }
        });
    }
  }

  private async doStop(): Promise<void> {
    const client = this.current;
    this.current = undefined;
    this.hooks.onServerGone();
    if (client) {
      try {
        await client.dispose(2000);
      } catch (err) {
        log.warn(`stopping the server: ${describeError(err)}`);
      }
    }
  }

  private onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration(settings.SECTION)) {
      return;
    }
    if (settings.restartFingerprint() !== this.fingerprint) {
      // Trust-boundary keys travel only in initializationOptions: a change needs a new server.
      log.info('a machine-scoped agentLsp setting changed: restarting the server');
      void this.restart();
      return;
    }
    const client = this.current;
    if (client?.isRunning()) {
      void client
        .sendNotification(DidChangeConfigurationNotification.type, {
          settings: { [settings.SECTION]: settings.workspaceSettings() },
        })
        .catch((err) => log.warn(`didChangeConfiguration: ${describeError(err)}`));
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
    void this.stop();
  }
}
