import picomatch from 'picomatch';
import { z } from 'zod';
import { AgentId } from './common.js';

export const ArgLimit = z.strictObject({
  min: z.number().optional(),
  max: z.number().optional(),
  /**
   * A limited argument must be given, at the top level of the arguments: a call without it is refused,
   * since the tool may take the value from somewhere the check did not look. `optional: true` lets a call
   * leave it out (the tool then applies its own default, which the operator accepts).
   */
  optional: z.boolean().optional(),
});

export const ToolDeclaration = z.strictObject({
  name: z.string().min(1).max(200),
  scopes: z.array(z.string().min(1)).optional(),
  max_calls: z.number().int().positive().optional(),
  limits: z.record(z.string(), ArgLimit).optional(),
  /** 0-100; how severe an action this tool performs (feeds the risk engine's action_severity). */
  severity: z.number().min(0).max(100).optional(),
});
export type ToolDeclaration = z.infer<typeof ToolDeclaration>;

export const Manifest = z.strictObject({
  tools: z.array(ToolDeclaration).max(1000),
  /** 0-100; business impact of this agent's actions (feeds the risk engine). */
  business_impact: z.number().min(0).max(100).optional(),
  /**
   * A JSON Schema (draft 2020-12, or draft-07 when its `$schema` names it) the agent's output must meet;
   * the schema check enforces it. Compiled when the manifest is loaded or registered: an invalid schema is
   * refused then (422 with the validator's message), never discovered while scoring.
   */
  output_schema: z.record(z.string(), z.unknown()).optional(),
});
export type Manifest = z.infer<typeof Manifest>;

/** The YAML form in manifests/*.yaml also names its agent. */
export const ManifestFile = Manifest.extend({ agent_id: AgentId });

export const ManifestResponse = Manifest.extend({ agent_id: AgentId, updated_at: z.string().nullable() });

export const AgentParams = z.object({ agent_id: AgentId });

export const ReliabilityResponse = z.object({
  agent_id: AgentId,
  reliability: z.number(),
  executions: z.number().int(),
});

/** GET /v1/agents: a page of agents in id order; `cursor` is the previous page's next_cursor. */
export const AgentListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(50),
  cursor: AgentId.optional(),
  /** Agent id glob (picomatch: `support-*`, `{billing,refunds}-*`); an exact id matches itself. */
  agent_id: z
    .string()
    .min(1)
    .max(200)
    .refine((g) => {
      try {
        picomatch(g);
        return true;
      } catch {
        return false;
      }
    }, 'agent_id must be a glob')
    .optional(),
});
export type AgentListQuery = z.infer<typeof AgentListQuery>;

export const AgentListItem = z.object({
  agent_id: AgentId,
  /** The manifest in force, or null for an agent known only from its audit rows. */
  manifest: Manifest.nullable(),
  /** Where the manifest comes from: a file under manifests/agents/, or PUT over the API; null without one. */
  source: z.enum(['file', 'api']).nullable(),
  /** When the manifest was registered over the API (null for a file or no manifest). */
  updated_at: z.string().nullable(),
  /** Timestamp of the agent's latest validate, pre-check or post-check row; null when it has none. */
  last_activity: z.string().nullable(),
  /** Governed executions (validate and post-check rows). */
  executions: z.number().int(),
});

export const AgentListResponse = z.object({
  items: z.array(AgentListItem),
  next_cursor: z.string().nullable(),
});
