/**
 * Answers the server's `agentLsp/debug {action: start|step|eval|stop}` requests (CONTRACT "The
 * debugger (turn 4)", Decision 61) with VS Code's own debugger: the session the agent starts is
 * an ordinary VS Code debug session, so the user watches it in the Run and Debug view. DAP
 * requests go through `DebugSession.customRequest`; stops and output are read by a tracker.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { ResponseError } from 'vscode-languageclient/node';
import { log } from './logger';

export const DEBUG_REQUEST = 'agentLsp/debug';

const FRAMES = 10;
const LOCALS = 50;
const VALUE_CHARS = 200;
const OUTPUT_CHARS = 4000;
const DEFAULT_TIMEOUT = 60;
const REQUEST_TIMEOUT_MS = 30_000;
const MARK = '__agentLsp';

interface BreakpointParam {
  path: string;
  line: number;
  condition?: string;
}

interface DebugParams {
  action: 'start' | 'step' | 'eval' | 'stop';
  program?: string;
  module?: string;
  args?: string[];
  cwd?: string;
  breakpoints?: BreakpointParam[];
  stopOnEntry?: boolean;
  timeout?: number;
  kind?: string;
  expression?: string;
  frame?: number;
}

interface StopAnswer {
  state: 'stopped' | 'exited';
  reason: string;
  location: string;
  frames: string[];
  locals: { name: string; type: string; value: string }[];
  output: string;
}

type Json = any;

/** What the tracker saw that the agent waits for. */
type Seen = { kind: 'stopped'; session: vscode.DebugSession; reason: string; threadId: number } | { kind: 'ended' };

const cut = (text: string, limit = VALUE_CHARS): string =>
  text.length <= limit ? text : text.slice(0, limit - 1) + '…';

const failure = (message: string): ResponseError<void> => new ResponseError(-32603, message);

/** The launch configuration for a program or module (a JavaScript file: the built-in js-debug). */
function launchConfiguration(params: DebugParams, program: string | undefined, cwd: string, id: string): vscode.DebugConfiguration {
  const shown = params.program ?? `-m ${params.module}`;
  const base = { name: `Agent: debug ${shown}`, request: 'launch', args: params.args ?? [], cwd,
    stopOnEntry: params.stopOnEntry ?? false, [MARK]: id };
  if (program && /\.(js|mjs|cjs)$/.test(program)) {
    return { ...base, type: 'pwa-node', program, console: 'internalConsole', skipFiles: ['<node_internals>/**'] };
  }
  if (params.module || (program && /\.py$/.test(program))) {
    const type = vscode.extensions.getExtension('ms-python.debugpy') ? 'debugpy'
      : vscode.extensions.getExtension('ms-python.python') ? 'python' : undefined;
    if (!type) {
      throw failure('VS Code has no Python debugger: install the Python Debugger extension (ms-python.debugpy), ' +
        'or debug with the sandbox on (agent-lsp then runs debugpy itself)');
    }
    const target = params.module ? { module: params.module } : { program };
    return { ...base, ...target, type, console: 'internalConsole', justMyCode: true };
  }
  throw failure(`VS Code's debugger here takes .js/.mjs/.cjs or .py programs, not ${JSON.stringify(shown)}`);
}

/** The run's one session in VS Code's debugger (the server ends it with the run). */
class AgentDebugSession {
  private root: vscode.DebugSession | undefined;
  private readonly ours = new Map<string, vscode.DebugSession>();
  private seen: Seen[] = [];
  private wake: (() => void) | undefined;
  private output = '';
  private ended = false;
  private exitCode: number | undefined;
  private stopped: { session: vscode.DebugSession; threadId: number } | undefined;
  private frameIds: number[] = [];
  private added: vscode.SourceBreakpoint[] = [];
  private id = '';

  constructor() {
    vscode.debug.registerDebugAdapterTrackerFactory('*', {
      createDebugAdapterTracker: (session) => (this.isOurs(session) ? this.tracker(session) : undefined),
    });
    vscode.debug.onDidTerminateDebugSession((session) => {
      if (session.id === this.root?.id) {
        this.push({ kind: 'ended' });
      }
    });
  }

  /** Ours: the session started for the agent, or a child of it (js-debug's node process). */
  private isOurs(session: vscode.DebugSession): boolean {
    if (session.configuration[MARK] === this.id && this.id !== '') {
      return true;
    }
    return session.parentSession !== undefined && this.ours.has(session.parentSession.id);
  }

  private tracker(session: vscode.DebugSession): vscode.DebugAdapterTracker {
    if (session.parentSession === undefined || !this.ours.has(session.parentSession.id)) {
      this.root = session;
    }
    this.ours.set(session.id, session);
    return {
      onWillReceiveMessage: (message: Json) => {
        // The agent's session stops on an uncaught exception, as debugpy's does (Decision 61),
        // whatever the user's own Breakpoints view has ticked: js-debug and debugpy both name
        // that filter `uncaught`. The tracker sees the request before the adapter does.
        if (message?.type === 'request' && message.command === 'setExceptionBreakpoints') {
          const filters: string[] = message.arguments?.filters ?? [];
          if (!filters.includes('uncaught') && !filters.includes('all')) {
            message.arguments = { ...message.arguments, filters: [...filters, 'uncaught'] };
          }
        }
      },
      onDidSendMessage: (message: Json) => {
        // a session the agent already stopped may still talk: not the current one's events
        if (message?.type !== 'event' || !this.ours.has(session.id)) {
          return;
        }
        const body = message.body ?? {};
        if (message.event === 'output' && ['stdout', 'stderr', undefined].includes(body.category)) {
          this.output = (this.output + String(body.output ?? '')).slice(-OUTPUT_CHARS);
        } else if (message.event === 'exited' && typeof body.exitCode === 'number') {
          this.exitCode = body.exitCode;
        } else if (message.event === 'stopped') {
          this.push({ kind: 'stopped', session, reason: String(body.reason ?? 'pause'), threadId: body.threadId ?? 0 });
        }
      },
    };
  }

  private push(seen: Seen): void {
    this.seen.push(seen);
    this.wake?.();
  }

  private async next(timeoutMs: number): Promise<Seen | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (this.seen.length === 0) {
      const left = deadline - Date.now();
      if (left <= 0) {
        return undefined;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
    return this.seen.shift();
  }

  async start(params: DebugParams): Promise<StopAnswer> {
    await this.stop();
    const folders = vscode.workspace.workspaceFolders ?? [];
    const folder = folders.find((f) => params.cwd?.startsWith(f.uri.fsPath)) ?? folders[0];
    const cwd = params.cwd ?? folder?.uri.fsPath ?? process.cwd();
    const program = params.program ? this.absolute(params.program, cwd) : undefined;
    this.id = `agent-${Date.now()}`;
    const config = launchConfiguration(params, program, cwd, this.id);
    Object.assign(this, { seen: [], output: '', ended: false, stopped: undefined, frameIds: [], exitCode: undefined });
    this.addBreakpoints(params.breakpoints ?? [], cwd);
    const started = await vscode.debug.startDebugging(folder, config);
    if (!started) {
      this.removeBreakpoints();
      throw failure(`VS Code could not start a ${config.type} debug session for ${config.name}`);
    }
    return this.wait(params.timeout);
  }

  /** A workspace-relative path as the server sends it: under the folder that has it, else cwd. */
  private absolute(given: string, cwd: string): string {
    if (path.isAbsolute(given)) {
      return given;
    }
    for (const f of vscode.workspace.workspaceFolders ?? []) {
      const candidate = path.join(f.uri.fsPath, given);
      if (fs.existsSync(candidate)) {
        return candidate;
      }
    }
    return path.join(cwd, given);
  }

  private addBreakpoints(given: BreakpointParam[], cwd: string): void {
    const files = new Set(given.map((b) => this.absolute(b.path, cwd)));
    const replaced = this.added.filter((b) => files.has(b.location.uri.fsPath));
    if (replaced.length > 0) {
      vscode.debug.removeBreakpoints(replaced);
      this.added = this.added.filter((b) => !replaced.includes(b));
    }
    const fresh = given.map((b) => new vscode.SourceBreakpoint(
      new vscode.Location(vscode.Uri.file(this.absolute(b.path, cwd)), new vscode.Position(b.line - 1, 0)),
      true, b.condition || undefined));
    if (fresh.length > 0) {
      vscode.debug.addBreakpoints(fresh);
      this.added.push(...fresh);
    }
  }

  private removeBreakpoints(): void {
    if (this.added.length > 0) {
      vscode.debug.removeBreakpoints(this.added);
      this.added = [];
    }
  }

  /** The next stop or the end; at the timeout the program is paused (Decision 88). */
  private async wait(timeout: number | undefined): Promise<StopAnswer> {
    let seen = await this.next((timeout || DEFAULT_TIMEOUT) * 1000);
    if (seen === undefined) {
      await this.pauseAll();
      seen = await this.next(REQUEST_TIMEOUT_MS);
      if (seen === undefined) {
        throw failure(`the program did not pause after ${timeout || DEFAULT_TIMEOUT}s`);
      }
    }
    if (seen.kind === 'ended') {
      this.ended = true;
      this.stopped = undefined;
      this.frameIds = [];
      return { state: 'exited', reason: String(this.exitCode ?? 'unknown'), location: '', frames: [], locals: [], output: this.output };
    }
    this.stopped = { session: seen.session, threadId: seen.threadId };
    return this.describe(seen.reason);
  }

  private async pauseAll(): Promise<void> {
    for (const session of this.sessions()) {
      try {
        const threads: Json[] = (await session.customRequest('threads'))?.threads ?? [];
        for (const thread of threads.slice(0, 1)) {
          await session.customRequest('pause', { threadId: thread.id });
        }
      } catch (err) {
        log.info(`debug: pause: ${String(err)}`);
      }
    }
  }

  /** Children first: js-debug's node process answers `threads`, its parent has none. */
  private sessions(): vscode.DebugSession[] {
    return [...this.ours.values()].reverse();
  }

  private where(frame: Json): string {
    const file = String(frame?.source?.path ?? frame?.source?.name ?? '<unknown>');
    // a remote workbench (code-server) names sources by URI: vscode-remote://host/tmp/x.js
    const local = /^[a-z][\w+.-]+:\/\//i.test(file) ? vscode.Uri.parse(file).path : file;
    const shown = path.isAbsolute(local) ? vscode.workspace.asRelativePath(local, false) : local;
    return `${shown}:${frame?.line ?? 0}`;
  }

  private async describe(reason: string): Promise<StopAnswer> {
    const { session, threadId } = this.stopped!;
    const trace = await session.customRequest('stackTrace', { threadId, levels: FRAMES });
    const frames: Json[] = (trace?.stackFrames ?? []).slice(0, FRAMES);
    this.frameIds = frames.map((f) => f.id);
    const answer: StopAnswer = {
      state: 'stopped', reason, location: frames.length > 0 ? this.where(frames[0]) : '',
      frames: frames.map((f) => `${this.where(f)} ${f.name ?? '?'}`), locals: [], output: this.output,
    };
    if (frames.length > 0) {
      answer.locals = await this.locals(session, frames[0].id);
    }
    return answer;
  }

  private async locals(session: vscode.DebugSession, frameId: number): Promise<StopAnswer['locals']> {
    const scopes: Json[] = (await session.customRequest('scopes', { frameId }))?.scopes ?? [];
    const scope = scopes.find((s) => s.presentationHint === 'locals' || /^local/i.test(String(s.name))) ?? scopes[0];
    if (!scope?.variablesReference) {
      return [];
    }
    const body = await session.customRequest('variables', { variablesReference: scope.variablesReference });
    return ((body?.variables ?? []) as Json[]).slice(0, LOCALS).map((v) => ({
      name: String(v.name), type: String(v.type ?? ''), value: cut(String(v.value ?? '')),
    }));
  }

  private live(): { session: vscode.DebugSession; threadId: number } {
    if (this.ended || this.root === undefined) {
      throw failure('no debug session is running in VS Code');
    }
    if (this.stopped === undefined) {
      throw failure('the program is not stopped');
    }
    return this.stopped;
  }

  async step(params: DebugParams): Promise<StopAnswer> {
    const { session, threadId } = this.live();
    if (params.breakpoints?.length) {
      this.addBreakpoints(params.breakpoints, params.cwd ?? '');
    }
    const kind = params.kind ?? 'continue';
    if (!['continue', 'next', 'stepIn', 'stepOut'].includes(kind)) {
      throw failure(`unknown step kind ${JSON.stringify(kind)}`);
    }
    this.stopped = undefined;
    await session.customRequest(kind, { threadId });
    return this.wait(params.timeout);
  }

  async evaluate(params: DebugParams): Promise<{ value: string; type: string }> {
    const { session } = this.live();
    const frame = params.frame ?? 0;
    if (frame < 0 || frame >= this.frameIds.length) {
      throw failure(`frame ${frame} does not exist (0 to ${this.frameIds.length - 1})`);
    }
    const body = await session.customRequest('evaluate', {
      expression: params.expression ?? '', frameId: this.frameIds[frame], context: 'repl',
    });
    return { value: cut(String(body?.result ?? '')), type: String(body?.type ?? '') };
  }

  async stop(): Promise<null> {
    const root = this.root;
    this.root = undefined;
    this.stopped = undefined;
    this.frameIds = [];
    this.removeBreakpoints();
    if (root && !this.ended) {
      this.ended = true;
      await vscode.debug.stopDebugging(root);
    }
    this.ours.clear();
    return null;
  }
}

let current: AgentDebugSession | undefined;

export async function answerDebug(params: DebugParams): Promise<Json> {
  current ??= new AgentDebugSession();
  log.info(`debug: ${params.action}`);
  switch (params.action) {
    case 'start':
      return current.start(params);
    case 'step':
      return current.step(params);
    case 'eval':
      return current.evaluate(params);
    case 'stop':
      return current.stop();
    default:
      throw failure(`unknown agentLsp/debug action ${JSON.stringify((params as Json).action)}`);
  }
}
