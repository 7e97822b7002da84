import type { Outcome } from './common.js';

/**
 * The client library's exceptions (spec, Errors: "Client-side exceptions"). They live beside the contracts,
 * not in the client or the server, so that both sides and every future client name one class per failure.
 * This module imports nothing at run time: the client's import graph stays as small as it can be.
 */

/**
 * The envelope id of a decision the client made without a gateway: the environment kill switch, OSS mode's
 * schema check, a fail-open stand-in for an unreachable gateway. No ledger row carries it.
 */
export const LOCAL_ENVELOPE_ID = '00000000-0000-0000-0000-000000000000';

/** The call was refused (pre-check: the body never ran) or its result withheld (post-check, validate). */
export class BlockedError extends Error {
  override readonly name = 'BlockedError';
  constructor(
    readonly outcome: Outcome,
    readonly reason: string,
    /** The row that records the refusal; LOCAL_ENVELOPE_ID when the client refused on its own. */
    readonly envelope_id: string,
    /** Which decision refused: a refusal at pre-check means the governed body never ran. */
    readonly phase: 'pre_check' | 'post_check' | 'validate',
  ) {
    super(`blocked at ${phase}: ${reason}`);
  }
}

/** The gateway could not be reached or could not take the call (network error, timeout, 5xx, 429) after every retry. */
export class GatewayUnavailableError extends Error {
  override readonly name = 'GatewayUnavailableError';
  constructor(
    message: string,
    /** The last HTTP status seen; null when no answer came at all. */
    readonly status: number | null,
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** 426: the gateway needs a newer client library than this one. */
export class GatewayVersionError extends Error {
  override readonly name = 'GatewayVersionError';
  constructor(
    /** GOV_MIN_SDK_VERSION of the gateway, when its answer names it. */
    readonly minimumVersion: string | null,
    readonly sdkVersion: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The gateway answered, and refused the request itself (400, 401, 402, 403, 404, 413, 422): a fault of the
 * caller or of its credentials that no retry mends. In OSS mode the client's own schema check raises it with
 * status 422, as a gateway would.
 */
export class GatewayRequestError extends Error {
  override readonly name = 'GatewayRequestError';
  constructor(
    readonly status: number,
    /** The error catalogue's code (contracts/errors.ts), when the body carried one. */
    readonly code: string | null,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

/**
 * Failure mode `queue`: the gateway is unreachable and the client's durable queue is at its bound
 * (entries or bytes), so this call could be neither governed nor buffered. Entries already queued are kept.
 */
export class QueueFullError extends Error {
  override readonly name = 'QueueFullError';
  constructor(
    message: string,
    readonly entries: number,
    readonly bytes: number,
  ) {
    super(message);
  }
}
