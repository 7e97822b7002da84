import { z } from 'zod';
import { Outcome, Tier } from './common.js';

export const HealthResponse = z.object({ status: z.literal('ok') }).loose();

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
