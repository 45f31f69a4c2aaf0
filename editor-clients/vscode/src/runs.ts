/** Which runs are going on, and which session a new run continues. */

export interface RunInfo {
  runId: string;
  sessionId?: string;
  title: string;
  finished: boolean;
}

/** The arguments of the server's `agentLsp.run` command (CONTRACT "LSP surface"). */
export interface RunArgs {
  prompt: string;
  textDocument?: { uri: string };
  range?: { start: { line: number; character: number }; end: { line: number; character: number } };
  sessionId?: string;
}

export interface RunStarted {
  runId: string;
  sessionId: string;
}

export class RunRegistry {
  private readonly runs = new Map<string, RunInfo>();
  private currentSession: string | undefined;

  /** The session a new run should continue, unless that session is busy with a run. */
  sessionForNewRun(): string | undefined {
    const session = this.currentSession;
    if (session === undefined) {
      return undefined;
    }
    const busy = [...this.runs.values()].some((r) => r.sessionId === session && !r.finished);
    return busy ? undefined : session;
  }

  newSession(): void {
    this.currentSession = undefined;
  }

  get session(): string | undefined {
    return this.currentSession;
  }

  started(result: RunStarted, title: string): void {
    const known = this.runs.get(result.runId);
    this.runs.set(result.runId, {
      runId: result.runId,
      sessionId: result.sessionId,
      title: known?.title ?? title,
      finished: known?.finished ?? false,
    });
    this.currentSession = result.sessionId;
  }

  /** A run seen first through its progress (e.g. started from a code action). */
  seen(runId: string, title: string): void {
    if (!this.runs.has(runId)) {
      this.runs.set(runId, { runId, title, finished: false });
    }
  }

  finished(runId: string): void {
    const run = this.runs.get(runId);
    if (run) {
      run.finished = true;
    } else {
      this.runs.set(runId, { runId, title: runId, finished: true });
    }
  }

  isFinished(runId: string): boolean {
    return this.runs.get(runId)?.finished ?? false;
  }

  active(): RunInfo[] {
    return [...this.runs.values()].filter((r) => !r.finished);
  }

  /** Called when the server restarts: its runs and sessions are gone. */
  clear(): void {
    this.runs.clear();
    this.currentSession = undefined;
  }
}

export function shortTitle(text: string, max = 60): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? line.slice(0, max - 1) + '…' : line;
}
