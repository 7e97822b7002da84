import type { Failure } from '../../contracts/runtime.js';
import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { buildView, type EvalView, type Leaf } from '../view.js';
import { SUCCESS_CLAIM } from './consistency.js';
import { SOURCE_KEYS } from './schema.js';

export interface GroundingResult extends CheckResult {
  /** Checkable claims found in the output: digit-bearing tokens, cited sources, an unbacked success claim. */
  readonly claims: number;
  readonly grounded: number;
  readonly applicable: boolean;
}

// Runs of word characters, dots, commas and hyphens. A single character class with `+` cannot backtrack.
const TOKEN = /[\w.,-]+/g;
const HAS_DIGIT = /\d/;
const NUMBER = /^\d+(?:\.\d+)?$/;
const THOUSANDS = /^\d{1,3}(?:,\d{3})+(?:\.\d+)?$/;
const EDGE_PUNCT = /^[.,_-]+|[.,_-]+$/g;
const ID_PARTS = /[-_./]/;
const ID_SPLIT = /[-_./]/;
const COMMAS = /,/g;
const MAX_CLAIMS_REPORTED = 5;

/** Canonical form of a token: numbers by value (19.90 = 19.9, 0042 = 42), everything else lowercased. */
function canon(token: string): string {
  return NUMBER.test(token) ? String(Number(token)) : token.toLowerCase();
}

/** Splits text into canonical digit-bearing tokens, handing each to `emit`. */
function digitTokens(text: string, emit: (t: string) => void): void {
  // Most texts hold no digit at all: one search instead of an array of every word in them.
  if (!HAS_DIGIT.test(text)) return;
  const raw = text.match(TOKEN);
  if (raw === null) return;
  for (let t of raw) {
    if (!HAS_DIGIT.test(t)) continue;
    t = t.replace(EDGE_PUNCT, '');
    if (t === '') continue;
    if (t.includes(',')) {
      if (THOUSANDS.test(t)) t = t.replace(COMMAS, '');
      else {
        for (const part of t.split(',')) if (part !== '' && HAS_DIGIT.test(part)) emit(canon(part.replace(EDGE_PUNCT, '')));
        continue;
      }
    }
    emit(canon(t));
  }
}

interface Evidence {
  tokens: Set<string>;
  /** Lowercased evidence text, for ids and dates that tools embed in longer strings. */
  haystack: string;
  names: Set<string>;
}

function evidenceOf(input: EngineInput, view: EvalView): Evidence {
  const tokens = new Set<string>();
  const add = (t: string) => {
    tokens.add(t);
    // "ORD-1234" also backs a bare "1234", and "2026-12-01T10" a bare "2026-12-01" via the haystack.
    if (ID_PARTS.test(t)) for (const p of t.split(ID_SPLIT)) if (p !== '' && HAS_DIGIT.test(p)) tokens.add(canon(p));
  };
  const parts: string[] = [];
  for (const leaf of view.toolResults) {
    if (leaf.key === 'error') continue;
    if (typeof leaf.value === 'number') add(String(leaf.value));
    else if (typeof leaf.value === 'string') {
      digitTokens(leaf.value, add);
      parts.push(leaf.value);
    }
  }
  // What the user said is grounded by the request itself.
  digitTokens(input.input, add);
  parts.push(input.input);
  const names = new Set<string>();
  for (const r of input.tool_results) names.add(r.name.toLowerCase());
  for (const t of input.tools_called) names.add(t.name.toLowerCase());
  return { tokens, haystack: parts.join('\n').toLowerCase(), names };
}

/**
 * Failures end up in responses and audit rows, and an ungrounded token may be a secret or an id number:
 * only short plain numbers (prices, quantities) are quoted.
 */
function describe(token: string): string {
  return NUMBER.test(token) && token.length <= 8 ? `"${token}"` : `a ${token.length}-character value`;
}

function sourceLabel(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as Record<string, unknown>;
    for (const k of ['tool', 'name', 'id', 'url', 'source']) if (typeof o[k] === 'string') return o[k] as string;
  }
  return null;
}

/**
 * Evidence: the share of the output's checkable claims that tool results (or the user's own input) back.
 * Claims are digit-bearing tokens (numbers, ids, dates), each cited source, and, when no tool returned
 * anything, an assertion that an action succeeded.
 */
export function groundingCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): GroundingResult {
  if (input.output === null) return { score: 100, failures: [], claims: 0, grounded: 0, applicable: false };
  const c = ctx.config.evidence;
  const ev = evidenceOf(input, view);
  const failures: Failure[] = [];
  let claims = 0;
  let grounded = 0;
  let ungroundedReported = 0;
  const seen = new Set<string>();

  const claimTokens = (leaf: Leaf) => {
    const text = typeof leaf.value === 'number' ? String(leaf.value) : (leaf.value as string);
    digitTokens(text, (t) => {
      if (seen.has(t)) return;
      seen.add(t);
      if (NUMBER.test(t) && Number(t) < c.ignore_integers_below && Number.isInteger(Number(t))) return;
      claims++;
      if (ev.tokens.has(t) || (!NUMBER.test(t) && t.length >= 4 && ev.haystack.includes(t))) grounded++;
      else if (ungroundedReported++ < MAX_CLAIMS_REPORTED) {
        failures.push({ check: 'grounding', code: 'ungrounded_value', message: `${describe(t)} is not backed by any tool result or the input`, severity: 'warn', path: leaf.path });
      }
    });
  };

  let successClaim = false;
  for (const leaf of view.output) {
    if (SOURCE_KEYS.has(leaf.root)) continue;
    if (typeof leaf.value === 'number') claimTokens(leaf);
    else if (typeof leaf.value === 'string') {
      claimTokens(leaf);
      if (!successClaim && SUCCESS_CLAIM.test(leaf.value)) successClaim = true;
    }
  }

  for (const key of SOURCE_KEYS) {
    const list = input.output[key];
    if (!Array.isArray(list)) continue;
    list.forEach((item, i) => {
      const label = sourceLabel(item);
      claims++;
      const l = label?.toLowerCase() ?? '';
      if (l !== '' && (ev.names.has(l) || (l.length >= 4 && ev.haystack.includes(l)))) grounded++;
      else failures.push({ check: 'grounding', code: 'uncited_source', message: `cited source ${label === null ? '(unreadable)' : `"${label}"`} is neither a tool that ran nor found in any tool result`, severity: 'warn', path: `output.${key}[${i}]` });
    });
  }

  if (successClaim && input.tool_results.length === 0) {
    claims++;
    failures.push({ check: 'grounding', code: 'unbacked_success_claim', message: 'output asserts that an action succeeded, but no tool result backs it', severity: 'warn', path: 'output' });
  }

  if (ungroundedReported > MAX_CLAIMS_REPORTED) {
    failures.push({ check: 'grounding', code: 'ungrounded_value', message: `${ungroundedReported - MAX_CLAIMS_REPORTED} more ungrounded values`, severity: 'warn', path: 'output' });
  }
  const score = claims === 0 ? c.no_claims : Math.round((1000 * grounded) / claims) / 10;
  return { score, failures, claims, grounded, applicable: true };
}
