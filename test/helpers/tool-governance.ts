import { randomUUID } from 'node:crypto';
import type { Outcome } from '../../src/contracts/common.js';
import type { Manifest } from '../../src/contracts/manifest.js';
import type { PostCheckRequest, PostCheckResponse, PreCheckRequest, PreCheckResponse } from '../../src/contracts/runtime.js';
import type { ToolCallLinks } from '../../src/proxy/tool-call-links.js';
import type { ToolGovernance } from '../../src/proxy/tool-governance.js';
import type { Composed } from '../../src/server/compose.js';

/** A ToolGovernance that records every check it answers, for assertions on what the adapters sent. */
export interface RecordingGovernance extends ToolGovernance {
  preRequests: PreCheckRequest[];
  preResponses: PreCheckResponse[];
  postRequests: PostCheckRequest[];
  postResponses: PostCheckResponse[];
}

/** The real Governor and manifests of a composed gateway; releases `approve` only (GOV_PROXY_ESCALATE=hold). */
export function governorPort(composed: Composed, links?: ToolCallLinks): RecordingGovernance {
  const g: RecordingGovernance = {
    preRequests: [],
    preResponses: [],
    postRequests: [],
    postResponses: [],
    async preCheck(r) {
      g.preRequests.push(r);
      const x = await composed.governor.preCheck(r);
      g.preResponses.push(x);
      return x;
    },
    async postCheck(r) {
      g.postRequests.push(r);
      const x = await composed.governor.postCheck(r);
      g.postResponses.push(x);
      return x;
    },
    releases: (o) => o === 'approve',
    manifest: (id) => composed.manifests.get(id),
  };
  if (links) g.links = links;
  return g;
}

function response(outcome: Outcome, reason: string): PreCheckResponse {
  return {
    envelope_id: randomUUID(),
    decision: { outcome, reason, policy_version: 'stub', score_version: 'stub', reviewer_id: null, review_deadline: null, judge_latency_ms: null },
    latency_ms: 0,
    governance_disclosure: 'stub',
  };
}

export interface StubRules {
  pre?: (r: PreCheckRequest) => Outcome;
  post?: (r: PostCheckRequest) => Outcome;
  manifest?: Manifest | null;
  throwOn?: 'pre_check' | 'post_check';
}

/** A ToolGovernance without engine or ledger: outcomes come from the given functions (default approve). */
export function stubGovernance(rules: StubRules = {}, links?: ToolCallLinks): RecordingGovernance & { errors: unknown[] } {
  const g: RecordingGovernance & { errors: unknown[] } = {
    preRequests: [],
    preResponses: [],
    postRequests: [],
    postResponses: [],
    errors: [],
    async preCheck(r) {
      g.preRequests.push(r);
      if (rules.throwOn === 'pre_check') throw new Error('ledger down');
      const outcome = rules.pre?.(r) ?? 'approve';
      const x = response(outcome, outcome === 'approve' ? 'ok' : `stub refused ${r.action}`);
      g.preResponses.push(x);
      return x;
    },
    async postCheck(r) {
      g.postRequests.push(r);
      if (rules.throwOn === 'post_check') throw new Error('ledger down');
      const outcome = rules.post?.(r) ?? 'approve';
      const x: PostCheckResponse = { ...response(outcome, outcome === 'approve' ? 'ok' : 'stub withheld the output'), trust_chain: null, pre_check_envelope_id: r.pre_check_envelope_id };
      g.postResponses.push(x);
      return x;
    },
    releases: (o) => o === 'approve',
    manifest: () => (rules.manifest === undefined ? { tools: [{ name: 'lookup_order' }] } : rules.manifest),
    onError: (e) => {
      g.errors.push(e);
    },
  };
  if (links) g.links = links;
  return g;
}
