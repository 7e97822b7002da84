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
