import type { Outcome } from '../contracts/common.js';
import type { PostCheckRequest, PreCheckRequest, ValidateRequest } from '../contracts/runtime.js';
import { fromPostCheck, fromPreCheck, fromValidate } from '../engine/normalize.js';
import type { EngineInput, EngineResult, ExternalDetectorVerdict } from '../engine/types.js';

/**
 * How a governed row's payload is stored: the request the decision read (bounded, context digested) and the
 * response that was sent. Shared by the decision re-run route and `gov policy replay`, which both rebuild
 * an engine input from a stored envelope and must rebuild it the same way.
 */
export interface StoredPayload {
  request: unknown;
  response: unknown;
  /** The remote classifier's verdict on the call, when one is configured: a re-decision reuses it. */
  external_detector?: ExternalDetectorVerdict;
}

/** The part of a stored row the rebuild reads. */
export interface StoredRowRef {
  envelope_id: string;
  phase: string;
  parent_envelope_id: string | null;
  payload: unknown;
}

export type StoredInput =
  | { ok: true; input: EngineInput; external_detector: ExternalDetectorVerdict | null }
  | { ok: false; problem: 'payload_erased' | 'pre_check_missing' | 'not_governed'; message: string };

/**
 * The engine input a stored validate, pre_check or post_check row was decided on. A post_check needs its
 * pre-check's payload (`prePayload`), because who asked and what comes from the pre-check request.
 */
export function storedEngineInput(row: StoredRowRef, prePayload: unknown): StoredInput {
  const payload = row.payload as StoredPayload | null;
  if (row.phase !== 'validate' && row.phase !== 'pre_check' && row.phase !== 'post_check') {
    return { ok: false, problem: 'not_governed', message: `envelope ${row.envelope_id} is a ${row.phase} row, not a governed call` };
  }
  if (payload === null || payload === undefined) return { ok: false, problem: 'payload_erased', message: `the payload of envelope ${row.envelope_id} has been erased` };
  const external_detector = payload.external_detector ?? null;
  if (row.phase === 'validate') return { ok: true, input: fromValidate(payload.request as ValidateRequest), external_detector };
  if (row.phase === 'pre_check') return { ok: true, input: fromPreCheck(payload.request as PreCheckRequest), external_detector };
  const pre = prePayload as StoredPayload | null | undefined;
  if (!pre || row.parent_envelope_id === null) return { ok: false, problem: 'pre_check_missing', message: `the pre-check of envelope ${row.envelope_id} is missing or erased` };
  return { ok: true, input: fromPostCheck(pre.request as PreCheckRequest, payload.request as PostCheckRequest, row.parent_envelope_id), external_detector };
}

/** A call whose pre-check was blocked must never be released, whatever its output scores. */
export function holdBlockedPreCheck(preOutcome: Outcome, preEnvelopeId: string, result: EngineResult): EngineResult {
  if (preOutcome !== 'block' || result.decision.outcome === 'block') return result;
  return { ...result, decision: { ...result.decision, outcome: 'block', reason: `pre-check ${preEnvelopeId} was blocked; ${result.decision.reason}`, review_deadline: null } };
}
