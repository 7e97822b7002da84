import type { Failure } from '../../contracts/runtime.js';
import { EFFECT_RANK, SEVERITY_RANK, type CompiledRule, type PolicySet, type PolicyTarget, type RulesByTarget, type TargetedRule } from '../../policy/policy-set.js';
import { valueAt } from '../../policy/conditions.js';
import type { ScoringConfig } from '../scoring-config.js';
import type { TextMatcher } from '../../policy/detectors.js';
import { ScanCache } from '../scan-cache.js';
import { factLeaves, type EvalView, type Leaf } from '../view.js';

export interface RuleHit {
  readonly rule: CompiledRule;
  /** Where the rule first matched; the matched text itself is never reported, since it may be a secret. */
  readonly path: string;
  /** The detector that matched: a group's member (`e-mail address`), else the rule's matcher label. */
  readonly detector: string;
}

/**
 * Text a `mask` rule matched, to be replaced by `[masked:<rule id>]` wherever it occurs in what the ledger
 * stores (runtime/governor.ts). Engine-internal: never part of a response.
 */
export interface MaskedText {
  readonly text: string;
  readonly rule: string;
}

export interface RuleScan {
  /** Every fired rule, most severe first (precedence: effect, severity, pack name, rule id). */
  readonly hits: readonly RuleHit[];
  readonly blocked: boolean;
  readonly escalated: boolean;
  readonly requestEvidence: boolean;
  readonly retry: boolean;
  /** Sum of the fired rules' amounts. */
  readonly points: number;
  /** Highest policy_sensitivity among fired rules (0 when none fired). */
  readonly sensitivity: number;
  readonly masks: readonly MaskedText[];
}

/** Bounds on what one evaluation collects for masking, so a text stuffed with matches cannot grow it unboundedly. */
const MAX_RANGES_PER_TEXT = 100;
const MAX_MASKS = 1000;

function leavesFor(view: EvalView, target: PolicyTarget): readonly Leaf[] {
  switch (target) {
    case 'output':
      return view.output;
    case 'input':
      return view.input;
    case 'tool_results':
      return view.toolResults;
    case 'params':
      return view.params;
    case 'context':
      return view.context;
    default:
      return factLeaves(view, target);
  }
}

/** Order of scanning; the hits' order comes from precedence, not from this. */
const TARGETS: readonly PolicyTarget[] = ['input', 'context', 'params', 'tool_results', 'output', 'action', 'tools', 'model', 'metadata', 'provider', 'route', 'upstream', 'mcp_method'];

interface Fired {
  path: string;
  detector: string;
}

/** The matched parts of a leaf's value (its text is `key: value`), or the whole value when no ranges are known. */
function maskedParts(leaf: Leaf, ranges: ReadonlyArray<[number, number]> | null): string[] {
  const value = String(leaf.value);
  if (ranges === null || ranges.length === 0) return [value];
  const offset = leaf.text.length - value.length;
  const out: string[] = [];
  for (const [s, e] of ranges) {
    const end = e - offset;
    // A match lying wholly in the key (`password: `) masks the value it names.
    out.push(end <= 0 ? value : value.slice(Math.max(0, s - offset), end));
  }
  return out;
}

/** Precedence among fired rules: the most severe effect first, then severity, pack name, rule id. */
export function compareHits(a: RuleHit, b: RuleHit): number {
  return (
    EFFECT_RANK[b.rule.effect] - EFFECT_RANK[a.rule.effect] ||
    SEVERITY_RANK[b.rule.severity] - SEVERITY_RANK[a.rule.severity] ||
    (a.rule.pack < b.rule.pack ? -1 : a.rule.pack > b.rule.pack ? 1 : 0) ||
    (a.rule.id < b.rule.id ? -1 : a.rule.id > b.rule.id ? 1 : 0)
  );
}

/**
 * Each rule fires at most once, at its first match (a `mask` rule goes on collecting every match for the
 * ledger); hits come back in precedence order.
 */
export function scanRules(set: PolicySet, byTarget: RulesByTarget, view: EvalView, config: ScoringConfig, agentId: string, conditions: readonly CompiledRule[] = [], facts?: () => unknown): RuleScan {
  // No closures in here: a closure capturing a loop's variables makes V8 allocate a context for every
  // iteration, and this runs for every rule four times a proxied call.
  let fired: Map<CompiledRule, Fired> | null = null;
  let masks: MaskedText[] | null = null;
  if (conditions.length > 0 && facts !== undefined) {
    const f = facts();
    for (const rule of conditions) {
      if (rule.appliesTo !== null && !rule.appliesTo(agentId)) continue;
      const at = rule.condition!(f);
      if (at === null) continue;
      (fired ??= new Map()).set(rule, { path: at, detector: rule.matcher.label });
      if (rule.effect === 'mask') {
        const v = valueAt(f, at);
        if (typeof v === 'string' || typeof v === 'number') masks = addMasks(masks, rule, [String(v)]);
      }
    }
  }
  for (let ti = 0; ti < TARGETS.length; ti++) {
    const target = TARGETS[ti];
    const rules = byTarget[target];
    if (rules.length === 0) continue;
    const leaves = leavesFor(view, target);
    if (leaves.length === 0) continue;
    for (let ri = 0; ri < rules.length; ri++) {
      const t = rules[ri];
      const rule = t.rule;
      const masking = rule.effect === 'mask';
      if (fired !== null && fired.has(rule) && !masking) continue;
      if (rule.appliesTo !== null && !rule.appliesTo(agentId)) continue;
      if (rule.test === 'absent') {
        if (!hasNone(t, leaves, agentId)) continue;
        (fired ??= new Map()).set(rule, { path: t.at === null ? target : targetPath(rule, target), detector: rule.matcher.label });
        continue;
      }
      if (!masking) {
        // Not fired yet (see above): its first match is all it records.
        const first = firstHit(t, leaves, agentId);
        if (first !== null) (fired ??= new Map()).set(rule, first);
        continue;
      }
      const matches = maskMatches(t, leaves, agentId);
      for (let i = 0; i < matches.length; i++) {
        const m = matches[i];
        fired ??= new Map();
        if (!fired.has(rule)) fired.set(rule, { path: m.leaf.path, detector: m.detector });
        masks = addMasks(masks, rule, maskedParts(m.leaf, m.ranges));
      }
    }
  }
  if (fired === null) return NO_HITS;
  const hits: RuleHit[] = [];
  let blocked = false;
  let escalated = false;
  let requestEvidence = false;
  let retry = false;
  let points = 0;
  let sensitivity = 0;
  for (const [rule, f] of fired as Map<CompiledRule, Fired>) {
    hits.push({ rule, path: f.path, detector: f.detector });
    if (rule.effect === 'block') blocked = true;
    else if (rule.effect === 'escalate') escalated = true;
    else if (rule.effect === 'request_evidence') requestEvidence = true;
    else if (rule.effect === 'retry') retry = true;
    points += rule.amount;
    const s = config.risk.severity_sensitivity[rule.severity];
    if (s > sensitivity) sensitivity = s;
  }
  hits.sort(compareHits);
  return { hits, blocked, escalated, requestEvidence, retry, points, sensitivity, masks: masks ?? NO_MASKS };
}

/** Whether the target has texts (under the rule's path) and none of them matches. */
function hasNone(t: TargetedRule, leaves: readonly Leaf[], agentId: string): boolean {
  let seen = false;
  for (const leaf of leaves) {
    if (t.at !== null && !t.at(leaf.path)) continue;
    seen = true;
    if (findIn(t.rule.matcher, leaf, agentId) !== -1) return false;
  }
  return seen;
}

/**
 * Texts shorter than this are scanned again rather than looked up (a lookup costs about as much), unless
 * their matcher is `costly`.
 */
const MEMO_MIN_CHARS = 256;

/**
 * What the engine's matchers found, across evaluations (scan-cache.ts says why). 512 K characters hold a
 * long conversation's history; at most ~1 MB of strings, which would otherwise be garbage.
 */
export const SCANS = new ScanCache(512 * 1024, 2048);

/** `m.find(leaf.text)`, remembered by content (per agent) for long texts and costly matchers (SCANS). */
function findIn(m: TextMatcher, leaf: Leaf, agentId: string): number {
  const text = leaf.text;
  return text.length < MEMO_MIN_CHARS && m.costly !== true ? m.find(text) : SCANS.find(m, text, agentId);
}

/** Where a rule first matches (the leaf's path and the member that matched), or null. */
function firstHit(t: TargetedRule, leaves: readonly Leaf[], agentId: string): Fired | null {
  const members = t.rule.members;
  for (let li = 0; li < leaves.length; li++) {
    const leaf = leaves[li];
    if (t.at !== null && !t.at(leaf.path)) continue;
    for (let mi = 0; mi < members.length; mi++) if (findIn(members[mi], leaf, agentId) !== -1) return { path: leaf.path, detector: members[mi].label };
  }
  return null;
}

interface MaskMatch {
  leaf: Leaf;
  detector: string;
  ranges: ReadonlyArray<[number, number]> | null;
}

const NO_MATCHES: readonly MaskMatch[] = Object.freeze([]);

/** Every match of a `mask` rule, with its ranges. */
function maskMatches(t: TargetedRule, leaves: readonly Leaf[], agentId: string): readonly MaskMatch[] {
  const members = t.rule.members;
  let out: MaskMatch[] | null = null;
  for (const leaf of leaves) {
    if (t.at !== null && !t.at(leaf.path)) continue;
    for (const m of members) {
      if (findIn(m, leaf, agentId) === -1) continue;
      (out ??= []).push({ leaf, detector: m.label, ranges: m.findAll === undefined ? null : m.findAll(leaf.text, MAX_RANGES_PER_TEXT) });
    }
  }
  return out ?? NO_MATCHES;
}

/** `masks` with the non-empty `parts` a rule matched added (up to MAX_MASKS in all). */
function addMasks(masks: MaskedText[] | null, rule: CompiledRule, parts: readonly string[]): MaskedText[] {
  const out = masks ?? [];
  for (const text of parts) if (text !== '' && out.length < MAX_MASKS) out.push({ text, rule: rule.id });
  return out;
}

/** The path an `absent` rule names under `target` (`output:summary`), else the target itself. */
function targetPath(rule: CompiledRule, target: string): string {
  const prefix = `${target}:`;
  for (const x of rule.targets) if (x.startsWith(prefix)) return x;
  return target;
}

const NO_MASKS: readonly MaskedText[] = Object.freeze([]);
const NO_HITS: RuleScan = Object.freeze({ hits: Object.freeze([]), blocked: false, escalated: false, requestEvidence: false, retry: false, points: 0, sensitivity: 0, masks: NO_MASKS });

export function hitFailure(check: string, hit: RuleHit): Failure {
  const r = hit.rule;
  return {
    check,
    code: r.id,
    message: `${r.message ?? r.description} [${r.effect}; ${hit.detector}; pack ${r.pack}]`,
    severity: r.severity,
    path: hit.path,
  };
}
