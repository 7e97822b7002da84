import type { AuditRow, AuditRowWithPayload } from '../contracts/audit.js';
import type { Principal } from './authenticators.js';
import { checkCapability } from './capabilities.js';

/**
 * The `scores.view` capability (docs/tiers.md): below it a caller reads decisions, reasons and audit rows,
 * but no score: not the validation, risk and confidence rationale of a runtime answer, nor the confidence
 * and risk tier of an audit row, nor the scores inside the answer a row stores. One rule, applied by every
 * route that returns any of them, so that no route is a way around another.
 */
export function mayViewScores(principal: Principal | null): boolean {
  return principal === null || checkCapability(principal.tier, 'scores.view', new Set()) === 'allowed';
}

/**
 * A decision's reason names the scores it turned on (`final_confidence 97.2 >= 75 and risk tier low`):
 * below scores.view each score and the risk tier read `hidden`; the rule, the thresholds and the policy
 * rules that fired stay, so the caller still learns why.
 */
export function scorelessReason(reason: string): string {
  return reason.replace(/\b(final_confidence|[a-z]+_score|score) -?\d+(?:\.\d+)?/g, '$1 hidden').replace(/\brisk tier [a-z]+/g, 'risk tier hidden');
}

/** A runtime answer (or the one a row stores) without its scores. */
export function withoutScores<T>(response: T): T {
  if (typeof response !== 'object' || response === null || Array.isArray(response)) return response;
  const { validation: _v, risk: _r, confidence_rationale: _c, ...rest } = response as Record<string, unknown>;
  const d = rest.decision;
  if (typeof d === 'object' && d !== null && typeof (d as { reason?: unknown }).reason === 'string') {
    rest.decision = { ...d, reason: scorelessReason((d as { reason: string }).reason) };
  }
  return rest as T;
}

/** What a runtime answer shows the caller. */
export function responseForTier<T>(response: T, principal: Principal | null): T {
  return mayViewScores(principal) ? response : withoutScores(response);
}

/** An audit row's header as the caller may read it: its confidence and risk tier are null below scores.view. */
export function rowForTier<R extends AuditRow>(row: R, principal: Principal | null): R | (Omit<R, 'confidence' | 'risk_tier'> & { confidence: null; risk_tier: null }) {
  if (mayViewScores(principal)) return row;
  return { ...row, confidence: null, risk_tier: null };
}

/** An audit row with its payload: the header as rowForTier, and the stored answer without its scores. */
export function rowWithPayloadForTier(row: AuditRowWithPayload, principal: Principal | null): ReturnType<typeof rowForTier<AuditRowWithPayload>> {
  if (mayViewScores(principal)) return row;
  const p = row.payload;
  const payload = typeof p === 'object' && p !== null && 'response' in p ? { ...p, response: withoutScores((p as { response: unknown }).response) } : p;
  return { ...rowForTier(row, principal), payload };
}
