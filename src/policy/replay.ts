import picomatch from 'picomatch';
import type { RowHeader } from '../contracts/audit.js';
import type { Outcome } from '../contracts/common.js';
import type { Manifest } from '../contracts/manifest.js';
import { adversarialCheck } from '../engine/checks/adversarial.js';
import { policyCheck } from '../engine/checks/policy.js';
import { evaluate } from '../engine/pipeline.js';
import type { EngineContext, EngineInput, EngineResult, ExternalDetectorVerdict } from '../engine/types.js';
import type { OutputSchemaValidator } from './output-schema.js';
import { buildView } from '../engine/view.js';
import type { RuleSet } from '../runtime/governor.js';
import { holdBlockedPreCheck, storedEngineInput, type StoredPayload } from '../runtime/stored-input.js';
import type { PolicySet } from './policy-set.js';
import type { PolicyDifference } from './replay-difference.js';

/**
 * `gov policy replay`: re-decides stored executions under a candidate policy set and counts how the
 * decisions would change, before anyone activates it. Pure apart from the row source and the clock passed
 * in: the CLI feeds it rows read from the LMDB ledger (replay-source.ts), tests may feed it any rows.
 *
 * What is compared (docs/policies.md, Replay):
 * - `transitions`: stored outcome (the row's `decision`) -> candidate outcome. What the issue asks: which
 *   recorded decisions would have come out otherwise.
 * - `baseline_transitions`: baseline outcome -> candidate outcome, both re-evaluated here on the same input
 *   in the same context (today's manifests and scoring config, the row's own recorded reliability and
 *   judge score). The baseline is the set active today unless another is named. This isolates the effect
 *   of the policy change from everything else a stored decision depended on; `drift` counts the rows where
 *   the baseline already disagrees with what was stored (a manifest registered since, a scoring change,
 *   another policy version at the time, a bounded payload).
 * - Rows the kill switch blocked are skipped: nothing was scored, so there is nothing to compare.
 */

/**
 * `undecryptable`: encrypted and no key is configured; `damaged`: the payload fails its commitment or GCM
 * tag, or is not JSON (`gov verify` / GET /v1/audit/chain/verify locates the damage).
 */
export type PayloadRead = { state: 'ok'; value: unknown } | { state: 'erased' } | { state: 'undecryptable' } | { state: 'damaged' };

/** One stored row as the source hands it over: the header, and the payload decoded only when asked. */
export interface ReplayRow {
  header: RowHeader;
  payload(): PayloadRead;
}

export const SKIP_REASONS = ['filtered', 'not_governed', 'erased', 'undecryptable', 'damaged', 'kill_switch', 'pre_check_missing'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

export interface ReplayOptions {
  candidate: RuleSet;
  /** null: no baseline re-evaluation (transitions relative to the stored outcome only). */
  baseline: RuleSet | null;
  /** The agent's manifest as the engine should see it (today's: files plus registered ones). */
  manifest: (agentId: string) => Manifest | null;
  /** The agent's compiled `output_schema`, when its manifest declares one. */
  outputSchema?: (agentId: string) => OutputSchemaValidator | null;
  /** Only rows with a timestamp at or after this instant. */
  since?: Date | null;
  /** Only rows whose agent id matches this picomatch glob. */
  agent?: string | null;
  /** Example envelopes kept per changed transition (default 5). */
  examples?: number;
  /**
   * The pre-check row of a post-check whose pre-check lies before the replayed range (or was dropped from
   * the memo); null when there is none.
   */
  lookup?: (envelopeId: string) => ReplayRow | null;
  /**
   * The rules in which candidate and baseline differ (replay-difference.ts): the baseline is then evaluated
   * only for rows where one of them fires. Needs both sets to share golden rules and scoring config.
   */
  difference?: PolicyDifference | null;
  /** A monotonic clock in ms for the rate (performance.now by default). */
  now?: () => number;
}

export interface Transition {
  from: Outcome;
  to: Outcome;
  count: number;
}

export interface ReplayExample {
  envelope_id: string;
  seq: number;
  phase: string;
  agent_id: string;
  timestamp: string;
  from: Outcome;
  to: Outcome;
  /** The baseline's outcome for this row (null without a baseline). */
  baseline: Outcome | null;
  /** Rule ids the candidate matches and the reference (baseline, else the stored response) did not. */
  rules_added: string[];
  /** Rule ids the reference matched and the candidate does not. */
  rules_removed: string[];
  /** The candidate's decision.reason. */
  reason: string;
}

export interface ReplayReport {
  candidate_version: string;
  baseline_version: string | null;
  since: string | null;
  agent: string | null;
  rows: {
    scanned: number;
    replayed: number;
    skipped: Record<SkipReason, number>;
  };
  /** Stored outcome -> candidate outcome, unchanged ones included, largest first. */
  transitions: Transition[];
  /** Replayed rows whose candidate outcome differs from the stored one. */
  changed: number;
  /** Baseline outcome -> candidate outcome (empty without a baseline). */
  baseline_transitions: Transition[];
  /** Replayed rows whose candidate outcome differs from the baseline's: the policy change's own effect. */
  changed_vs_baseline: number | null;
  /** Replayed rows whose baseline outcome differs from the stored one: what changed besides the policy. */
  drift: number | null;
  /** policy_version recorded in the replayed rows, with counts. */
  stored_policy_versions: Record<string, number>;
  /** Up to `examples` rows per changed stored -> candidate transition, in ledger order. */
  examples: ReplayExample[];
  elapsed_ms: number;
  rows_per_second: number;
}

/** What the replay remembers of a replayed pre-check for its post-check. */
interface HeldPre {
  payload: unknown;
  candidate: Outcome;
  baseline: Outcome | null;
}

/**
 * Pre-checks kept for their post-checks. A post-check follows its pre-check closely (the sidecar appends
 * them together), so the memo only has to outlast that gap; past the bound the oldest are dropped and a
 * late post-check reads its pre-check back through `lookup`.
 */
const MAX_HELD_PRE_CHECKS = 100_000;

const KILL_SWITCH_CODE = 'kill_switch_active';

function storedValidation(payload: unknown): { failures?: Array<{ code?: unknown }>; historical_reliability?: unknown; judge_score?: unknown } | null {
  const response = (payload as StoredPayload | null)?.response as { validation?: unknown } | null | undefined;
  const v = response?.validation;
  return v !== null && typeof v === 'object' ? (v as ReturnType<typeof storedValidation>) : null;
}

function finiteOrNull(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function transitionList(counts: Map<string, number>): Transition[] {
  const out: Transition[] = [];
  for (const [key, count] of counts) {
    const [from, to] = key.split('>') as [Outcome, Outcome];
    out.push({ from, to, count });
  }
  // Largest first; ties in a fixed order so reports diff cleanly.
  return out.sort((a, b) => b.count - a.count || (a.from < b.from ? -1 : a.from > b.from ? 1 : a.to < b.to ? -1 : a.to > b.to ? 1 : 0));
}

function bump(counts: Map<string, number>, from: Outcome, to: Outcome): void {
  const key = `${from}>${to}`;
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function ruleIdsOf(failures: ReadonlyArray<{ code?: unknown }> | undefined, known: ReadonlySet<string>): Set<string> {
  const out = new Set<string>();
  for (const f of failures ?? []) if (typeof f.code === 'string' && known.has(f.code)) out.add(f.code);
  return out;
}

export function replay(rows: Iterable<ReplayRow>, opts: ReplayOptions): ReplayReport {
  const now = opts.now ?? (() => performance.now());
  const started = now();
  const maxExamples = Math.max(0, opts.examples ?? 5);
  const sinceMs = opts.since ? opts.since.getTime() : null;
  const agentGlob = opts.agent ? picomatch(opts.agent, { dot: true }) : null;
  // A handful of agents write millions of rows: match each id once.
  const agentMatches = new Map<string, boolean>();
  const { candidate, baseline } = opts;
  const knownRules = new Set<string>([...candidate.policies.rules.map((r) => r.id), ...(baseline?.policies.rules.map((r) => r.id) ?? [])]);

  const skipped = Object.fromEntries(SKIP_REASONS.map((r) => [r, 0])) as Record<SkipReason, number>;
  const transitions = new Map<string, number>();
  const baselineTransitions = new Map<string, number>();
  const versions: Record<string, number> = {};
  const examples: ReplayExample[] = [];
  const examplesPer = new Map<string, number>();
  const held = new Map<string, HeldPre>();
  let scanned = 0;
  let replayed = 0;
  let changed = 0;
  let changedVsBaseline = 0;
  let drift = 0;

  const run = (input: EngineInput, rules: RuleSet, payload: unknown): EngineResult => {
    const v = storedValidation(payload);
    return evaluate(input, {
      manifest: opts.manifest(input.agent_id),
      outputSchema: opts.outputSchema?.(input.agent_id) ?? null,
      policies: rules.policies,
      golden: rules.golden,
      config: rules.config,
      // The row's own recorded reliability and judge score: they belong to the time of the call, not to the policy.
      reliability: finiteOrNull(v?.historical_reliability),
      killSwitch: { active: false, reason: '' },
      judgeScore: finiteOrNull(v?.judge_score),
      // The remote classifier's verdict at the time, like the stored reliability: replay asks no one.
      externalDetector: (payload as { external_detector?: ExternalDetectorVerdict } | null)?.external_detector ?? null,
    });
  };

  const difference = opts.difference && baseline && baseline.golden === candidate.golden && baseline.config === candidate.config ? opts.difference : null;
  const fires = (set: PolicySet, input: EngineInput, view: ReturnType<typeof buildView>): boolean => {
    if (set.rules.length === 0) return false;
    const ctx = { policies: set, config: candidate.config } as EngineContext;
    return policyCheck(input, ctx, view).hits.length > 0 || adversarialCheck(input, ctx, view).hits.length > 0;
  };
  /** The baseline's result: the candidate's own where no differing rule fires (see replay-difference.ts). */
  const runBaseline = (input: EngineInput, payload: unknown, cand: EngineResult): EngineResult => {
    if (difference !== null) {
      const view = buildView(input);
      if (!fires(difference.candidateOnly, input, view) && !fires(difference.baselineOnly, input, view)) return cand;
    }
    return run(input, baseline!, payload);
  };

  /** The replayed outcomes of a post-check's pre-check: from the memo, else read back and re-decided. */
  const preOf = (id: string): HeldPre | null => {
    const h = held.get(id);
    if (h !== undefined) {
      held.delete(id);
      return h;
    }
    const row = opts.lookup?.(id) ?? null;
    if (row === null || row.header.phase !== 'pre_check') return null;
    const read = row.payload();
    if (read.state !== 'ok') return null;
    const built = storedEngineInput({ ...row.header, payload: read.value }, null);
    if (!built.ok) return null;
    const cand = run(built.input, candidate, read.value);
    return {
      payload: read.value,
      candidate: cand.decision.outcome,
      baseline: baseline ? runBaseline(built.input, read.value, cand).decision.outcome : null,
    };
  };

  for (const row of rows) {
    scanned++;
    const h = row.header;
    if (h.phase !== 'validate' && h.phase !== 'pre_check' && h.phase !== 'post_check') {
      skipped.not_governed++;
      continue;
    }
    if (sinceMs !== null && !(Date.parse(h.timestamp) >= sinceMs)) {
      skipped.filtered++;
      continue;
    }
    if (agentGlob !== null) {
      let ok = agentMatches.get(h.agent_id);
      if (ok === undefined) agentMatches.set(h.agent_id, (ok = agentGlob(h.agent_id)));
      if (!ok) {
        skipped.filtered++;
        continue;
      }
    }
    const read = row.payload();
    if (read.state !== 'ok') {
      skipped[read.state]++;
      continue;
    }
    const payload = read.value;
    const stored = storedValidation(payload);
    if (stored?.failures?.some((f) => f.code === KILL_SWITCH_CODE)) {
      skipped.kill_switch++;
      continue;
    }
    const pre = h.phase === 'post_check' && h.parent_envelope_id !== null ? preOf(h.parent_envelope_id) : null;
    const built = storedEngineInput({ ...h, payload }, pre?.payload ?? null);
    if (!built.ok) {
      skipped[built.problem === 'pre_check_missing' ? 'pre_check_missing' : 'erased']++;
      continue;
    }
    let cand = run(built.input, candidate, payload);
    let base = baseline ? runBaseline(built.input, payload, cand) : null;
    if (pre !== null && h.parent_envelope_id !== null) {
      // The stored post-check of a blocked pre-check is held blocked; so is the replayed one.
      cand = holdBlockedPreCheck(pre.candidate, h.parent_envelope_id, cand);
      if (base !== null && pre.baseline !== null) base = holdBlockedPreCheck(pre.baseline, h.parent_envelope_id, base);
    }
    if (h.phase === 'pre_check') {
      if (held.size >= MAX_HELD_PRE_CHECKS) held.delete(held.keys().next().value as string);
      held.set(h.envelope_id, { payload, candidate: cand.decision.outcome, baseline: base?.decision.outcome ?? null });
    }

    replayed++;
    versions[h.policy_version] = (versions[h.policy_version] ?? 0) + 1;
    const from = h.decision;
    const to = cand.decision.outcome;
    bump(transitions, from, to);
    if (base !== null) {
      bump(baselineTransitions, base.decision.outcome, to);
      if (base.decision.outcome !== to) changedVsBaseline++;
      if (base.decision.outcome !== from) drift++;
    }
    if (from === to) continue;
    changed++;
    const key = `${from}>${to}`;
    const n = examplesPer.get(key) ?? 0;
    if (n >= maxExamples) continue;
    examplesPer.set(key, n + 1);
    const after = ruleIdsOf(cand.validation.failures, knownRules);
    const before = ruleIdsOf(base !== null ? base.validation.failures : stored?.failures, knownRules);
    examples.push({
      envelope_id: h.envelope_id,
      seq: h.seq,
      phase: h.phase,
      agent_id: h.agent_id,
      timestamp: h.timestamp,
      from,
      to,
      baseline: base?.decision.outcome ?? null,
      rules_added: [...after].filter((id) => !before.has(id)).sort(),
      rules_removed: [...before].filter((id) => !after.has(id)).sort(),
      reason: cand.decision.reason,
    });
  }

  const elapsed = now() - started;
  return {
    candidate_version: candidate.policies.version,
    baseline_version: baseline?.policies.version ?? null,
    since: opts.since ? opts.since.toISOString() : null,
    agent: opts.agent ?? null,
    rows: { scanned, replayed, skipped },
    transitions: transitionList(transitions),
    changed,
    baseline_transitions: transitionList(baselineTransitions),
    changed_vs_baseline: baseline ? changedVsBaseline : null,
    drift: baseline ? drift : null,
    stored_policy_versions: versions,
    examples,
    elapsed_ms: Math.round(elapsed * 10) / 10,
    rows_per_second: elapsed > 0 ? Math.round((scanned / elapsed) * 1000) : 0,
  };
}

/**
 * One report from the reports of consecutive seq ranges (in ledger order), as one pass over all of them
 * gives: counts add up, examples keep the first `examples` per transition in ledger order. The time is the
 * caller's (wall clock over every range).
 */
export function mergeReplayReports(parts: readonly ReplayReport[], examples: number, elapsedMs: number): ReplayReport {
  const first = parts[0];
  const skipped = Object.fromEntries(SKIP_REASONS.map((r) => [r, 0])) as Record<SkipReason, number>;
  const transitions = new Map<string, number>();
  const baselineTransitions = new Map<string, number>();
  const versions: Record<string, number> = {};
  const kept: ReplayExample[] = [];
  const per = new Map<string, number>();
  let scanned = 0;
  let replayed = 0;
  let changed = 0;
  let changedVsBaseline = 0;
  let drift = 0;
  for (const p of parts) {
    scanned += p.rows.scanned;
    replayed += p.rows.replayed;
    for (const r of SKIP_REASONS) skipped[r] += p.rows.skipped[r];
    for (const x of p.transitions) transitions.set(`${x.from}>${x.to}`, (transitions.get(`${x.from}>${x.to}`) ?? 0) + x.count);
    for (const x of p.baseline_transitions) baselineTransitions.set(`${x.from}>${x.to}`, (baselineTransitions.get(`${x.from}>${x.to}`) ?? 0) + x.count);
    for (const [v, n] of Object.entries(p.stored_policy_versions)) versions[v] = (versions[v] ?? 0) + n;
    changed += p.changed;
    changedVsBaseline += p.changed_vs_baseline ?? 0;
    drift += p.drift ?? 0;
    for (const e of p.examples) {
      const key = `${e.from}>${e.to}`;
      const n = per.get(key) ?? 0;
      if (n >= examples) continue;
      per.set(key, n + 1);
      kept.push(e);
    }
  }
  const withBaseline = first?.baseline_version !== null && first?.baseline_version !== undefined;
  return {
    candidate_version: first?.candidate_version ?? '',
    baseline_version: first?.baseline_version ?? null,
    since: first?.since ?? null,
    agent: first?.agent ?? null,
    rows: { scanned, replayed, skipped },
    transitions: transitionList(transitions),
    changed,
    baseline_transitions: transitionList(baselineTransitions),
    changed_vs_baseline: withBaseline ? changedVsBaseline : null,
    drift: withBaseline ? drift : null,
    stored_policy_versions: versions,
    examples: kept,
    elapsed_ms: Math.round(elapsedMs * 10) / 10,
    rows_per_second: elapsedMs > 0 ? Math.round((scanned / elapsedMs) * 1000) : 0,
  };
}
