import { z } from 'zod';

/** The one catalogue of error codes (like Fastify's FST_ERR_*): every error body carries one of these. */
export const ERROR_CODES = {
  bad_request: 400,
  invalid_json: 400,
  unauthorized: 401,
  entitlement_required: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  upgrade_required: 426,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
  // The sidecar's proxy, in each caller's own API format (src/proxy/protocols): a governance refusal of
  // the call or of its answer, the audit ledger or the sidecar unable to take the call, and the upstream
  // it forwards to failing. 502 and 504 are the proxy's alone: only it stands in front of an upstream.
  governance_blocked: 403,
  governance_held: 403,
  ledger_unavailable: 503,
  shutting_down: 503,
  upstream_unreachable: 502,
  upstream_timeout: 504,
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;

export const ErrorBody = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;
