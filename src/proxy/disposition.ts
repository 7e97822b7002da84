import type { Outcome } from '../contracts/common.js';

export type EscalatePolicy = 'hold' | 'release';

export type Disposition = 'release' | 'block' | 'hold';

/**
 * What the proxy does with a decision. `block` never passes. `escalate` (a human must look) follows
 * GOV_PROXY_ESCALATE. `retry` and `request_evidence` are quality verdicts (a low-confidence or ungrounded
 * answer), not safety ones: an LLM answer that cites a figure its prompt did not contain is routine, so
 * they are released, recorded with their outcome, surfaced in X-Gov-Decision and (request_evidence)
 * queued for review. `pending` is reserved for the review lifecycle and is held like escalate.
 */
export function disposition(outcome: Outcome, escalate: EscalatePolicy): Disposition {
  switch (outcome) {
    case 'approve':
    case 'retry':
    case 'request_evidence':
      return 'release';
    case 'escalate':
    case 'pending':
      return escalate === 'release' ? 'release' : 'hold';
    default:
      return 'block';
  }
}
