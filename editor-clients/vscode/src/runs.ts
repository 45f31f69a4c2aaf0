/** What this window knows of runs: which go on, how they ended, and what the next run continues. */
import type { RunReport } from './stream';

export interface RunInfo {
  runId: string;
  sessionId?: string;
  title: string;
  finished: boolean;
  mode?: 'plan';
  /** From the `stop` event's report. */
  stopReason?: string;
  editedFiles: string[];
  rewindable: boolean;
  /** A rewind of another run (rewinding it puts the files back). */
  rewindOf?: string;
  ended?: Date;
}

/** The arguments of the server's `agentLsp.run` command (CONTRACT "LSP surface"). */
/**
 * One of `prompt`, `question` (with `textDocument` and `range`: the server quotes the selection)
 * or `carryOutPlan` (the server's own follow-up): the server words the prompt (Decision 47).
 */
export interface RunArgs {
  prompt?: string;
  question?: string;
  carryOutPlan?: boolean;
  selectionInPrompt?: boolean;
  textDocument?: { uri: string };
  range?: { start: { line: number; character: number }; end: { line: number; character: number } };
  sessionId?: string;
  model?: string;
  mode?: 'plan';
}

export interface RunStarted {
  runId: string;
  sessionId: string;
}

export class RunRegistry {
  private readonly runs = new Map<string, RunInfo>();
  private currentSession: string | undefined;
  /** Set by "Resume Session": a failure to continue it must not silently start afresh. */
  private resumed = false;
  /** Set by "Pick Model": every next run passes it (the server keeps it for the session too). */
  model: string | undefined;

  /** The session a new run should continue, unless that session is busy with a run. */
  sessionForNewRun(): string | undefined {
    const session = this.currentSession;
    if (session === undefined) {
      return undefined;
    }
    const busy = [...this.runs.values()].some((r) => r.sessionId === session && !r.finished);
    return busy ? undefined : session;
  }

  get isResumed(): boolean {
    return this.resumed;
  }

  newSession(): void {
    this.currentSession = undefined;
    this.resumed = false;
  }

  resume(sessionId: string): void {
    this.currentSession = sessionId;
    this.resumed = true;
  }

  get session(): string | undefined {
    return this.currentSession;
  }

  started(result: RunStarted, title: string, mode?: 'plan'): void {
    const known = this.runs.get(result.runId);
    this.runs.set(result.runId, {
      ...(known ?? { editedFiles: [], rewindable: false, finished: false }),
      runId: result.runId,
      sessionId: result.sessionId,
      title: known && known.title !== known.runId ? known.title : title,
      mode,
    });
    this.currentSession = result.sessionId;
  }

  /** A run seen first through its progress or stream (e.g. started from a code action). */
  seen(runId: string, title: string): void {
    const known = this.runs.get(runId);
    if (!known) {
      this.runs.set(runId, { runId, title, finished: false, editedFiles: [], rewindable: false });
    } else if (known.title === runId) {
      known.title = title;
    }
  }

  finished(runId: string): void {
    const run = this.runs.get(runId);
    if (run) {
      run.finished = true;
    } else {
      this.runs.set(runId, { runId, title: runId, finished: true, editedFiles: [], rewindable: false });
    }
  }

  /** The `stop` event: what the run changed and whether it can be rewound. */
  stopped(runId: string, report: RunReport | undefined): RunInfo {
    this.finished(runId);
    const run = this.runs.get(runId)!;
    run.ended = new Date();
    if (report) {
      run.stopReason = report.stopReason;
      run.editedFiles = report.editedFiles ?? [];
      run.rewindable = report.rewindable === true;
      run.sessionId ??= report.sessionId;
    }
    return run;
  }

  /** A rewind is itself recorded: its id rewinds it (puts the files back). */
  rewound(rewindId: string, of: RunInfo, restored: string[]): void {
    this.runs.set(rewindId, {
      runId: rewindId,
      sessionId: of.sessionId,
      title: `Rewind of "${of.title}"`,
      finished: true,
      stopReason: 'rewind',
      editedFiles: restored,
      rewindable: restored.length > 0,
      rewindOf: of.runId,
      ended: new Date(),
    });
  }

  get(runId: string): RunInfo | undefined {
    return this.runs.get(runId);
  }

  isFinished(runId: string): boolean {
    return this.runs.get(runId)?.finished ?? false;
  }

  active(): RunInfo[] {
    return [...this.runs.values()].filter((r) => !r.finished);
  }

  /** Finished runs that changed files, newest first (the Rewind pick). */
  withChanges(): RunInfo[] {
    return [...this.runs.values()]
      .filter((r) => r.finished && r.editedFiles.length > 0)
      .sort((a, b) => (b.ended?.getTime() ?? 0) - (a.ended?.getTime() ?? 0));
  }

  /** Called when the server restarts: its runs are over, a new server starts a new session. */
  clear(): void {
    for (const run of this.runs.values()) {
      run.finished = true;
    }
    this.currentSession = undefined;
    this.resumed = false;
  }
}

export function shortTitle(text: string, max = 60): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? line.slice(0, max - 1) + '…' : line;
}
