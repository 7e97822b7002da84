/** Base class, so callers can tell ledger failures from programming errors with one instanceof. */
export class LedgerError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The entry handed to append() is malformed (a caller bug, never a storage problem). */
export class LedgerInputError extends LedgerError {
  constructor(message: string) {
    super('ledger_invalid_entry', message);
  }
}

/**
 * append() refused a row that would break a ledger invariant: an envelope id already written, or a
 * second post_check for the same pre-check (the spec allows exactly one; the first result stands).
 */
export class LedgerConflictError extends LedgerError {
  constructor(
    code: 'duplicate_envelope_id' | 'post_check_exists',
    message: string,
    readonly existingEnvelopeId: string,
  ) {
    super(code, message);
  }
}

/** A stored row failed its integrity checks when read (altered bytes, wrong key). */
export class LedgerIntegrityError extends LedgerError {
  constructor(
    message: string,
    readonly seq: number | null,
  ) {
    super('ledger_integrity', message);
  }
}

/** The ledger was closed, or a commit failed and took this append with it. */
export class LedgerUnavailableError extends LedgerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ledger_unavailable', message);
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}
