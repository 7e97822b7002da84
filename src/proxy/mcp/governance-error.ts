import { governanceMessage, type GovernancePhase, type GovernanceVerdict } from '../tool-governance.js';
import { jsonRpcError, type JsonRpcId, type JsonRpcResponse } from './jsonrpc.js';

/**
 * Governance answers in JSON-RPC's implementation-defined server-error range (-32000..-32099), clear of
 * the codes the MCP SDK already uses there (-32000 connection closed, -32001 request timeout, -32042 URL
 * elicitation required), so a client can tell a governance refusal from a transport failure.
 */
/** The pre-check did not clear the call: the server never saw it. */
export const MCP_GOVERNANCE_REFUSED = -32050;
/** The server answered, the post-check withheld the answer. */
export const MCP_GOVERNANCE_WITHHELD = -32051;
/** A check could not run; the call is refused rather than let through unchecked. */
export const MCP_GOVERNANCE_UNAVAILABLE = -32052;

/**
 * The answer to a tools/call the pre-check refused, on the call's own id. `envelopeId` is null only for a
 * refusal no check produced (the kill switch answering a whole POST).
 */
export function mcpRefusal(id: JsonRpcId | null, verdict: GovernanceVerdict, envelopeId: string | null): JsonRpcResponse {
  return jsonRpcError(id, MCP_GOVERNANCE_REFUSED, governanceMessage('pre_check', verdict, envelopeId), {
    type: 'governance_blocked',
    phase: 'pre_check',
    decision: verdict.outcome,
    reason: verdict.reason,
    envelope_id: envelopeId,
  });
}

/** The answer replacing a tools/call result the post-check withheld. */
export function mcpWithheld(id: JsonRpcId | null, verdict: GovernanceVerdict, envelopeId: string, preCheckEnvelopeId: string): JsonRpcResponse {
  return jsonRpcError(id, MCP_GOVERNANCE_WITHHELD, governanceMessage('post_check', verdict, envelopeId), {
    type: 'governance_withheld',
    phase: 'post_check',
    decision: verdict.outcome,
    reason: verdict.reason,
    envelope_id: envelopeId,
    pre_check_envelope_id: preCheckEnvelopeId,
  });
}

export function mcpGovernanceUnavailable(id: JsonRpcId | null, phase: GovernancePhase): JsonRpcResponse {
  return jsonRpcError(id, MCP_GOVERNANCE_UNAVAILABLE, `Governance unavailable: the ${phase === 'pre_check' ? 'pre-check' : 'post-check'} could not run, so the call was refused`, {
    type: 'governance_unavailable',
    phase,
  });
}

export function isGovernanceError(r: JsonRpcResponse): boolean {
  const c = r.error?.code;
  return c === MCP_GOVERNANCE_REFUSED || c === MCP_GOVERNANCE_WITHHELD || c === MCP_GOVERNANCE_UNAVAILABLE;
}
