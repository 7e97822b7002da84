import { z } from 'zod';
import { Outcome } from './common.js';
import { Decision, PreCheckRequest, ValidateRequest } from './runtime.js';

/**
 * `POST /v1/policy/evaluate`: a dry run. Exactly one of `validate` (an execution with its output) or
 * `pre_check` (a proposed action) goes through the engine with the active policy set, as it would live, and
 * the answer says which rules matched and what the pipeline would decide. Nothing is recorded.
 */
export const PolicyEvaluateRequest = z
  .strictObject({
    validate: ValidateRequest.optional(),
    pre_check: PreCheckRequest.optional(),
  })
  .refine((r) => (r.validate === undefined) !== (r.pre_check === undefined), { message: 'send exactly one of `validate` or `pre_check`' });
export type PolicyEvaluateRequest = z.infer<typeof PolicyEvaluateRequest>;

export const MatchedRule = z.object({
  id: z.string(),
  pack: z.string(),
  effect: z.string(),
  severity: z.string(),
  amount: z.number(),
  /** `adversarial` for a rule of the adversarial gate, else null. */
  gate: z.string().nullable(),
  /** Where it matched (`output.text`, `tool_results[0].output.body`, `context[1]`...). */
  path: z.string(),
  /** The detector that matched (for a group such as `pii: [...]`, the member that found it), or `condition` for a `when` rule. */
  detector: z.string(),
  message: z.string(),
});

export const PolicyEvaluateResponse = z.object({
  policy_version: z.string(),
  outcome: Outcome,
  decision: Decision,
  /** The policy signal after the adversarial cap, as confidence reads it. */
  policy_score: z.number(),
  safety_score: z.number(),
  /** Every matched rule, most severe first (effect, then severity, pack name, rule id): the first one decides. */
  matched: z.array(MatchedRule),
});
export type PolicyEvaluateResponse = z.infer<typeof PolicyEvaluateResponse>;
