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
/** The agent's rate limit refused the call before it was decided; the HTTP answer carries Retry-After. */
export const MCP_RATE_LIMITED = -32053;
