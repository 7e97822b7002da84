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
    /**
     * Evaluate against another set than the active one: `default@1.4.0` (the active set with that pack at
     * that version), `a@1.0.0+b@2.0.0`, or a decision's exact `policy_version` (with `#digest`). docs/policies.md.
     */
    policy_version: z.string().min(1).max(2000).optional(),
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

// ---- versions: /v1/policy/packs (docs/policies.md, "Versions") ----

const PackName = z.string().regex(/^[A-Za-z0-9][\w.-]{0,99}$/, 'a pack name: letters, digits, _ . - (at most 100)');
const PackVersion = z.string().regex(/^[\w.+-]{1,64}$/, 'a version: letters, digits, _ . + - (at most 64)');

export const PackNameParams = z.object({ name: PackName });
export const PackVersionParams = z.object({ name: PackName, version: PackVersion });

/** Who published or activated: an API caller (key id or token subject and tier; never the token) or a policy file. */
export const PolicyActor = z.union([
  z.object({ kind: z.literal('api'), subject: z.string(), tier: z.string() }),
  z.object({ kind: z.literal('file'), file: z.string() }),
]);

export const PackVersionSummary = z.object({
  name: z.string(),
  version: z.string(),
  /** SHA-256 (hex) of the pack's parsed content in canonical JSON: equal digests, same pack. */
  digest: z.string(),
  format: z.enum(['yaml', 'json']),
  rules: z.number().int(),
  description: z.string().nullable(),
  published_at: z.string(),
  published_by: PolicyActor,
  active: z.boolean(),
});
export type PackVersionSummary = z.infer<typeof PackVersionSummary>;

export const PackVersionDetail = PackVersionSummary.extend({
  /** The source as published. */
  text: z.string(),
});

export const ActivePointerView = z.object({
  /** null: the pack was deactivated. */
  version: z.string().nullable(),
  /** Whether a policy file or the API set it (decides what a changed file may do; docs/policies.md). */
  set_by: z.enum(['file', 'api']),
  at: z.string(),
  by: PolicyActor,
});

export const PolicyPacksResponse = z.object({
  /** The active set, as decision.policy_version reports it. */
  policy_version: z.string(),
  packs: z.array(z.object({
    name: z.string(),
    active_version: z.string().nullable(),
    active: ActivePointerView.nullable(),
    latest_version: z.string(),
    versions: z.number().int(),
  })),
});

export const PackHistoryResponse = z.object({
  name: z.string(),
  active_version: z.string().nullable(),
  /** Newest first. */
  versions: z.array(PackVersionSummary),
  /** Activations, deactivations and rollbacks, newest first. */
  activations: z.array(z.object({
    action: z.enum(['activate', 'deactivate']),
    version: z.string().nullable(),
    previous_version: z.string().nullable(),
    at: z.string(),
    by: PolicyActor,
  })),
});

/**
 * A pack to publish: YAML text (Content-Type application/yaml or text/yaml), or JSON: `{format, text}` with
 * the source as a string, or the pack itself as a JSON object.
 */
export const PublishPackBody = z.union([
  z.string().min(1),
  z.strictObject({ format: z.enum(['yaml', 'json']), text: z.string().min(1) }),
  z.record(z.string(), z.unknown()),
]);

export const PublishPackResponse = z.object({
  /** false: this name@version was already published with exactly this content (nothing was written). */
  created: z.boolean(),
  version: PackVersionSummary,
});

export const ActivateRequest = z.strictObject({ version: PackVersion });

export const ActivateResponse = z.object({
  name: z.string(),
  /** null after a deactivation. */
  version: z.string().nullable(),
  previous_version: z.string().nullable(),
  /** The active set from the next decision on. */
  policy_version: z.string(),
  /** false: that version was already active, set through the API; nothing was written. */
  changed: z.boolean(),
  /** true when the version activated was published before the one it replaces. */
  rollback: z.boolean(),
});

/**
 * Several packs moved in one step: one compile of the resulting set, so packs that only fit together (a rule
 * moved from one pack to another) never clash halfway and no decision sees half the change.
 */
export const ActivateSetRequest = z.strictObject({
  packs: z
    .array(z.strictObject({ name: PackName, version: PackVersion.nullable() }))
    .min(1)
    .max(64)
    .refine((list) => new Set(list.map((p) => p.name)).size === list.length, 'each pack at most once'),
});

export const ActivateSetResponse = z.object({
  /** The active set from the next decision on. */
  policy_version: z.string(),
  /** One entry per pack of the request, in its order. */
  packs: z.array(ActivateResponse),
});

export const DiffQuery = z.object({ from: PackVersion, to: PackVersion });

const FieldChange = z.object({ field: z.string(), from: z.unknown(), to: z.unknown() });

export const PackDiffResponse = z.object({
  name: z.string(),
  from: z.string(),
  to: z.string(),
  /** Pack-level fields that differ (version, description, applies_to...). */
  pack: z.array(FieldChange),
  rules: z.object({
    added: z.array(z.record(z.string(), z.unknown())),
    removed: z.array(z.record(z.string(), z.unknown())),
    /** Rules (by id) whose fields differ, with each changed field. */
    changed: z.array(z.object({ id: z.string(), changes: z.array(FieldChange) })),
  }),
});
