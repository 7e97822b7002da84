import t from 'tap';
import { loadSettings, SettingsError } from '../../src/config/settings.js';

t.test('GOV_REDIS_URL selects the shared limiter on the gateway', async (t) => {
  t.equal(loadSettings('gateway', { GOV_ENV: 'test' }).redis, null, 'unset: in process');
  t.same(loadSettings('gateway', { GOV_ENV: 'test', GOV_REDIS_URL: 'redis://:pw@10.0.0.5:6380/2' }).redis, { url: 'redis://:pw@10.0.0.5:6380/2', keyPrefix: 'gov:', timeoutMs: 100 });
  t.same(loadSettings('gateway', { GOV_ENV: 'test', GOV_REDIS_URL: 'rediss://cache:6379', GOV_REDIS_PREFIX: 'prod:{gw}:', GOV_REDIS_TIMEOUT_MS: '250' }).redis, { url: 'rediss://cache:6379', keyPrefix: 'prod:{gw}:', timeoutMs: 250 });
  t.equal(loadSettings('embedded', { GOV_REDIS_URL: 'redis://x:6379' }).redis, null, 'the embedded gateway counts in process');
});

t.test('a bad GOV_REDIS_URL is refused without echoing it (it may carry a password)', async (t) => {
  for (const bad of ['http://:secret-pw@host:6379', 'not a url secret-pw']) {
    try {
      loadSettings('gateway', { GOV_ENV: 'test', GOV_REDIS_URL: bad });
      t.fail('accepted');
    } catch (e) {
      t.ok(e instanceof SettingsError);
      t.match((e as Error).message, /^GOV_REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/);
      t.notMatch((e as Error).message, /secret-pw/);
    }
  }
  t.throws(() => loadSettings('gateway', { GOV_ENV: 'test', GOV_REDIS_URL: 'redis://h', GOV_REDIS_TIMEOUT_MS: '0' }), /GOV_REDIS_TIMEOUT_MS/);
  t.throws(() => loadSettings('gateway', { GOV_ENV: 'test', GOV_REDIS_URL: 'redis://h', GOV_REDIS_PREFIX: 'a b' }), /GOV_REDIS_PREFIX/);
});
