import { readFileSync } from 'node:fs';
import t from 'tap';
import { ClientSettingsError, defaultQueueDir, resolveClientSettings, SDK_VERSION } from '../../src/client/client-settings.js';

t.test('sdk_version is the package version', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  t.equal(SDK_VERSION, pkg.version);
});

t.test('no gateway address and no key: OSS mode', async (t) => {
  const s = resolveClientSettings({ env: {} });
  t.same(s.target, { kind: 'oss' });
  t.equal(s.failureMode, 'open');
  t.equal(s.enabled, true);
  t.equal(s.killSwitch, false);
  t.equal(s.retries, 2);
  t.equal(s.timeoutMs, 5000);
});

t.test('a key alone points the client at the default gateway address', async (t) => {
  t.same(resolveClientSettings({ env: { GOV_API_KEY: 'k' } }).target, { kind: 'http', url: 'http://localhost:8000' });
  const s = resolveClientSettings({ env: { GOV_KEY: 'python-style' } });
  t.equal(s.apiKey, 'python-style', 'GOV_KEY is accepted too');
  t.equal(resolveClientSettings({ env: { GOV_KEY: 'b', GOV_API_KEY: 'a' } }).apiKey, 'a', 'GOV_API_KEY wins over GOV_KEY');
});

t.test('options win over the environment', async (t) => {
  const env = { GOV_GATEWAY_URL: 'http://env:1/', GOV_API_KEY: 'env-key', GOV_FAILURE_MODE: 'closed', GOV_ENABLED: 'false', GOV_KILL_SWITCH: '1' };
  const fromEnv = resolveClientSettings({ env });
  t.same(fromEnv.target, { kind: 'http', url: 'http://env:1' }, 'a trailing slash is dropped');
  t.equal(fromEnv.failureMode, 'closed');
  t.equal(fromEnv.enabled, false);
  t.equal(fromEnv.killSwitch, true);
  const fromOpts = resolveClientSettings({ env, gatewayUrl: 'https://opt:2', apiKey: 'opt-key', failureMode: 'open', enabled: true, killSwitch: false });
  t.same(fromOpts.target, { kind: 'http', url: 'https://opt:2' });
  t.equal(fromOpts.apiKey, 'opt-key');
  t.equal(fromOpts.failureMode, 'open');
  t.equal(fromOpts.enabled, true);
  t.equal(fromOpts.killSwitch, false);
});

t.test('bad settings are refused naming the setting', async (t) => {
  t.throws(() => resolveClientSettings({ env: { GOV_FAILURE_MODE: 'sometimes' } }), { name: 'ClientSettingsError', message: /GOV_FAILURE_MODE/ });
  t.throws(() => resolveClientSettings({ env: { GOV_ENABLED: 'maybe' } }), /GOV_ENABLED/);
  t.throws(() => resolveClientSettings({ env: { GOV_FAILURE_MODE: 'queue', GOV_QUEUE_MAX_ENTRIES: 'many' } }), /GOV_QUEUE_MAX_ENTRIES/);
  t.throws(() => resolveClientSettings({ env: { GOV_FAILURE_MODE: 'queue' }, queueMaxBytes: 10 }), /queueMaxBytes/);
  t.throws(() => resolveClientSettings({ env: { GOV_GATEWAY_URL: 'ftp://x' } }), ClientSettingsError);
  t.throws(() => resolveClientSettings({ env: {}, retries: -1 }), /retries/);
});

t.test('failure mode queue: its directory and bounds from the options, then the environment, then defaults', async (t) => {
  const fromEnv = resolveClientSettings({ env: { GOV_FAILURE_MODE: 'queue', GOV_QUEUE_DIR: '/var/lib/app/gov-queue', GOV_QUEUE_MAX_ENTRIES: '50', GOV_QUEUE_MAX_BYTES: '65536' } });
  t.same(fromEnv.queue, { dir: '/var/lib/app/gov-queue', maxEntries: 50, maxBytes: 65536, replayIntervalMs: 30_000 });
  const defaults = resolveClientSettings({ env: { GOV_FAILURE_MODE: 'queue' } });
  t.equal(defaults.queue!.dir, defaultQueueDir(), 'one directory per program');
  t.match(defaults.queue!.dir, /gov-client-queue/);
  t.equal(defaults.queue!.maxEntries, 10_000);
  t.equal(defaults.queue!.maxBytes, 16 * 1024 * 1024);
  t.not(defaultQueueDir('/srv/a/main.js', '/'), defaultQueueDir('/srv/b/main.js', '/'), 'two programs of one name do not share a queue');
  t.equal(defaultQueueDir('main.js', '/srv/a'), defaultQueueDir('/srv/a/main.js', '/'), 'a program restarted finds its queue again');
  t.equal(resolveClientSettings({ env: {} }).queue, null, 'no queue under open');
});
