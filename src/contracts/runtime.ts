import { z } from 'zod';
import { AgentId, EnvelopeId, Framework, JsonObject, Outcome, RiskTier } from './common.js';

/** Spec limit on the validate `output` field. */
export const OUTPUT_MAX_BYTES = 100 * 1024;

const outputObject = JsonObject.refine(
  (o) => Buffer.byteLength(JSON.stringify(o)) <= OUTPUT_MAX_BYTES,
  { message: `output must be at most ${OUTPUT_MAX_BYTES} bytes of JSON` },
);

/** A tool call is either a bare tool name or an object; `arguments` is accepted as an alias of `args`. */
export const ToolCallInput = z.union([
  z.string().min(1).max(200),
  z.object({
    name: z.string().min(1).max(200),
    scope: z.string().max(200).optional(),
    args: JsonObject.optional(),
    arguments: JsonObject.optional(),
    /**
     * Set when the caller had arguments it could not read as one JSON object (a model's tool call with
     * `NaN`, a trailing comma or a fenced block): why. The call is then refused by the tool-trust gate,
     * since a lenient reader on the agent's side may run values no limit saw.
     */
    args_unreadable: z.string().min(1).max(500).optional(),
  }),
]);
export type ToolCallInput = z.infer<typeof ToolCallInput>;

/**
 * Something the model or the agent reads that is neither the user's input nor a tool's result: a system or
 * developer message, an earlier turn, a tool's description, a document, a Responses `instructions`, an MCP
 * server's message. Checked by `context` policy rules (the default pack: prompt injection); a row keeps
 * only its source, length and SHA-256 (docs/api.md).
 */
export const ContextItem = z.object({
  source: z.string().max(100),
  text: z.string(),
});
export type ContextItem = z.infer<typeof ContextItem>;

export const ToolResultInput = z.object({
  name: z.string().min(1).max(200),
  output: z.unknown().optional(),
  error: z.string().nullable().optional(),
});
export type ToolResultInput = z.infer<typeof ToolResultInput>;

export const ExecutionInput = z.object({
  model: z.string().min(1).max(200),
  tools_called: z.array(ToolCallInput).max(1000).default([]),
  tool_results: z.array(ToolResultInput).max(1000).default([]),
  latency_ms: z.number().nonnegative().optional(),
  tokens: z.number().int().nonnegative().optional(),
  prompt_tokens: z.number().int().nonnegative().optional(),
  completion_tokens: z.number().int().nonnegative().optional(),
});
export type ExecutionInput = z.infer<typeof ExecutionInput>;

export const RequestInfo = z.object({
  user: z.string().max(500).default('unknown'),
  input: z.string().default(''),
  session_id: z.string().max(500).nullable().default(null),
  metadata: JsonObject.default({}),
});
export type RequestInfo = z.infer<typeof RequestInfo>;

const sdkVersion = z.string().max(64).optional();

/**
 * How far a client-chosen `timestamp` may lie behind the gateway's clock: a call a client buffered while
 * the gateway was unreachable (the client's `queue` failure mode) is recorded at the time it was made, so
 * long as that is within a day. The bound also caps how far a ledger's `since` scan must look past a row
 * older than `since` (ledger/audit-query.ts): rows are no longer appended in strict time order.
 */
export const CLIENT_TIMESTAMP_MAX_AGE_MS = 24 * 60 * 60_000;
/** How far a client-chosen `timestamp` may lie ahead of the gateway's clock (clock skew between hosts). */
export const CLIENT_TIMESTAMP_MAX_SKEW_MS = 5 * 60_000;

/**
 * A client-chosen envelope id (the idempotency key of a call sent again: a replayed queue entry, a retry
 * after a lost answer). Any UUID but the nil one, which names a decision the client made on its own.
 */
const clientEnvelopeId = EnvelopeId.refine((id) => id !== '00000000-0000-0000-0000-000000000000', { message: 'the nil UUID is reserved for local decisions' }).optional();
/** When the call was made, if not now: ISO 8601 with a zone; bounded by the gateway's clock (CLIENT_TIMESTAMP_*). */
const clientTimestamp = z.iso.datetime({ offset: true }).optional();

export const ValidateRequest = z.object({
  agent_id: AgentId,
  framework: Framework.default('REST'),
  version: z.string().max(64).optional(),
  parent_envelope_id: EnvelopeId.nullable().optional(),
  request: RequestInfo.default({ user: 'unknown', input: '', session_id: null, metadata: {} }),
  execution: ExecutionInput,
  output: outputObject,
  sdk_version: sdkVersion,
  deployment_env: z.string().max(64).optional(),
  /** Sent again with the same id, the call is answered with the stored decision and writes no second row. */
  envelope_id: clientEnvelopeId,
  timestamp: clientTimestamp,
});
export type ValidateRequest = z.infer<typeof ValidateRequest>;

/** ProposedAction: `action` names the tool the agent proposes to call, `params` its arguments. */
export const PreCheckRequest = z.object({
  agent_id: AgentId,
  framework: Framework.default('REST'),
  action: z.string().max(200).optional(),
  params: JsonObject.default({}),
  user: z.string().max(500).default('unknown'),
  input: z.string().default(''),
  model: z.string().max(200).optional(),
  session_id: z.string().max(500).nullable().optional(),
  /** Free-form context recorded with the row (the sidecar records tool-call links here). */
  metadata: JsonObject.optional(),
  /** What else the model reads with this call (ContextItem): checked, and kept in the row by digest. */
  context: z.array(ContextItem).max(10_000).optional(),
  sdk_version: sdkVersion,
  version: z.string().max(64).optional(),
  /** As on validate: the idempotency key of this pre-check. */
  envelope_id: clientEnvelopeId,
  timestamp: clientTimestamp,
});
export type PreCheckRequest = z.infer<typeof PreCheckRequest>;

export const PostCheckRequest = z.object({
  /** Any string: an id that names no pre-check is a 404, not a schema error. */
  pre_check_envelope_id: z.string().min(1).max(100),
  execution: ExecutionInput,
  output: outputObject,
  /** Free-form context recorded with the row (the sidecar records how much of a stream it released or withheld). */
  metadata: JsonObject.optional(),
  /** What else the answer puts in front of the agent (an MCP server's messages): checked, kept by digest. */
  context: z.array(ContextItem).max(10_000).optional(),
  sdk_version: sdkVersion,
  /** No envelope id: a post-check is already idempotent per pre-check (the first result stands). */
  timestamp: clientTimestamp,
});
export type PostCheckRequest = z.infer<typeof PostCheckRequest>;

export const Failure = z.object({
  check: z.string(),
  code: z.string(),
  message: z.string(),
  severity: z.enum(['info', 'warn', 'error', 'critical']),
  path: z.string().optional(),
});
export type Failure = z.infer<typeof Failure>;

export const Validation = z.object({
  schema_score: z.number(),
  evidence_score: z.number(),
  tool_trust_score: z.number(),
  consistency_score: z.number(),
  policy_score: z.number(),
  judge_score: z.number().nullable(),
  historical_reliability: z.number(),
  safety_score: z.number(),
  contradiction_score: z.number(),
  final_confidence: z.number(),
  failures: z.array(Failure),
});
export type Validation = z.infer<typeof Validation>;

export const Risk = z.object({
  tier: RiskTier,
  score: z.number(),
  reason: z.string(),
  action_severity: z.number(),
  business_impact: z.number(),
  confidence_gap: z.number(),
  policy_sensitivity: z.number(),
});
export type Risk = z.infer<typeof Risk>;

export const Decision = z.object({
  outcome: Outcome,
  reason: z.string(),
  policy_version: z.string(),
  score_version: z.string(),
  reviewer_id: z.string().nullable(),
  review_deadline: z.string().nullable(),
  judge_latency_ms: z.number().nullable(),
});
export type Decision = z.infer<typeof Decision>;

/**
 * `validation`, `risk` and `confidence_rationale` are optional because a Free-tier caller gets
 * responses without confidence and risk fields (docs/tiers.md).
 */
export const ValidateResponse = z.object({
  envelope_id: EnvelopeId,
  validation: Validation.optional(),
  risk: Risk.optional(),
  decision: Decision,
  latency_ms: z.number(),
  trust_chain: JsonObject.nullable(),
  governance_disclosure: z.string(),
  confidence_rationale: z.string().optional(),
});
export type ValidateResponse = z.infer<typeof ValidateResponse>;

export const PreCheckResponse = ValidateResponse.omit({ trust_chain: true, confidence_rationale: true });
export type PreCheckResponse = z.infer<typeof PreCheckResponse>;

export const PostCheckResponse = ValidateResponse.extend({ pre_check_envelope_id: EnvelopeId });
export type PostCheckResponse = z.infer<typeof PostCheckResponse>;

export const DecisionRerunResponse = ValidateResponse.extend({ original_envelope_id: EnvelopeId });
export type DecisionRerunResponse = z.infer<typeof DecisionRerunResponse>;

export const KillSwitchSet = z.strictObject({
  active: z.boolean(),
  reason: z.string().max(1000).optional(),
});
export type KillSwitchSet = z.infer<typeof KillSwitchSet>;

export const KillSwitchState = z.object({
  active: z.boolean(),
  reason: z.string().nullable(),
  source: z.enum(['api', 'env']),
  updated_at: z.string().nullable(),
});
export type KillSwitchState = z.infer<typeof KillSwitchState>;

export const EnvelopeParams = z.object({ envelope_id: EnvelopeId });
