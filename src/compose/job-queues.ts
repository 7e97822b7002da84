import type { Logger } from 'pino';
import type { Settings } from '../config/settings.js';
import type { ReviewItem } from '../contracts/operations.js';
import { InProcessJobQueues } from '../runtime/in-process-queue.js';
import type { JobQueue, JobQueues, QueueObserver } from '../runtime/job-queue.js';
import { reviewWebhookHandler } from '../runtime/review-webhook.js';
import { ThrottledLog } from '../telemetry/throttled-log.js';
import type { GovMetrics } from '../telemetry/metrics.js';

export const REVIEW_PUSH_QUEUE = 'review-push';

export interface OpenedQueues {
  queues: JobQueues;
  reviewPush: JobQueue<ReviewItem>;
}

/**
 * The job queues of this process, or null when nothing needs one (no GOV_REVIEW_WEBHOOK_URL): BullMQ,
 * shared by every replica, with GOV_REDIS_URL (the full gateway); in process otherwise. BullMQ is loaded
 * only then, so the embedded gateway and the sidecar never load it. The LLM judge's queue (ROADMAP item 1)
 * opens here on the same `queues` with its own handler.
 */
export async function openJobQueues(settings: Settings, logger: Logger, metrics: GovMetrics): Promise<OpenedQueues | null> {
  const webhook = settings.queues.reviewWebhook;
  if (webhook === null) return null;
  const attemptLog = new ThrottledLog((fields, msg) => logger.warn(fields, msg));
  const observer: QueueObserver = {
    attemptFailed(queue, jobId, attempt, error) {
      metrics.queueAttemptsFailed.inc({ queue });
      attemptLog.log({ queue, job_id: jobId, attempt, err: { message: error.message } }, 'job attempt failed; it will be retried unless it was the last');
    },
    deadLettered(queue, jobId, error) {
      metrics.queueDeadLettered.inc({ queue });
      logger.error({ queue, job_id: jobId, attempts: settings.queues.retry.attempts, err: { message: error.message } }, 'job dead-lettered: every attempt failed');
    },
  };
  let queues: JobQueues;
  if (settings.redis !== null) {
    const { BullMqJobQueues } = await import('../store/bullmq-queue.js');
    queues = new BullMqJobQueues(settings.redis, logger, observer);
  } else {
    queues = new InProcessJobQueues(observer);
  }
  const reviewPush = queues.open(REVIEW_PUSH_QUEUE, reviewWebhookHandler(webhook), settings.queues.retry);
  logger.info({ queue: REVIEW_PUSH_QUEUE, backend: queues.kind, attempts: settings.queues.retry.attempts }, 'review items are pushed to the review webhook');
  return { queues, reviewPush };
}
