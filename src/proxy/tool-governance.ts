import type { Outcome } from '../contracts/common.js';
import type { Manifest } from '../contracts/manifest.js';
import type { PostCheckRequest, PostCheckResponse, PreCheckRequest, PreCheckResponse } from '../contracts/runtime.js';
import type { ToolCallLinks } from './tool-call-links.js';

/**
 * What the MCP and HTTP-tool adapters need from the sidecar: the Governor's two checks, the release rule,
 * the manifests, and the tool-call link registry. An interface rather than the Governor itself so the
 * adapters stay free of composition and can be tested against a stub.
 */
export interface ToolGovernance {
  preCheck(req: PreCheckRequest): Promise<PreCheckResponse>;
  postCheck(req: PostCheckRequest): Promise<PostCheckResponse>;
  /** Whether an outcome lets a call or its result through: `approve`, and `escalate` when GOV_PROXY_ESCALATE=release. */
  releases(outcome: Outcome): boolean;
  /** The agent's manifest, for tools/list filtering; null when the agent has none (every tool is then hidden). */
  manifest(agentId: string): Manifest | null;
  /** Absent: calls are recorded without link metadata. */
  links?: ToolCallLinks;
  /** A check that threw: the call is refused (fail closed) and the error reported here. */
  onError?(error: unknown, where: 'pre_check' | 'post_check'): void;
}

/** The identity the adapters put on every pre-check of a tool call. */
export interface ToolCallerContext {
  agentId: string;
  /** The `X-Gov-Session-ID` header (the proxy core's session marker), or null; see tool-call-links.ts for why not mcp-session-id. */
  sessionId: string | null;
  /** End user on whose behalf the agent acts, when the caller says (`X-Gov-User`-style header); else 'unknown'. */
  user?: string;
}

export type GovernancePhase = 'pre_check' | 'post_check';

export interface GovernanceVerdict {
  outcome: Outcome;
  reason: string;
}

/**
 * The text of a refusal, the same for every tool protocol: decision and reason first (what a user reads),
 * envelope id last (what support asks for).
 */
export function governanceMessage(phase: GovernancePhase, verdict: GovernanceVerdict, envelopeId: string | null): string {
  const what = verdict.outcome === 'escalate' ? 'Held for review by governance' : 'Blocked by governance';
  const where = phase === 'pre_check' ? 'pre-check' : 'post-check';
  return `${what} at ${where} (${verdict.outcome}): ${verdict.reason}${envelopeId === null ? '' : ` [envelope_id ${envelopeId}]`}`;
}
