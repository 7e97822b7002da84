import { createHmac } from 'node:crypto';
import type { ReviewItem, ReviewPush } from '../contracts/operations.js';
import type { JobHandler } from './job-queue.js';

export interface ReviewWebhookSettings {
  /** GOV_REVIEW_WEBHOOK_URL; never logged (it may carry a token in its query). */
  url: string;
  /** GOV_REVIEW_WEBHOOK_SECRET: HMAC-SHA256 key of the X-Gov-Signature header; null sends none. */
  secret: string | null;
  timeoutMs: number;
}

/** Why an attempt failed, without the target's address or answer body. */
export class WebhookDeliveryError extends Error {}

/**
 * One delivery attempt of a review item to the webhook: a 2xx answer delivers it; any other status, a
 * network error or no answer within the timeout fails the attempt, which the queue retries.
 */
export function reviewWebhookHandler(settings: ReviewWebhookSettings): JobHandler<ReviewItem> {
  return async (item, attempt) => {
    const body = JSON.stringify({ event: 'review.item_created', item } satisfies ReviewPush);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-gov-event': 'review.item_created',
      'x-gov-delivery': item.envelope_id,
      'x-gov-attempt': String(attempt),
    };
    if (settings.secret !== null) headers['x-gov-signature'] = `sha256=${createHmac('sha256', settings.secret).update(body).digest('hex')}`;
    let res: Response;
    try {
      res = await fetch(settings.url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(settings.timeoutMs) });
    } catch (e) {
      const timedOut = (e as Error).name === 'TimeoutError';
      throw new WebhookDeliveryError(timedOut ? `review webhook gave no answer within ${settings.timeoutMs} ms` : 'review webhook unreachable');
    }
    // Drain the body so the connection goes back to the pool.
    await res.arrayBuffer().catch(() => undefined);
    if (res.status < 200 || res.status > 299) throw new WebhookDeliveryError(`review webhook answered ${res.status}`);
  };
}
