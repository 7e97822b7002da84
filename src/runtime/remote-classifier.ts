import { Agent } from '../net/undici-dispatchers.js';
import type { DetectorSettings } from '../config/detector-settings.js';
import type { EngineInput, ExternalDetectorVerdict } from '../engine/types.js';
import type { RemoteClassifierPort } from './governor.js';

/** Answers larger than this are not a classifier's verdict; reading stops there. */
const MAX_ANSWER_BYTES = 256 * 1024;

/** Labels of the benign class: a score given with one of them is the probability of "not an attack". */
const BENIGN = new Set(['benign', 'safe', 'legit', 'legitimate', 'negative', 'label_0', 'ok']);

class AnswerError extends Error {}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));

/**
 * prompt-guard: `{score}`, `{label, score}`, or a list of `{label, score}` (Hugging Face text-classification
 * output, optionally nested once). The entry with the highest score wins; a benign label's score counts as 1 - score.
 */
function promptGuardVerdict(body: unknown): { score: number; label: string | null } {
  let entries: unknown[] = Array.isArray(body) ? body : [body];
  if (entries.length === 1 && Array.isArray(entries[0])) entries = entries[0] as unknown[];
  let best: { score: number; label: string | null } | null = null;
  for (const e of entries) {
    if (typeof e !== 'object' || e === null) continue;
    const score = num((e as Record<string, unknown>).score);
    if (score === null) continue;
    const label = typeof (e as Record<string, unknown>).label === 'string' ? ((e as Record<string, unknown>).label as string) : null;
    if (best === null || score > best.score) best = { score, label };
  }
  if (best === null) throw new AnswerError('answer has no numeric "score"');
  const benign = best.label !== null && BENIGN.has(best.label.toLowerCase());
  return { score: clamp01(benign ? 1 - best.score : best.score), label: best.label };
}

/** llm-guard: `{is_valid, scanners: {Name: risk score}}`: the highest scanner score, floored at 0. */
function llmGuardVerdict(body: unknown): { score: number; label: string | null } {
  if (typeof body !== 'object' || body === null) throw new AnswerError('answer is not an object');
  const b = body as Record<string, unknown>;
  let score: number | null = null;
  let label: string | null = null;
  if (typeof b.scanners === 'object' && b.scanners !== null) {
    for (const [name, v] of Object.entries(b.scanners as Record<string, unknown>)) {
      const s = num(v);
      if (s !== null && (score === null || s > score)) [score, label] = [s, name];
    }
  }
  if (b.is_valid === false && (score === null || score <= 0)) return { score: 1, label: label ?? 'is_valid=false' };
  if (score === null) {
    if (b.is_valid === true) return { score: 0, label: null };
    throw new AnswerError('answer has neither "scanners" nor "is_valid"');
  }
  return { score: clamp01(score), label };
}

/**
 * openai-moderation: `{results: [{flagged, category_scores}]}`. A flagged result counts as 1 (the
 * provider's own thresholds decided); otherwise the highest category score.
 */
function moderationVerdict(body: unknown): { score: number; label: string | null } {
  const results = (body as { results?: unknown } | null)?.results;
  const r = Array.isArray(results) ? (results[0] as Record<string, unknown> | undefined) : undefined;
  if (typeof r !== 'object' || r === null) throw new AnswerError('answer has no results[0]');
  let score = 0;
  let label: string | null = null;
  if (typeof r.category_scores === 'object' && r.category_scores !== null) {
    for (const [name, v] of Object.entries(r.category_scores as Record<string, unknown>)) {
      const s = num(v);
      if (s !== null && s > score) [score, label] = [s, name];
    }
  }
  if (r.flagged === true) return { score: 1, label: label ?? 'flagged' };
  if (typeof r.flagged !== 'boolean') throw new AnswerError('results[0].flagged is not a boolean');
  return { score: clamp01(score), label };
}

const VERDICT = { 'prompt-guard': promptGuardVerdict, 'llm-guard': llmGuardVerdict, 'openai-moderation': moderationVerdict } as const;

function stringify(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === undefined || v === null) return '';
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return '';
  }
}

/**
 * What the classifier is sent: only what an injection targets, the user's input, the tool results the
 * model reads and the other context (system prompt, earlier turns, documents), never the output, the
 * metadata or the identity of the user. At most `maxChars`, shared fairly: each non-empty part gets an
 * equal share, and what a short part leaves goes to the longer ones, so padding one part cannot push
 * another out entirely.
 */
export function classifierText(input: EngineInput, maxChars: number): string {
  const results = input.tool_results.map((r) => [stringify(r.output), r.error ?? ''].filter((s) => s !== '').join('\n')).filter((s) => s !== '');
  const parts = [input.input, results.join('\n\n'), input.context.map((c) => c.text ?? '').filter((s) => s !== '').join('\n\n')].filter((s) => s !== '');
  if (parts.length === 0) return '';
  const sep = 2 * (parts.length - 1);
  let budget = Math.max(0, maxChars - sep);
  const share = new Array<number>(parts.length).fill(0);
  let open = parts.map((_, i) => i);
  while (budget > 0 && open.length > 0) {
    const each = Math.max(1, Math.floor(budget / open.length));
    const still: number[] = [];
    for (const i of open) {
      const take = Math.min(each, parts[i].length - share[i], budget);
      share[i] += take;
      budget -= take;
      if (share[i] < parts[i].length) still.push(i);
    }
    open = still;
  }
  return parts.map((p, i) => p.slice(0, share[i])).join('\n\n');
}

/**
 * The optional remote classifier (GOV_DETECTOR_URL): one POST per decision, bounded by the timeout,
 * through a keep-alive pool. It never throws: a timeout or any failure is a verdict with that status, and
 * the engine applies the failure mode. Not constructed at all when GOV_DETECTOR_URL is unset.
 */
export class RemoteClassifier implements RemoteClassifierPort {
  private readonly dispatcher: Agent;
  private readonly headers: Record<string, string>;
  /** GOV_DETECTOR_URL split as a dispatcher takes it. */
  private readonly origin: string;
  private readonly path: string;

  constructor(private readonly s: DetectorSettings) {
    const url = new URL(s.url);
    this.origin = url.origin;
    this.path = `${url.pathname}${url.search}`;
    this.dispatcher = new Agent({ connections: 64, keepAliveTimeout: 30_000, connectTimeout: Math.max(s.timeoutMs, 10) });
    this.headers = { 'content-type': 'application/json', accept: 'application/json' };
    if (s.token !== null) this.headers.authorization = `Bearer ${s.token}`;
  }

  private verdict(status: ExternalDetectorVerdict['status'], score: number | null, label: string | null, error?: string): ExternalDetectorVerdict {
    const v: ExternalDetectorVerdict = { kind: this.s.kind, status, score, label, threshold: this.s.threshold, failure_mode: this.s.failureMode };
    if (error !== undefined) v.error = error;
    return v;
  }

  private body(text: string): string {
    switch (this.s.kind) {
      case 'prompt-guard':
        return JSON.stringify({ text });
      case 'llm-guard':
        return JSON.stringify({ prompt: text });
      case 'openai-moderation':
        return JSON.stringify({ model: this.s.model, input: text });
    }
  }

  textOf(input: EngineInput): string {
    return classifierText(input, this.s.maxChars);
  }

  async classifyText(text: string): Promise<ExternalDetectorVerdict> {
    if (text === '') return this.verdict('skipped', null, null);
    const signal = AbortSignal.timeout(this.s.timeoutMs);
    try {
      const res = await this.dispatcher.request({ origin: this.origin, path: this.path, method: 'POST', headers: this.headers, body: this.body(text), signal });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_ANSWER_BYTES) {
          res.body.destroy();
          return this.verdict('error', null, null, `answer larger than ${MAX_ANSWER_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      if (res.statusCode < 200 || res.statusCode > 299) return this.verdict('error', null, null, `HTTP ${res.statusCode}`);
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return this.verdict('error', null, null, 'answer is not JSON');
      }
      const { score, label } = VERDICT[this.s.kind](parsed);
      return this.verdict('ok', score, label);
    } catch (e) {
      if (signal.aborted) return this.verdict('timeout', null, null, `no answer within ${this.s.timeoutMs} ms`);
      if (e instanceof AnswerError) return this.verdict('error', null, null, e.message);
      // The code only (ECONNREFUSED, UND_ERR_SOCKET, ...): a message could carry the URL's credentials.
      return this.verdict('error', null, null, (e as NodeJS.ErrnoException).code ?? 'request failed');
    }
  }

  close(): Promise<void> {
    return this.dispatcher.close();
  }
}

/**
 * A warning for a failed classifier call, at most one per `everyMs` with the count of those suppressed: an
 * outage of the classifier must not flood the log with one line per call.
 */
export function classifierFailureLog(warn: (fields: Record<string, unknown>, msg: string) => void, everyMs = 10_000): (v: ExternalDetectorVerdict) => void {
  let last = -Infinity;
  let suppressed = 0;
  return (v) => {
    const now = performance.now();
    if (now - last < everyMs) {
      suppressed++;
      return;
    }
    warn({ detector: v.kind, status: v.status, reason: v.error, failure_mode: v.failure_mode, suppressed }, 'remote classifier unavailable');
    last = now;
    suppressed = 0;
  };
}
