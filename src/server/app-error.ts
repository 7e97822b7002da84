import { ERROR_CODES, type ErrorCode } from '../contracts/errors.js';

/** A failure with a status and a catalogued code; the error plugin renders it as the JSON error body. */
export class AppError extends Error {
  readonly statusCode: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.statusCode = ERROR_CODES[code];
  }
}
