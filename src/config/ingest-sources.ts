import picomatch from 'picomatch';
import { z } from 'zod';

/**
 * Which source chains a caller of POST /v1/audit/ingest may write (docs/deployment.md, "Replication"). A
 * sidecar's key that leaked must not let its holder append rows to another pod's chain: the chain would
 * still verify, since a chain proves order and integrity, not authorship. Bound by the caller's principal
 * subject (`api-key-<n>` for the n-th key of GOV_API_KEYS, a JWT's `sub`), or by a JWT's own `sources`
 * claim; unbound callers with audit.ingest may write any source, as before, unless GOV_INGEST_SOURCES
 * says `*=` nothing for the rest (below).
 */

export interface IngestSourceRules {
  /** null: this subject is not bound here (a JWT `sources` claim, or nothing, decides). */
  globsFor(subject: string): readonly string[] | null;
  /** Whether a subject bound nowhere (no entry, no claim) may write any source. */
  unboundMayWrite: boolean;
}

const GLOB = /^[\w.:@*?[\]{}!,-]{1,200}$/;

/**
 * `GOV_INGEST_SOURCES`: `subject=glob|glob;subject=glob`, e.g. `api-key-2=sidecar@billing-*;api-key-3=sidecar@support-*`.
 * An entry `*=` (nothing after the `=`) refuses ingest to every subject without a binding of its own.
 */
export const IngestSourcesSetting = z.string().transform((raw, ctx): IngestSourceRules => {
  const bound = new Map<string, string[]>();
  let unboundMayWrite = true;
  for (const entry of raw.split(';').map((e) => e.trim()).filter(Boolean)) {
    const eq = entry.indexOf('=');
    const subject = eq <= 0 ? '' : entry.slice(0, eq).trim();
    const globs = eq < 0 ? [] : entry.slice(eq + 1).split('|').map((g) => g.trim()).filter(Boolean);
    if (subject === '' || (subject !== '*' && globs.length === 0) || globs.some((g) => !GLOB.test(g))) {
      ctx.addIssue({ code: 'custom', message: 'GOV_INGEST_SOURCES entries must be subject=glob|glob (source id globs such as sidecar@billing-*), separated by ;' });
      return z.NEVER;
    }
    if (subject === '*') {
      if (globs.length > 0) {
        ctx.addIssue({ code: 'custom', message: 'GOV_INGEST_SOURCES: `*=` takes no globs (it refuses subjects without a binding); bind each subject by name' });
        return z.NEVER;
      }
      unboundMayWrite = false;
      continue;
    }
    bound.set(subject, [...(bound.get(subject) ?? []), ...globs]);
  }
  return { globsFor: (subject) => bound.get(subject) ?? null, unboundMayWrite };
});

/** Whether `source` matches one of `globs` (picomatch; `@`, `:` and `.` are ordinary characters in a source id). */
export function sourceAllowed(source: string, globs: readonly string[]): boolean {
  return globs.some((g) => picomatch.isMatch(source, g, { dot: true }));
}
