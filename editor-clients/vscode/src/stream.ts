/** Renders the server's `agentLsp/stream` events live in the `Agent` output channel. */
import * as vscode from 'vscode';
import type { HunkInfo } from './hunkLens';
import { openPreviews } from './edits';

export const STREAM_NOTIFICATION = 'agentLsp/stream';

export interface RunReport {
  runId?: string;
  sessionId?: string;
  stopReason?: string;
  /** Why, typed (CONTRACT Decision 24): `answer`; `turns` `spiral` `budget`; `model` `output_limit`
   * `content_filter` `argument_cap` `schema` `hook` `internal`; `user` `signal` `shutdown`. */
  stopCause?: string;
  turns?: number;
  finalText?: string;
  summary?: string;
  editedFiles?: string[];
  toolCalls?: number;
  denied?: number;
  error?: string;
  transcript?: string;
  usage?: { promptTokens?: number; completionTokens?: number; cachedTokens?: number; costUsd?: number };
  contextTokens?: number;
  contextWindow?: number;
  rewindable?: boolean;
  /** What checked the run's edits (CONTRACT "Verified done"); the progress end line says it. */
  verification?: {
    status?: 'passed' | 'failed' | 'none';
    checks?: {
      kind: string;
      command?: string;
      exitCode?: number | null;
      errors?: number;
      afterLastEdit?: boolean;
      summary?: string;
    }[];
    unverifiedFiles?: string[];
  };
  /** Background processes (CONTRACT Decision 60). */
  processes?: { processId: string; command: string; state: string; exitCode?: number | null }[];
}

export interface StreamEvent {
  runId: string;
  seq: number;
  kind: string;
  text?: string;
  callId?: string;
  tool?: string;
  arguments?: unknown;
  ok?: boolean;
  truncated?: boolean;
  spillPath?: string;
  detail?: string;
  state?: string;
  turn?: number;
  report?: RunReport;
  /** `main`, or the id of the sub-agent the event belongs to. */
  agentId?: string;
  /** `approval` events of edit tools, while `pending`: the edit as a diff and the whole new text. */
  uri?: string;
  diff?: string;
  newText?: string;
  diffTruncated?: boolean;
  /** Every edit's files, each with its unified diff and hunks (none: no hunk choice). */
  files?: { uri: string; diff: string; hunks?: HunkInfo[] }[];
  /** `usage` events. */
  contextTokens?: number;
  contextWindow?: number;
  costUsd?: number;
  /** `process` events (a background process started or ended). */
  processId?: string;
  command?: string;
  exitCode?: number | null;
}

export class StreamView implements vscode.Disposable {
  readonly channel: vscode.OutputChannel;
  private lastRunId: string | undefined;
  private readonly seenRuns = new Set<string>();
  private atLineStart = true;

  constructor() {
    this.channel = vscode.window.createOutputChannel('Agent');
  }

  reveal(): void {
    if (openPreviews.count > 0) {
      return; // a Refactor Preview waits for the user in the same panel: never cover it
    }
    this.channel.show(true);
  }

  /** A header when a run is started from this window, before any of its events. */
  runStarted(runId: string, prompt: string): void {
    if (this.seenRuns.has(runId)) {
      return; // its events came before the answer to agentLsp.run
    }
    this.seenRuns.add(runId);
    this.newLine();
    this.channel.appendLine(`━━ Agent run ${runId}: ${prompt.split('\n')[0]}`);
    this.lastRunId = runId;
  }

  handle(event: StreamEvent): void {
    if (!SHOWN_KINDS.has(event.kind)) {
      return; // a kind of a newer server: nothing to show (CONTRACT Decision 90)
    }
    this.seenRuns.add(event.runId);
    if (event.runId !== this.lastRunId) {
      // Runs may interleave: say whose output follows.
      this.newLine();
      this.channel.appendLine(`━━ [${event.runId}]`);
      this.lastRunId = event.runId;
    }
    if (event.kind === 'usage') {
      return; // shown in the status bar; the report's line sums it up
    }
    if (event.kind === 'text') {
      const text = event.text ?? '';
      if (text) {
        this.channel.append(text);
        this.atLineStart = text.endsWith('\n');
      }
      return;
    }
    const who = event.agentId && event.agentId !== 'main' ? `[${event.agentId}] ` : '';
    this.line(who + formatEvent(event));
    if (event.kind === 'stop' && event.report) {
      for (const detail of formatReport(event.report, event.text)) {
        this.line(detail);
      }
    }
  }

  /** A line of the extension's own (a rewind's outcome), between the runs' output. */
  note(text: string): void {
    this.lastRunId = undefined;
    this.line(text);
  }

  private line(text: string): void {
    this.newLine();
    this.channel.appendLine(text);
  }

  private newLine(): void {
    if (!this.atLineStart) {
      this.channel.appendLine('');
      this.atLineStart = true;
    }
  }

  dispose(): void {
    this.channel.dispose();
  }
}

/** The kinds this view knows; it ignores the others. */
const SHOWN_KINDS = new Set([
  'text', 'usage', 'thinking', 'toolCall', 'toolResult', 'approval', 'status', 'compaction', 'hook',
  'steer', 'process', 'stop',
]);

const MARKS: Record<string, string> = {
  toolCall: '▶',
  approval: '?',
  status: '·',
  compaction: '≡',
  hook: '⚑',
  process: '⚙',
  stop: '■',
};

function formatEvent(event: StreamEvent): string {
  const text = (event.text ?? '').trimEnd();
  switch (event.kind) {
    case 'toolCall':
      return `▶ ${text || `${event.tool} ${JSON.stringify(event.arguments ?? {})}`}`;
    case 'toolResult': {
      const mark = event.ok === false ? '✗' : '✓';
      const spill = event.spillPath ? ` (full output: ${event.spillPath})` : '';
      return `  ${mark} ${text}${spill}`;
    }
    case 'approval':
      return `? ${text || `${event.tool}: ${event.detail ?? ''}`} [${event.state ?? ''}]`;
    case 'steer':
      return `» ${text}`; // the user's words, sent while the run ran
    case 'stop':
      return `■ ${text || `stopped: ${event.report?.stopReason ?? 'unknown'}`}`;
    default:
      return `${MARKS[event.kind] ?? '·'} ${text}`;
  }
}

function formatReport(report: RunReport, stopText?: string): string[] {
  const lines = [
    `  stop reason: ${report.stopReason ?? 'unknown'} · turns ${report.turns ?? 0}` +
      ` · tool calls ${report.toolCalls ?? 0} · denied ${report.denied ?? 0}`,
  ];
  const cost = report.usage?.costUsd;
  if (report.contextWindow) {
    lines.push(
      `  context ${Math.round((report.contextTokens ?? 0) / 1000)}k/${Math.round(report.contextWindow / 1000)}k` +
        ` · tokens in ${report.usage?.promptTokens ?? 0} (cached ${report.usage?.cachedTokens ?? 0})` +
        ` · out ${report.usage?.completionTokens ?? 0}` +
        (typeof cost === 'number' ? ` · $${cost < 1 ? cost.toFixed(3) : cost.toFixed(2)}` : ''),
    );
  }
  if (report.summary && report.summary.trim() !== stopText?.trim()) {
    lines.push(`  summary: ${report.summary}`);
  }
  if (report.error) {
    lines.push(`  error: ${report.error}`);
  }
  for (const uri of report.editedFiles ?? []) {
    lines.push(`  edited: ${uri}`);
  }
  for (const p of report.processes ?? []) {
    lines.push(`  background ${p.processId}: ${p.state} (exit code ${p.exitCode ?? '?'}): ${p.command}`);
  }
  if (report.rewindable) {
    lines.push('  rewindable: "Agent: Rewind Run…" restores the files');
  }
  if (report.transcript) {
    lines.push(`  transcript: ${report.transcript}`);
  }
  return lines;
}
