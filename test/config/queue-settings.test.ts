import t from 'tap';
import { loadSettings, SettingsError } from '../../src/config/settings.js';

t.test('queue settings: defaults, and the webhook only when its URL is set', async (t) => {
  const q = loadSettings('gateway', { GOV_ENV: 'test' }).queues;
  t.same(q, { reviewWebhook: null, retry: { attempts: 8, backoffMs: 1000, concurrency: 4 }, sweepMs: 30_000, reliabilityCacheTtlMs: 5000 });
  const set = loadSettings('embedded', {
    GOV_REVIEW_WEBHOOK_URL: 'https://hooks.example.test/review?token=abc',
    GOV_REVIEW_WEBHOOK_SECRET: 's3cret',
    GOV_REVIEW_WEBHOOK_TIMEOUT_MS: '750',
    GOV_QUEUE_ATTEMPTS: '3',
    GOV_QUEUE_BACKOFF_MS: '50',
    GOV_QUEUE_CONCURRENCY: '1',
    GOV_QUEUE_SWEEP_MS: '1000',
  }).queues;
  t.same(set.reviewWebhook, { url: 'https://hooks.example.test/review?token=abc', secret: 's3cret', timeoutMs: 750 });
  t.same(set.retry, { attempts: 3, backoffMs: 50, concurrency: 1 });
  t.equal(set.sweepMs, 1000);
  t.equal(loadSettings('gateway', { GOV_ENV: 'test', GOV_RELIABILITY_CACHE_TTL_MS: '0' }).queues.reliabilityCacheTtlMs, 0, '0 turns the cache off');
});

t.test('bad queue settings stop the start naming the setting; the webhook URL is never echoed', async (t) => {
  for (const bad of ['ftp://hooks/secret-token', 'not a url secret-token']) {
    try {
      loadSettings('gateway', { GOV_ENV: 'test', GOV_REVIEW_WEBHOOK_URL: bad });
      t.fail('accepted');
    } catch (e) {
      t.ok(e instanceof SettingsError);
      t.match((e as Error).message, /^GOV_REVIEW_WEBHOOK_URL: must be an http or https URL/);
      t.notMatch((e as Error).message, /secret-token/);
    }
  }
  t.throws(() => loadSettings('gateway', { GOV_ENV: 'test', GOV_QUEUE_ATTEMPTS: '0' }), /GOV_QUEUE_ATTEMPTS/);
  t.throws(() => loadSettings('gateway', { GOV_ENV: 'test', GOV_QUEUE_BACKOFF_MS: '-1' }), /GOV_QUEUE_BACKOFF_MS/);
  t.throws(() => loadSettings('gateway', { GOV_ENV: 'test', GOV_RELIABILITY_CACHE_TTL_MS: 'soon' }), /GOV_RELIABILITY_CACHE_TTL_MS/);
});
