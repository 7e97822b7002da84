import type { Failure } from '../../contracts/runtime.js';
import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { buildView, type EvalView, type Leaf, type Scalar } from '../view.js';
import { clamp } from '../score-math.js';
import { SOURCE_KEYS } from './schema.js';

export interface ConsistencyResult extends CheckResult {
  /**
   * 0-100, higher means MORE contradiction: 0 = none found, 100 = certain. It is the one score whose
   * direction is reversed, because it measures a defect; consistency_score already has it subtracted.
   */
  readonly contradiction_score: number;
  /** False at pre-check: there is no output to be consistent or contradictory. */
  readonly applicable: boolean;
}

// Phrases that assert an action went through. Used both here and by grounding.
export const SUCCESS_CLAIM =
  /\b(?:success(?:ful(?:ly)?)?|succeeded|completed|done|confirmed|shipped|delivered|processed|approved|refunded|created|updated|sent|booked|scheduled|cancell?ed|paid)\b/i;
// Phrases by which an output admits that something went wrong; they defuse the success/error contradiction.
export const FAILURE_ACK =
  /\b(?:errors?|fail(?:s|ed|ure)?|unable|cannot|can['’]t|could\s?n(?:o|'|’)t|unfortunately|sorry|not\s+(?:able|possible|available|found)|unavailable)\b/i;

// Status vocabulary of orders, payments and tickets; a free-text mention of one that no tool returned is a
// contradiction when a tool did return a status from this vocabulary.
const STATUS_WORDS =
  /\b(?:pending|processing|shipped|delivered|cancell?ed|refunded|returned|failed|approved|rejected|declined|paid|unpaid|overdue|completed|in\s+transit|on\s+hold|expired|backordered)\b/gi;
const STATUS_KEYS: ReadonlySet<string> = new Set(['status', 'state', 'order_status', 'payment_status', 'delivery_status']);
const FAILED_STATUS: ReadonlySet<string> = new Set(['failed', 'failure', 'error']);
const SUCCESS_FLAGS = ['success', 'ok', 'succeeded'] as const;

// Prose-carrying keys: their values legitimately differ from a tool's value of the same name.
const PROSE_KEYS: ReadonlySet<string> = new Set([
  'answer', 'text', 'content', 'message', 'summary', 'description', 'title', 'note', 'notes', 'comment', 'reason',
  'explanation', 'details', 'error', 'sources', 'citations', 'references',
]);
const MAX_COMPARED_CHARS = 64;

function norm(v: Scalar): string {
  return typeof v === 'string' ? v.trim().toLowerCase() : String(v);
}

function normStatus(s: string): string {
  const w = s.toLowerCase().replace(/\s+/g, ' ');
  return w === 'canceled' ? 'cancelled' : w;
}

function isProse(leaf: Leaf): boolean {
  return typeof leaf.value === 'string' && !SOURCE_KEYS.has(leaf.root) && leaf.value !== '';
}

export function consistencyCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): ConsistencyResult {
  if (input.output === null) return { score: 100, failures: [], contradiction_score: 0, applicable: false };
  const c = ctx.config.consistency;
  const failures: Failure[] = [];
  let structural = 0;
  let contradiction = 0;
  const contradict = (code: string, message: string, points: number, path?: string) => {
    contradiction += points;
    failures.push(path === undefined ? { check: 'consistency', code, message, severity: 'error' } : { check: 'consistency', code, message, severity: 'error', path });
  };

  // Structural: calls and results should pair up.
  if (input.tool_results.length > 0) {
    const called = new Set<string>();
    for (const t of input.tools_called) called.add(t.name);
    const answered = new Set<string>();
    input.tool_results.forEach((r, i) => {
      answered.add(r.name);
      if (!called.has(r.name)) {
        structural += c.result_without_call_penalty;
        failures.push({ check: 'consistency', code: 'result_without_call', message: `result of "${r.name}", which was never called`, severity: 'warn', path: `tool_results[${i}]` });
      }
    });
    input.tools_called.forEach((t, i) => {
      if (!answered.has(t.name)) {
        structural += c.call_without_result_penalty;
        failures.push({ check: 'consistency', code: 'call_without_result', message: `call of "${t.name}" has no result`, severity: 'info', path: `tools_called[${i}]` });
      }
    });
  }

  let claimsSuccess = false;
  let acksFailure = false;
  for (const leaf of view.output) {
    if (!isProse(leaf)) continue;
    const s = leaf.value as string;
    if (!claimsSuccess && SUCCESS_CLAIM.test(s)) claimsSuccess = true;
    if (!acksFailure && FAILURE_ACK.test(s)) acksFailure = true;
  }
  const out = input.output;
  let flag: boolean | null = null;
  for (const k of SUCCESS_FLAGS) if (typeof out[k] === 'boolean') { flag = out[k] as boolean; break; }

  // 1. Success asserted while a tool reported an error, and the output does not admit it.
  if ((claimsSuccess || flag === true) && !acksFailure) {
    const errored = input.tool_results.findIndex((r) => typeof r.error === 'string' && r.error !== '');
    if (errored !== -1) {
      contradict('success_despite_tool_error', `output asserts success but tool "${input.tool_results[errored].name}" returned an error`, c.contradiction.success_despite_tool_error, `tool_results[${errored}].error`);
    }
  }

  // 2. An output field whose tool counterpart (same key) holds a different value.
  if (view.toolResults.length > 0) {
    let byKey: Map<string, Set<string>> | null = null;
    const statuses = new Set<string>();
    for (const leaf of view.toolResults) {
      if (leaf.key === '' || leaf.value === null || PROSE_KEYS.has(leaf.key)) continue;
      let set = (byKey ??= new Map()).get(leaf.key);
      if (set === undefined) byKey.set(leaf.key, (set = new Set<string>()));
      set.add(norm(leaf.value));
      if (STATUS_KEYS.has(leaf.key) && typeof leaf.value === 'string') statuses.add(normStatus(leaf.value.trim()));
    }
    const reported = new Set<string>();
    if (byKey !== null) {
      for (const leaf of view.output) {
        if (leaf.value === null || PROSE_KEYS.has(leaf.key) || SOURCE_KEYS.has(leaf.root) || reported.has(leaf.key)) continue;
        if (typeof leaf.value === 'string' && leaf.value.length > MAX_COMPARED_CHARS) continue;
        const known = byKey.get(leaf.key);
        if (known !== undefined && !known.has(norm(leaf.value))) {
          reported.add(leaf.key);
          contradict('value_mismatch', `${leaf.path} differs from the "${leaf.key}" the tools returned`, c.contradiction.value_mismatch, leaf.path);
        }
      }
    }
    // 3. Free text naming a status that no tool returned, when the tools did return one.
    let vocab = false;
    for (const s of statuses) if (s.search(STATUS_WORDS) === 0) { vocab = true; break; }
    if (vocab) {
      let mentioned = false;
      let agrees = false;
      for (const leaf of view.output) {
        if (!isProse(leaf) || STATUS_KEYS.has(leaf.key)) continue;
        const words = (leaf.value as string).match(STATUS_WORDS);
        if (words === null) continue;
        mentioned = true;
        for (const w of words) if (statuses.has(normStatus(w))) { agrees = true; break; }
        if (agrees) break;
      }
      if (mentioned && !agrees) {
        contradict('status_mismatch', `output text states a status the tools did not return (tools: ${[...statuses].join(', ')})`, c.contradiction.status_mismatch);
      }
    }
  }

  // 4. The output contradicting itself: a success flag beside an error, or a failure flag beside a success claim.
  if (flag === true) {
    const err = out.error;
    const status = typeof out.status === 'string' ? out.status.trim().toLowerCase() : '';
    if ((err !== undefined && err !== null && err !== '' && err !== false) || FAILED_STATUS.has(status)) {
      contradict('self_contradiction', 'output reports success and an error at once', c.contradiction.self_contradiction, 'output');
    }
  } else if (flag === false && claimsSuccess && !acksFailure) {
    contradict('self_contradiction', 'output reports failure but its text asserts success', c.contradiction.self_contradiction, 'output');
  }

  const contradiction_score = clamp(contradiction);
  return { score: clamp(100 - structural - contradiction_score), failures, contradiction_score, applicable: true };
}
