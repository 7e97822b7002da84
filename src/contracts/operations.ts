import { z } from 'zod';
import { Outcome, Tier } from './common.js';

/** One store or link of a health report; a component may add its own fields (the central link its backlog). */
export const ComponentHealth = z.object({
  status: z.enum(['up', 'down']),
  /** How long its probe took (ms); a probe still out at the timeout counts until then. */
  latency_ms: z.number(),
  /** Whether governed calls fail while it is down (what readiness counts). */
  needed_for_calls: z.boolean(),
  /** Why it is down: timeout, unavailable, or the central link's last failure (unreachable, rejected...). */
  error: z.string().optional(),
}).loose();
export type ComponentHealth = z.infer<typeof ComponentHealth>;

/**
 * GET /health (gateway) and /v1/health (embedded, sidecar): 200 with `status: ok` when every component is
 * up, 503 with `status: unavailable` and the components in `down` otherwise. `ready` is what
 * `<health>/ready` answers by (docs/deployment.md, "Health and probes").
 */
export const HealthResponse = z.object({
  status: z.enum(['ok', 'unavailable']),
  ready: z.boolean(),
  down: z.array(z.string()),
  components: z.record(z.string(), ComponentHealth),
});
export type HealthReport = z.infer<typeof HealthResponse>;

/** `<health>/live`: the process answers; no store is asked. */
export const LivenessResponse = z.object({ status: z.literal('ok') });

export const AuthCheckResponse = z.object({ valid: z.literal(true), tier: Tier, subject: z.string() });

export const ReviewItem = z.object({
  envelope_id: z.string(),
  agent_id: z.string(),
  outcome: Outcome,
  reason: z.string(),
  status: z.literal('open'),
  created_at: z.string(),
  review_deadline: z.string(),
});
export type ReviewItem = z.infer<typeof ReviewItem>;

export const ReviewQueueQuery = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(100) });

export const ReviewQueueResponse = z.object({ items: z.array(ReviewItem) });

/**
 * The body POSTed to GOV_REVIEW_WEBHOOK_URL when an item enters the review queue (docs/queues.md): the
 * item as GET /v1/review/queue lists it, never the execution's payload. Delivery is at least once; the
 * X-Gov-Delivery header (the envelope id) lets a receiver drop repeats.
 */
export const ReviewPush = z.object({ event: z.literal('review.item_created'), item: ReviewItem });
export type ReviewPush = z.infer<typeof ReviewPush>;
