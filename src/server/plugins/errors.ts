import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import type { ErrorCode } from '../../contracts/errors.js';
import { AppError } from '../app-error.js';
import { LedgerConflictError, LedgerUnavailableError } from '../../ledger/errors.js';

/** Fastify's own client-error codes, mapped into our catalogue. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'bad_request',
  FST_ERR_CTP_INVALID_TYPE: 'unsupported_media_type',
  FST_ERR_BAD_URL: 'bad_request',
  FST_ERR_ASYNC_CONSTRAINT: 'bad_request',
};

function body(code: ErrorCode | string, message: string, details?: unknown) {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}

/** Every error, 400 to 500, leaves as {"error": {"code", "message", "details"?}}; a 500 never carries a stack. */
export const errorsPlugin = fp(async (app: FastifyInstance) => {
  app.setErrorHandler((err: FastifyError | AppError, req, reply) => {
    if (err instanceof AppError) {
      if (err.headers) reply.headers(err.headers);
      return reply.code(err.statusCode).send(body(err.code, err.message, err.details));
    }
    if (hasZodFastifySchemaValidationErrors(err)) {
      const where = (err as FastifyError).validationContext ?? 'body';
      const issues = err.validation.map((v) => ({ path: `${where}${v.instancePath.replace(/\//g, '.').replace(/\.$/, '')}`, message: v.message }));
      return reply.code(422).send(body('validation_failed', `request ${where} failed validation: ${issues.map((i) => i.path).join(', ')}`, { issues }));
    }
    // The ledger cannot take rows (closed, disk full, another writer): the caller may retry elsewhere.
    if (err instanceof LedgerUnavailableError) {
      req.log.error({ err: { message: err.message, code: err.code } }, 'ledger unavailable');
      return reply.code(503).header('retry-after', '1').send(body('unavailable', 'the audit ledger is unavailable; nothing was recorded, retry later', { request_id: req.id }));
    }
    if (err instanceof LedgerConflictError) return reply.code(409).send(body('conflict', err.message));
    const mapped = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (mapped) return reply.code(err.statusCode ?? 400).send(body(mapped, err.message));
    if (err instanceof SyntaxError || (err.statusCode === 400 && err.message?.includes('JSON'))) {
      return reply.code(400).send(body('invalid_json', 'request body is not valid JSON'));
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) return reply.code(status).send(body(err.code ?? 'bad_request', err.message));
    req.log.error({ err: { message: err.message, code: err.code, stack: err.stack } }, 'internal error');
    return reply.code(500).send(body('internal_error', 'internal gateway error; see the gateway log for the request id', { request_id: req.id }));
  });

  app.setNotFoundHandler((req, reply) => {
    reply.code(404).send(body('not_found', `no route ${req.method} ${req.url.split('?')[0]}`));
  });
});
