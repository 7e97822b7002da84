import { hostname } from 'node:os';
import { SourceId } from '../contracts/audit.js';
import { LedgerInputError } from './errors.js';

/**
 * The default source id, `<role>@<host>`: unique per pod or host as long as one process of a role runs
 * there (a pod has one sidecar; a gateway replica is its own pod). Characters a source id may not hold
 * become `-`.
 */
export function defaultSourceId(role: string): string {
  const host = hostname().replace(/[^\w.:-]/g, '-').slice(0, 100) || 'localhost';
  return `${role}@${host}`;
}

/** The source id as given, or LedgerInputError: it goes into every row's hashed header. */
export function checkSourceId(source: string): string {
  const r = SourceId.safeParse(source);
  if (!r.success) throw new LedgerInputError(`source id ${JSON.stringify(source)}: ${r.error.issues[0]?.message ?? 'invalid'}`);
  return source;
}
