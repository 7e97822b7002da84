import { z } from 'zod';

export const Outcome = z.enum(['approve', 'retry', 'request_evidence', 'escalate', 'block', 'pending']);
export type Outcome = z.infer<typeof Outcome>;

export const RiskTier = z.enum(['low', 'medium', 'high', 'critical']);
export type RiskTier = z.infer<typeof RiskTier>;

export const Framework = z.enum(['LangChain', 'LangGraph', 'CrewAI', 'OpenAI Agents', 'Claude Agents', 'MCP', 'Custom', 'REST']);
export type Framework = z.infer<typeof Framework>;

/** Spec: agent_id must match ^[\w\-\.]+$ . The length cap keeps ids usable as ledger index keys. */
export const AgentId = z.string().min(1).max(200).regex(/^[\w\-.]+$/, 'agent_id must match ^[\\w\\-\\.]+$');

export const JsonObject = z.record(z.string(), z.unknown());
export type JsonObject = z.infer<typeof JsonObject>;

export const EnvelopeId = z.uuid();

export const Tier = z.enum(['free', 'developer', 'team', 'enterprise']);
export type Tier = z.infer<typeof Tier>;
