/** The palette commands and the interception of the server's `ask: true` code action. */
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  Middleware,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';
import { callServer } from './callServer';
import { describeError, log } from './logger';
import { RunArgs, RunInfo, RunRegistry, RunStarted, shortTitle } from './runs';
import { StreamView } from './stream';

/** The server's commands (CONTRACT "LSP surface"); ours are `agentLsp.client.*`. */
const SERVER_RUN = 'agentLsp.run';
const SERVER_CANCEL = 'agentLsp.cancel';
/**
 * How long a progress Cancel may take before the explicit `agentLsp.cancel` follows it: a
 * safety net for a lost notification, not the path; long enough for a loaded machine.
 */
const CANCEL_FALLBACK_MS = 15000;
/** Context key: a plan finished and can be carried out (shows the command in the palette). */
const PLAN_READY = 'agentLsp.planReady';

type SendRun = (args: RunArgs) => Promise<unknown>;

/** An item of `agentLsp.commands` (CONTRACT Decision 34). */
interface PromptCommand {
  name: string;
  description: string;
  argumentHint: string | null;
  source: 'user' | 'project';
  path: string;
}

export class AgentCommands {
  constructor(
    private readonly client: () => Promise<LanguageClient>,
    private readonly runs: RunRegistry,
    private readonly stream: StreamView,
    private readonly restartServer: () => Promise<void>,
  ) {}

  /** The plan a "Carry Out Plan" follows up: the newest plan run that stopped `done`. */
  private plan: { runId: string; sessionId: string; title: string } | undefined;

  register(): vscode.Disposable[] {
    const reg = vscode.commands.registerCommand;
    return [
      reg('agentLsp.client.runTask', () => this.guard(() => this.runTask())),
      reg('agentLsp.client.askSelection', () => this.guard(() => this.askSelection())),
      reg('agentLsp.client.cancelRun', () => this.guard(() => this.cancelRun())),
      reg('agentLsp.client.plan', () => this.guard(() => this.planTask())),
      reg('agentLsp.client.runCommand', () => this.guard(() => this.runCommand())),
      reg('agentLsp.client.carryOutPlan', () => this.guard(() => this.carryOutPlan())),
      reg('agentLsp.client.newSession', () => this.newSession()),
      reg('agentLsp.client.showOutput', () => this.stream.reveal()),
      reg('agentLsp.client.restartServer', () => this.restartServer()),
    ];
  }

  /** Language-client middleware: runs started from code actions go through here too. */
  get middleware(): Middleware {
    return {
      executeCommand: async (command, args, next) => {
        if (command !== SERVER_RUN || typeof args[0] !== 'object' || args[0] === null) {
          return next(command, args);
        }
        const { ask, ...given } = args[0] as RunArgs & { ask?: boolean };
        let runArgs: RunArgs = given;
        if (ask) {
          const question = await askQuestion();
          if (question === undefined) {
            return undefined;
          }
          runArgs = askArgs(question, given);
        }
        try {
          return await this.startRun(runArgs, (a) => Promise.resolve(next(command, [a])));
        } catch (err) {
          log.error('agentLsp.run failed', err);
          void vscode.window.showErrorMessage(`Agent: ${describeError(err)}`);
          return undefined;
        }
      },
    };
  }

  async runTask(): Promise<void> {
    const prompt = await vscode.window.showInputBox({
      title: 'Agent: Run Task',
      prompt: this.runs.session
        ? 'Task for the agent (continues the current session; "Agent: New Session" starts afresh)'
        : 'Task for the agent',
      placeHolder: 'e.g. Add type hints to utils.py and run the tests',
      ignoreFocusOut: true,
    });
    if (!prompt?.trim()) {
      return;
    }
    const editor = vscode.window.activeTextEditor;
    const args: RunArgs = { prompt };
    if (editor && isAgentDocument(editor.document)) {
      args.textDocument = { uri: (await this.client()).code2ProtocolConverter.asUri(editor.document.uri) };
    }
    await this.startRun(args);
  }

  /**
   * `Agent: Run Command…`: one of the user's prompt files (`.claude/commands/`, skills) from
   * `agentLsp.commands`, then its arguments; the run's prompt is `/name args` (the server
   * expands the file).
   */
  async runCommand(): Promise<void> {
    const client = await this.client();
    const commands = await callServer<PromptCommand[]>(client, 'agentLsp.commands', {});
    if (!Array.isArray(commands) || commands.length === 0) {
      void vscode.window.showInformationMessage(
        'Agent: no commands yet: add prompt files to .claude/commands/ (or ~/.claude/commands/).',
      );
      return;
    }
    const pick = await vscode.window.showQuickPick(
      commands.map((c) => ({
        label: `/${c.name}`,
        description: [c.argumentHint ?? '', c.source].filter(Boolean).join(' · '),
        detail: c.description || undefined,
        command: c,
      })),
      {
        title: 'Agent: Run Command',
        placeHolder: 'Your prompt files: .claude/commands/, .agents/commands/ and skills',
        matchOnDescription: true,
        matchOnDetail: true,
      },
    );
    if (!pick) {
      return;
    }
    const hint = pick.command.argumentHint ?? undefined;
    const given = await vscode.window.showInputBox({
      title: `Agent: /${pick.command.name}`,
      prompt: hint ? `Arguments: ${hint}` : 'Arguments (optional)',
      placeHolder: hint,
      ignoreFocusOut: true,
    });
    if (given === undefined) {
      return;
    }
    const args: RunArgs = { prompt: `/${pick.command.name}${given.trim() ? ` ${given.trim()}` : ''}` };
    const editor = vscode.window.activeTextEditor;
    if (editor && isAgentDocument(editor.document)) {
      args.textDocument = { uri: client.code2ProtocolConverter.asUri(editor.document.uri) };
    }
    await this.startRun(args);
  }

  /** `Agent: Plan…`: a run with the read-only tools that answers with a numbered plan. */
  async planTask(): Promise<void> {
    const prompt = await vscode.window.showInputBox({
      title: 'Agent: Plan',
      prompt: 'What should the agent plan? It reads and searches but changes nothing.',
      placeHolder: 'e.g. Split utils.py into parsing and formatting modules',
      ignoreFocusOut: true,
    });
    if (!prompt?.trim()) {
      return;
    }
    const args: RunArgs = { prompt, mode: 'plan' };
    const editor = vscode.window.activeTextEditor;
    if (editor && isAgentDocument(editor.document)) {
      args.textDocument = { uri: (await this.client()).code2ProtocolConverter.asUri(editor.document.uri) };
    }
    await this.startRun(args);
  }

  /** `Agent: Carry Out Plan`: a follow-up in the plan's session, with every tool. */
  async carryOutPlan(): Promise<void> {
    const plan = this.plan;
    if (!plan) {
      void vscode.window.showInformationMessage('Agent: no finished plan in this window yet (run "Agent: Plan…" first).');
      return;
    }
    await this.startRun({ carryOutPlan: true, sessionId: plan.sessionId }, undefined, `carry out: ${plan.title}`);
    this.plan = undefined;
    void vscode.commands.executeCommand('setContext', PLAN_READY, false);
  }

  /** A run stopped: a finished plan can be carried out (offered in a notification too). */
  onStopped(run: RunInfo): void {
    if (run.mode !== 'plan' || run.stopReason !== 'done' || !run.sessionId) {
      return;
    }
    this.plan = { runId: run.runId, sessionId: run.sessionId, title: run.title };
    void vscode.commands.executeCommand('setContext', PLAN_READY, true);
    void vscode.window
      .showInformationMessage(`Agent: the plan for "${run.title}" is ready (see the Agent output).`, 'Carry Out Plan')
      .then((choice) => {
        if (choice && this.plan?.runId === run.runId) {
          void this.guard(() => this.carryOutPlan());
        }
      });
  }

  async askSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || !isAgentDocument(editor.document) || editor.selection.isEmpty) {
      void vscode.window.showWarningMessage('Agent: select some text in an editor first.');
      return;
    }
    const question = await askQuestion();
    if (question === undefined) {
      return;
    }
    const c2p = (await this.client()).code2ProtocolConverter;
    // The server quotes the selected text it holds (the language client syncs the document first).
    await this.startRun({
      question,
      textDocument: { uri: c2p.asUri(editor.document.uri) },
      range: c2p.asRange(editor.selection),
    });
  }

  async cancelRun(): Promise<void> {
    const active = this.runs.active();
    if (active.length === 0) {
      void vscode.window.showInformationMessage('Agent: no run is going on.');
      return;
    }
    let runId = active[0].runId;
    if (active.length > 1) {
      const pick = await vscode.window.showQuickPick(
        active.map((r) => ({ label: r.title, description: r.runId, runId: r.runId })),
        { title: 'Agent: Cancel Run', placeHolder: 'Which run?' },
      );
      if (!pick) {
        return;
      }
      runId = pick.runId;
    }
    log.info(`cancel sent for run ${runId} (agentLsp.cancel)`);
    const cancelled = await (await this.client()).sendRequest(ExecuteCommandRequest.type, {
      command: SERVER_CANCEL,
      arguments: [{ runId }],
    });
    if (cancelled !== true) {
      this.runs.finished(runId);
      void vscode.window.showInformationMessage(`Agent: run ${runId} had already finished.`);
    }
  }

  newSession(): void {
    this.runs.newSession();
    void vscode.window.showInformationMessage('Agent: the next run starts a new session.');
  }

  /** The Cancel button of a run's progress notification. */
  async cancelFromProgress(runId: string): Promise<void> {
    const client = await this.client();
    log.info(`cancel sent for run ${runId} (progress)`);
    void client
      .sendNotification(WorkDoneProgressCancelNotification.type, { token: runId })
      .catch((err) => log.warn(`workDoneProgress/cancel: ${describeError(err)}`));
    setTimeout(() => {
      if (!this.runs.isFinished(runId)) {
        log.warn(`run ${runId} still going ${CANCEL_FALLBACK_MS} ms after the progress cancel: sending agentLsp.cancel`);
        void client
          .sendRequest(ExecuteCommandRequest.type, { command: SERVER_CANCEL, arguments: [{ runId }] })
          .catch((err) => log.warn(`agentLsp.cancel: ${describeError(err)}`));
      }
    }, CANCEL_FALLBACK_MS);
  }

  /**
   * Starts a run that continues the current session unless that session is busy.
   * `send` defaults to the server's `agentLsp.run` over `workspace/executeCommand`.
   */
  private async startRun(args: RunArgs, send?: SendRun, title?: string): Promise<RunStarted | undefined> {
    const sendRun: SendRun =
      send ??
      (async (a) =>
        (await this.client()).sendRequest(ExecuteCommandRequest.type, { command: SERVER_RUN, arguments: [a] }));
    const sessionId = args.sessionId ?? this.runs.sessionForNewRun();
    if (this.runs.model && !args.model) {
      args = { ...args, model: this.runs.model };
    }
    let result: unknown;
    try {
      result = await sendRun(sessionId ? { ...args, sessionId } : args);
    } catch (err) {
      if (!sessionId || args.sessionId || this.runs.isResumed) {
        throw err;
      }
      // The session may be gone (a restarted server keeps none): start a new one.
      log.warn(`continuing session ${sessionId} failed (${describeError(err)}); starting a new session`);
      result = await sendRun(args);
    }
    if (!isRunStarted(result)) {
      throw new Error(`the server answered agentLsp.run with ${JSON.stringify(result)}`);
    }
    const shown = title ?? args.question ?? args.prompt ?? 'carry out the plan';
    this.runs.started(result, shortTitle(shown), args.mode);
    this.stream.runStarted(result.runId, args.mode === 'plan' ? `[plan] ${shown}` : shown);
    this.stream.reveal();
    return result;
  }

  private async guard(action: () => Promise<void>): Promise<void> {
    try {
      await action();
    } catch (err) {
      log.error('command failed', err);
      void vscode.window.showErrorMessage(`Agent: ${describeError(err)}`);
    }
  }
}

function askQuestion(): Thenable<string | undefined> {
  return vscode.window
    .showInputBox({
      title: 'Agent: Ask About Selection',
      prompt: 'Your question about the selected text',
      placeHolder: 'e.g. Why does this loop never end?',
      ignoreFocusOut: true,
    })
    .then((q) => (q?.trim() ? q : undefined));
}

/**
 * The "Ask agent about selection" code action once the question is known: `question` with the
 * action's document and range (the server words the prompt and quotes the selection).
 */
function askArgs(question: string, given: RunArgs): RunArgs {
  const { prompt, selectionInPrompt: _quoted, ...rest } = given;
  if (rest.textDocument && rest.range) {
    return { ...rest, question };
  }
  return { ...rest, prompt: prompt ? `${question}\n\n${prompt}` : question };
}

function isAgentDocument(doc: vscode.TextDocument): boolean {
  return doc.uri.scheme === 'file' || doc.uri.scheme === 'untitled';
}

function isRunStarted(value: unknown): value is RunStarted {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as RunStarted).runId === 'string' &&
    typeof (value as RunStarted).sessionId === 'string'
  );
}
