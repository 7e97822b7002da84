import type { Failure } from '../../contracts/runtime.js';
import type { CompiledRule } from '../../policy/policy-set.js';
import type { ScoringConfig } from '../scoring-config.js';
import type { CheckResult, EngineContext, EngineInput, ExternalDetectorVerdict } from '../types.js';
import { buildView, type EvalView } from '../view.js';
import { hitFailure, scanRules, type MaskedText, type RuleHit } from './rule-scan.js';
import { clamp } from '../score-math.js';
import { factsOf } from '../facts.js';

/** `score` is safety_score: 100 when no adversarial rule fired, minus each fired rule's amount. */
export interface AdversarialResult extends CheckResult {
  readonly failed: boolean;
  /** A fired adversarial rule whose effect is `block`. */
  readonly blocked: boolean;
  readonly hits: readonly RuleHit[];
  readonly sensitivity: number;
  /** What adversarial rules with the `mask` effect matched, for the ledger's copy. */
  readonly masks: readonly MaskedText[];
}

/** Where a remote-classifier failure points: the text it was sent (docs/deployment.md). */
export const REMOTE_CLASSIFIER_PATH = 'input+tool_results+context';

const REMOTE_MATCHER = Object.freeze({ label: 'remote classifier', find: () => -1 });

/**
 * The remote classifier as an adversarial rule of its own, so that a flag is reported, scored and decided
 * exactly like a pack's adversarial rule (escalate: a score is a probability, not proof).
 */
function remoteRule(id: string, message: string, config: ScoringConfig): CompiledRule {
  return {
    id,
    pack: 'remote-classifier',
    description: message,
    targets: [],
    scopes: [],
    matcher: REMOTE_MATCHER,
    members: [REMOTE_MATCHER],
    test: 'match',
    effect: 'escalate',
    amount: config.adversarial.remote_classifier_amount,
    severity: 'error',
    gate: 'adversarial',
    message,
    appliesTo: null,
    condition: null,
  };
}

/** A hit for a flag (or a failed call in closed mode), an informational failure for a failed call in open mode. */
function remoteFinding(v: ExternalDetectorVerdict, config: ScoringConfig): { hit: RuleHit | null; note: Failure | null } {
  if (v.status === 'ok' && v.score !== null && v.score >= v.threshold) {
    const label = v.label === null ? '' : ` (${v.label})`;
    return { hit: { rule: remoteRule('remote-classifier', `${v.kind} classifier score ${Math.round(v.score * 1000) / 1000}${label} is at or above ${v.threshold}`, config), path: REMOTE_CLASSIFIER_PATH, detector: REMOTE_MATCHER.label }, note: null };
  }
  if (v.status !== 'timeout' && v.status !== 'error') return { hit: null, note: null };
  const why = `${v.kind} classifier ${v.status === 'timeout' ? 'timed out' : 'failed'}${v.error ? ` (${v.error})` : ''}`;
  if (v.failure_mode === 'closed') {
    return { hit: { rule: remoteRule('remote-classifier-unavailable', `${why}; GOV_DETECTOR_FAILURE_MODE=closed`, config), path: REMOTE_CLASSIFIER_PATH, detector: REMOTE_MATCHER.label }, note: null };
  }
  return { hit: null, note: { check: 'adversarial', code: 'remote-classifier-unavailable', message: `${why}; decided without its score (GOV_DETECTOR_FAILURE_MODE=open)`, severity: 'info', path: REMOTE_CLASSIFIER_PATH } };
}

/**
 * Prompt-injection and similar attacks, detected by the policy set's `gate: adversarial` rules over the
 * input, tool results (indirect injection) or any other target they name, and by the remote classifier's
 * verdict when one is configured. A failure is a hard gate: the decision can never be `approve`, and the
 * policy score is capped (capPolicyScore).
 */
export function adversarialCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): AdversarialResult {
  const scan = scanRules(ctx.policies, ctx.policies.adversarialRules, view, ctx.config, input.agent_id, ctx.policies.adversarialConditions, ctx.policies.adversarialConditions.length > 0 ? () => factsOf(input, ctx.manifest) : undefined);
  let hits = scan.hits;
  let points = scan.points;
  let sensitivity = scan.sensitivity;
  let note: Failure | null = null;
  if (ctx.externalDetector) {
    const found = remoteFinding(ctx.externalDetector, ctx.config);
    note = found.note;
    if (found.hit !== null) {
      hits = [...hits, found.hit];
      points += found.hit.rule.amount;
      sensitivity = Math.max(sensitivity, ctx.config.risk.severity_sensitivity[found.hit.rule.severity]);
    }
  }
  const failures = hits.map((h) => hitFailure('adversarial', h));
  if (note !== null) failures.push(note);
  return {
    score: clamp(100 - points),
    failures,
    failed: hits.length > 0,
    blocked: scan.blocked,
    hits,
    sensitivity,
    masks: scan.masks,
  };
}

export function capPolicyScore(policyScore: number, adversarial: AdversarialResult, config: ScoringConfig): number {
  return adversarial.failed && policyScore > config.adversarial.policy_cap ? config.adversarial.policy_cap : policyScore;
}
