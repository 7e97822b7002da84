import type { Tier } from '../contracts/common.js';

export const TIER_RANK: Record<Tier, number> = { free: 0, developer: 1, team: 2, enterprise: 3 };

/**
 * The capability matrix: the minimum tier for each capability, and for features that a deployment may
 * lack, the entitlement it needs. Below the tier → 403; tier fine but the deployment lacks it → 402.
 * docs/tiers.md is generated from the same facts; change both together.
 */
export const CAPABILITIES = {
  'runtime.govern': { min: 'free', description: 'validate, pre-check, post-check, payment intents' },
  'scores.view': { min: 'developer', description: 'scores: validation, risk and confidence rationale in runtime responses and stored answers, confidence and risk tier of audit rows' },
  'kill_switch.read': { min: 'free', description: 'read the kill switch' },
  'kill_switch.write': { min: 'team', description: 'set or clear the kill switch' },
  'decision.rerun': { min: 'developer', description: 're-run the decision on a stored envelope' },
  'audit.read': { min: 'free', description: 'list and read audit rows' },
  'audit.verify': { min: 'team', description: 'verify the hash chain' },
  // A sidecar's key: what it ingests lands in the central audit store, so the same bar as verifying it.
  'audit.ingest': { min: 'team', description: 'ship a sidecar\'s ledger rows to the central store (replication)' },
  'audit.erase': { min: 'team', entitlement: 'erasure', description: 'erase personal data of an execution' },
  'agents.read': { min: 'free', description: 'list agents, read manifests and reliability' },
  'agents.write': { min: 'developer', description: 'register agent manifests' },
  'review.read': { min: 'developer', description: 'read the human review queue' },
  'metrics.read': { min: 'free', description: 'Prometheus metrics' },
  'auth.check': { min: 'free', description: 'validate the presented token' },
  'policy.evaluate': { min: 'developer', entitlement: 'policy_api', description: 'policy dry runs' },
  'policy.read': { min: 'developer', entitlement: 'policy_api', description: 'read policy packs, their versions, history and diffs' },
  // Publishing or activating changes what every agent may do: the same bar as the kill switch.
  'policy.write': { min: 'team', entitlement: 'policy_api', description: 'publish, activate, roll back and deactivate policy pack versions' },
  'certify': { min: 'team', entitlement: 'certification', description: 'agent certification' },
  'analytics': { min: 'team', entitlement: 'analytics', description: 'analytics, insights, search, dashboard, feedback' },
  'alerts': { min: 'team', entitlement: 'alerts', description: 'alert engine' },
  'reports': { min: 'enterprise', entitlement: 'compliance_export', description: 'compliance reports and signed evidence packs' },
  'team': { min: 'team', entitlement: 'team_management', description: 'team management' },
  'judge': { min: 'enterprise', entitlement: 'judge', description: 'LLM judge' },
  'trust_chain': { min: 'enterprise', entitlement: 'trust_chain', description: 'multi-agent trust chain check' },
  'sso': { min: 'enterprise', entitlement: 'sso', description: 'SAML single sign-on' },
} as const satisfies Record<string, { min: Tier; entitlement?: string; description: string }>;

export type Capability = keyof typeof CAPABILITIES;

export type CapabilityVerdict = 'allowed' | 'tier_too_low' | 'not_entitled';

export function checkCapability(tier: Tier, capability: Capability, entitlements: ReadonlySet<string>): CapabilityVerdict {
  const cap: { min: Tier; entitlement?: string } = CAPABILITIES[capability];
  if (TIER_RANK[tier] < TIER_RANK[cap.min]) return 'tier_too_low';
  if (cap.entitlement !== undefined && !entitlements.has(cap.entitlement)) return 'not_entitled';
  return 'allowed';
}
