/**
 * The chat view's conversation: the server's `agentLsp/stream` events of the chat's runs folded
 * into items (the user's prompts, Markdown answers, thinking, tool calls, approvals, quiet
 * lines, stops) that the webview draws and updates by id.
 */
import type { HunkInfo, HunkReview } from '../hunkLens';
import type { StreamEvent } from '../stream';
import { renderMarkdown } from './markdown';

export type ChatItem =
  | { kind: 'user'; id: string; runId: string; text: string; canFork: boolean }
  | { kind: 'text' | 'thinking'; id: string; raw: string }
  | { kind: 'tool'; id: string; tool: string; args: string; result?: string; ok?: boolean; agent?: string }
  | {
      kind: 'approval';
      id: string;
      text: string;
      state: string;
      /** Set while the extension waits for the user's answer: the buttons it rendered. */
      buttons?: string[];
      answerKey?: string;
      hasDiff?: boolean;
      /** An edit the user reviews in VS Code's Refactor Preview (Decision 79). */
      inPreview?: boolean;
      /** An edit's hunks, shown inline, each kept or rejected (issue 35). */
      review?: ChatReview;
    }
  | { kind: 'quiet'; id: string; text: string }
  | { kind: 'stop'; id: string; text: string; reason: string };

/** One hunk of an edit as the view shows it: its `@@` header and its diff lines. */
export interface ChatHunk {
  index: number;
  header: string;
  lines: string[];
}

export interface ChatReview {
  files: { name: string; hunks: ChatHunk[] }[];
  total: number;
  rejected: number[];
}

/** How many lines of one hunk the view shows ("Show diff" has them all). */
const HUNK_LINES = 200;

/** An approval's hunk review as the view draws it (plain text: the webview makes text nodes). */
export function reviewOf(review: HunkReview): ChatReview {
  return {
    files: review.files.map((f) => ({ name: f.name, hunks: splitHunks(f.diff, f.hunks) })),
    total: review.total,
    rejected: [...review.rejected].sort((a, b) => a - b),
  };
}

/** A file's unified diff cut at its `@@` lines, each matched to the offered hunk it heads. */
function splitHunks(diff: string, hunks: HunkInfo[]): ChatHunk[] {
  const left = [...hunks];
  const found: ChatHunk[] = [];
  let current: ChatHunk | undefined;
  for (const line of diff.split('\n')) {
    if (line.startsWith('@@')) {
      const at = left.findIndex((h) => h.header.trim() === line.trim());
      const hunk = left.splice(Math.max(at, 0), 1)[0];
      current = hunk ? { index: hunk.index, header: line, lines: [] } : undefined;
      if (current) {
        found.push(current);
      }
    } else if (!current || line === '') {
      continue; // the file's `---`/`+++` lines, the diff's last newline
    } else if (current.lines.length < HUNK_LINES) {
      current.lines.push(line);
    } else if (current.lines.length === HUNK_LINES) {
      current.lines.push('…');
    }
  }
  // a hunk the diff does not show still gets its toggle
  found.push(...left.map((h) => ({ index: h.index, header: h.header, lines: [] })));
  return found.sort((a, b) => a.index - b.index);
}

/** A streamed answer longer than this is cut at a paragraph break into a finished part. */
const SPLIT_AT = 4000;

/** The last paragraph break (a blank line outside a code fence), or 0. */
function safeCut(raw: string): number {
  let inFence = false;
  let cut = 0;
  let offset = 0;
  for (const line of raw.split('\n')) {
    const end = offset + line.length + 1;
    if (/^\s{0,3}(```|~~~)/.test(line)) {
      inFence = !inFence;
    } else if (!inFence && line.trim() === '' && offset > 0 && end < raw.length) {
      cut = end;
    }
    offset = end;
  }
  return cut;
}

/** How many lines of a tool's result the entry shows. */
const RESULT_LINES = 12;

interface RunState {
  /** Raw Markdown of the segment being streamed, and its item's id. */
  segment?: { id: string; kind: 'text' | 'thinking'; raw: string };
  counter: number;
}

export class Conversation {
  readonly items = new Map<string, ChatItem>();
  private readonly runs = new Map<string, RunState>();

  constructor(
    private readonly changed: (item: ChatItem) => void,
    private readonly editPreview: () => boolean = () => false,
  ) {}

  clear(): void {
    this.items.clear();
    this.runs.clear();
  }

  userPrompt(runId: string, text: string): void {
    this.put({ kind: 'user', id: `${runId}:prompt`, runId, text, canFork: true });
  }

  /** One stream event of a chat run; unknown kinds are ignored (Decision 90). */
  handle(event: StreamEvent): void {
    const run = this.run(event.runId);
    const sub = event.agentId && event.agentId !== 'main' ? event.agentId : undefined;
    switch (event.kind) {
      case 'text':
      case 'thinking':
        if (!sub) {
          this.stream(event.runId, run, event.kind, event.text ?? '');
        }
        return;
      case 'toolCall':
        run.segment = undefined;
        this.put({
          kind: 'tool',
          id: `${event.runId}:call:${event.callId ?? run.counter++}`,
          tool: event.tool ?? 'tool',
          args: formatArgs(event.arguments),
          agent: sub,
        });
        return;
      case 'toolResult':
        this.toolResult(event);
        return;
      case 'approval':
        run.segment = undefined;
        this.approvalEvent(event);
        return;
      case 'steer':
        run.segment = undefined;
        this.quiet(event.runId, run, `» ${event.text ?? ''}`);
        return;
      case 'hook':
      case 'compaction':
        run.segment = undefined;
        this.quiet(event.runId, run, `${event.kind === 'hook' ? '⚑' : '≡'} ${(event.text ?? '').trim()}`);
        return;
      case 'stop':
        run.segment = undefined;
        this.put({ kind: 'stop', id: `${event.runId}:stop`, text: stopText(event), reason: event.report?.stopReason ?? '' });
        return;
    }
  }

  /** The extension waits for an answer to this approval: draw the buttons it offers. */
  askApproval(runId: string, callId: string, message: string, buttons: string[], answerKey: string, hasDiff: boolean): void {
    const id = `${runId}:approval:${callId}`;
    const known = this.items.get(id);
    const text = known?.kind === 'approval' ? known.text : message;
    this.put({ kind: 'approval', id, text, state: 'pending', buttons, answerKey, hasDiff });
  }

  /** The request was answered or withdrawn: the buttons go. */
  approvalSettled(runId: string, callId: string, state: string): void {
    const item = this.items.get(`${runId}:approval:${callId}`);
    if (item?.kind === 'approval') {
      this.put({ ...item, buttons: undefined, answerKey: undefined, state: item.state === 'pending' ? state : item.state });
    }
  }

  /** The hunks kept and rejected changed (in the view or in the diff editor). */
  hunksChanged(runId: string, callId: string, review: ChatReview): void {
    const item = this.items.get(`${runId}:approval:${callId}`);
    if (item?.kind === 'approval') {
      this.put({ ...item, review });
    }
  }

  private approvalEvent(event: StreamEvent): void {
    const id = `${event.runId}:approval:${event.callId ?? ''}`;
    const known = this.items.get(id);
    const text = (event.text ?? `${event.tool ?? ''}: ${event.detail ?? ''}`).trim();
    const state = event.state ?? 'pending';
    if (known?.kind === 'approval') {
      const waiting = state === 'pending' ? { buttons: known.buttons, answerKey: known.answerKey } : {};
      this.put({ ...known, text: text || known.text, state, buttons: undefined, answerKey: undefined, ...waiting });
    } else {
      const hasDiff = Boolean(event.diff || event.files?.length);
      this.put({ kind: 'approval', id, text, state, hasDiff, inPreview: hasDiff && this.editPreview() });
    }
  }

  private toolResult(event: StreamEvent): void {
    const id = `${event.runId}:call:${event.callId ?? ''}`;
    const known = this.items.get(id);
    const lines = (event.text ?? '').split('\n');
    const result = lines.slice(0, RESULT_LINES).join('\n') + (lines.length > RESULT_LINES ? '\n…' : '');
    if (known?.kind === 'tool') {
      this.put({ ...known, result, ok: event.ok !== false });
    } else {
      this.put({ kind: 'tool', id, tool: event.tool ?? 'tool', args: '', result, ok: event.ok !== false });
    }
  }

  private stream(runId: string, run: RunState, kind: 'text' | 'thinking', text: string): void {
    if (!text) {
      return;
    }
    if (!run.segment || run.segment.kind !== kind) {
      run.segment = { id: `${runId}:${kind}:${run.counter++}`, kind, raw: '' };
    }
    run.segment.raw += text;
    const cut = run.segment.raw.length > SPLIT_AT ? safeCut(run.segment.raw) : 0;
    if (cut > 0) {
      // The finished part is drawn once; only the tail is re-rendered while it streams.
      const rest = run.segment.raw.slice(cut);
      this.put({ kind, id: run.segment.id, raw: run.segment.raw.slice(0, cut) });
      run.segment = { id: `${runId}:${kind}:${run.counter++}`, kind, raw: rest };
    }
    this.put({ kind, id: run.segment.id, raw: run.segment.raw });
  }

  private quiet(runId: string, run: RunState, text: string): void {
    this.put({ kind: 'quiet', id: `${runId}:quiet:${run.counter++}`, text });
  }

  private run(runId: string): RunState {
    let run = this.runs.get(runId);
    if (!run) {
      run = { counter: 0 };
      this.runs.set(runId, run);
    }
    return run;
  }

  private put(item: ChatItem): void {
    this.items.set(item.id, item);
    this.changed(item);
  }
}

function formatArgs(args: unknown): string {
  if (args === undefined || args === null) {
    return '';
  }
  const text = typeof args === 'string' ? args : JSON.stringify(args, null, 1);
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
}

function stopText(event: StreamEvent): string {
  const report = event.report;
  const reason = report?.stopReason ?? 'stopped';
  const parts = [reason];
  if (report?.turns !== undefined) {
    parts.push(`${report.turns} turn${report.turns === 1 ? '' : 's'}`);
  }
  if (report?.editedFiles?.length) {
    parts.push(`edited ${report.editedFiles.length} file${report.editedFiles.length === 1 ? '' : 's'}`);
  }
  if (report?.error) {
    parts.push(report.error);
  }
  return parts.join(' · ');
}

/** What the webview gets for an item: Markdown rendered to HTML (without raw HTML). */
export function toWire(item: ChatItem): object {
  if (item.kind === 'text' || item.kind === 'thinking') {
    return { kind: item.kind, id: item.id, html: renderMarkdown(item.raw) };
  }
  return item;
}
