/**
 * The detector groups a rule may name instead of `detector:` (docs/policies.md#detector-groups):
 * `pii: [ssn, email, ...]` (each kind one or more built-in detectors), `secrets: true` (every secret
 * detector) and `injection: true`. Kept in one place so that a new detector joins its group here only.
 */

import { SECRET_DETECTORS as SECRET_MATCHERS } from './secret-detectors.js';

export const PII_KINDS = {
  ssn: ['us_ssn'],
  email: ['email'],
  phone: ['phone'],
  credit_card: ['credit_card'],
  iban: ['iban'],
  api_key: ['aws_access_key', 'sk_api_key', 'github_token', 'provider_token', 'secret_assignment'],
  password: ['password_assignment', 'connection_string'],
  private_key: ['private_key'],
  jwt: ['jwt'],
  ip_address: ['ip_address'],
} as const satisfies Record<string, readonly string[]>;

export type PiiKind = keyof typeof PII_KINDS;
export const PII_KIND_NAMES = Object.keys(PII_KINDS) as [PiiKind, ...PiiKind[]];

/** Every secret detector of secret-detectors.ts, so that a new one joins `secrets: true` without an edit here; and JWTs. */
export const SECRET_DETECTORS: readonly string[] = [...SECRET_MATCHERS.map(([name]) => name), 'jwt'];

export const INJECTION_DETECTORS: readonly string[] = ['prompt_injection'];

/** The detector names of a rule's group condition, deduplicated, in a stable order. */
export function groupDetectors(g: { pii?: readonly PiiKind[]; secrets?: boolean; injection?: boolean }): string[] {
  const out = new Set<string>();
  for (const k of g.pii ?? []) for (const d of PII_KINDS[k]) out.add(d);
  if (g.secrets === true) for (const d of SECRET_DETECTORS) out.add(d);
  if (g.injection === true) for (const d of INJECTION_DETECTORS) out.add(d);
  return [...out];
}
