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
