import type { z } from 'zod';

/**
 * One reason a file cannot be used, with where it is: `path` names the field (`rules[2].effect`, or
 * `(root)`), `line` and `column` (1-based) point into the file's text, or are null when the text gives no
 * position (a directory that cannot be read, a pack sent as a JSON object).
 */
export interface PolicyProblem {
  readonly path: string;
  readonly line: number | null;
  readonly column: number | null;
  readonly message: string;
}

/** A problem as an editor-clickable line: `file:line:column: path: message` (no position: `file: path: message`). */
export function formatProblem(origin: string, p: PolicyProblem): string {
  const where = p.line === null ? origin : `${origin}:${p.line}:${p.column ?? 1}`;
  return p.path === '' ? `${where}: ${p.message}` : `${where}: ${p.path}: ${p.message}`;
}

/** A problem given as `path: message` text (older call sites) read into its parts, with no position. */
function fromText(text: string): PolicyProblem {
  const m = /^((?:\(root\)|[A-Za-z_][\w]*(?:\[\d+\]|\.[A-Za-z_][\w]*)*)): (.*)$/s.exec(text);
  return m ? { path: m[1]!, line: null, column: null, message: m[2]! } : { path: '', line: null, column: null, message: text };
}

/**
 * A policy pack, golden file or manifest file that cannot be used. The message names the file and, per
 * problem, the line, column and path; `located` carries the same as data, so that the policy API can
 * answer them and the reload reporter can log them field by field.
 */
export class PolicyLoadError extends Error {
  /** Each problem as its text line (what the message joins). */
  readonly problems: readonly string[];
  readonly located: readonly PolicyProblem[];
  constructor(
    readonly origin: string,
    problems: ReadonlyArray<string | PolicyProblem>,
  ) {
    const located = problems.map((p) => (typeof p === 'string' ? fromText(p) : p));
    const lines = located.map((p) => formatProblem(origin, p));
    super(lines.join('; '));
    this.name = 'PolicyLoadError';
    this.located = located;
    this.problems = lines;
  }
}

export function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out === '' ? '(root)' : out;
}

export function zodProblems(error: z.ZodError): string[] {
  return error.issues.map((i) => `${issuePath(i.path)}: ${i.message}`);
}
