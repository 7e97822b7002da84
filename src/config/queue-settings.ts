import { z } from 'zod';
import type { RetryPolicy } from '../runtime/job-queue.js';
import type { ReviewWebhookSettings } from '../runtime/review-webhook.js';

/** The job queues (docs/queues.md): BullMQ with GOV_REDIS_URL, else in process. */
export interface QueueSettings {
  /** The review push's target; null: review items are listed only (GET /v1/review/queue), never pushed. */
  reviewWebhook: ReviewWebhookSettings | null;
  retry: RetryPolicy;
  /** How often pushes the queue could not take (Redis down, a crash) are handed to it again; also their minimum age. */
  sweepMs: number;
  /** GOV_RELIABILITY_CACHE_TTL_MS: how long an agent's history stays cached in Redis; 0 reads the store every time. */
  reliabilityCacheTtlMs: number;
}

type Modes = Array<'embedded' | 'gateway' | 'sidecar'>;
const ALL: Modes = ['embedded', 'gateway', 'sidecar'];

export const QUEUE_SETTING_DOCS: Array<{ name: string; modes: Modes; default: string; help: string }> = [
  { name: 'GOV_REVIEW_WEBHOOK_URL', modes: ALL, default: '', help: 'http(s) URL POSTed each item entering the review queue (at least once; X-Gov-Delivery names it); unset: items are only listed by GET /v1/review/queue' },
  { name: 'GOV_REVIEW_WEBHOOK_SECRET', modes: ALL, default: '', help: 'HMAC-SHA256 key: each push carries X-Gov-Signature: sha256=<hex of the body> (never logged)' },
  { name: 'GOV_REVIEW_WEBHOOK_TIMEOUT_MS', modes: ALL, default: '5000', help: 'the longest one push attempt waits for the webhook\'s answer' },
  { name: 'GOV_QUEUE_ATTEMPTS', modes: ALL, default: '8', help: 'attempts per job (the first included); a job failing all of them is dead-lettered (docs/queues.md)' },
  { name: 'GOV_QUEUE_BACKOFF_MS', modes: ALL, default: '1000', help: 'wait before a job\'s second attempt; each later wait doubles (8 attempts: about 2 minutes in all)' },
  { name: 'GOV_QUEUE_CONCURRENCY', modes: ALL, default: '4', help: 'jobs of one queue this process runs at once' },
  { name: 'GOV_QUEUE_SWEEP_MS', modes: ALL, default: '30000', help: 'how often pushes the queue could not take (Redis down, a crash) are handed to it again, once at least this old' },
  { name: 'GOV_RELIABILITY_CACHE_TTL_MS', modes: ['gateway'], default: '5000', help: 'with GOV_REDIS_URL: how long an agent\'s history (the reliability signal) stays cached in Redis, so how stale it may be; 0: read the store on every decision' },
];

export function loadQueueSettings(
  get: (k: string) => string | undefined,
  parse: <T>(name: string, schema: z.ZodType<T>, raw: string) => T,
): QueueSettings {
  const url = get('GOV_REVIEW_WEBHOOK_URL');
  return {
    // The URL may carry a token: the message names the setting and never echoes it.
    reviewWebhook: url === undefined || url === '' ? null : {
      url: parse('GOV_REVIEW_WEBHOOK_URL', z.string().refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), 'must be an http or https URL'), url),
      secret: get('GOV_REVIEW_WEBHOOK_SECRET') || null,
      timeoutMs: parse('GOV_REVIEW_WEBHOOK_TIMEOUT_MS', z.coerce.number().int().min(1).max(600_000), get('GOV_REVIEW_WEBHOOK_TIMEOUT_MS') ?? '5000'),
    },
    retry: {
      attempts: parse('GOV_QUEUE_ATTEMPTS', z.coerce.number().int().min(1).max(100), get('GOV_QUEUE_ATTEMPTS') ?? '8'),
      backoffMs: parse('GOV_QUEUE_BACKOFF_MS', z.coerce.number().int().min(1).max(3_600_000), get('GOV_QUEUE_BACKOFF_MS') ?? '1000'),
      concurrency: parse('GOV_QUEUE_CONCURRENCY', z.coerce.number().int().min(1).max(1000), get('GOV_QUEUE_CONCURRENCY') ?? '4'),
    },
    sweepMs: parse('GOV_QUEUE_SWEEP_MS', z.coerce.number().int().min(100).max(86_400_000), get('GOV_QUEUE_SWEEP_MS') ?? '30000'),
    reliabilityCacheTtlMs: parse('GOV_RELIABILITY_CACHE_TTL_MS', z.coerce.number().int().min(0).max(3_600_000), get('GOV_RELIABILITY_CACHE_TTL_MS') ?? '5000'),
  };
}
