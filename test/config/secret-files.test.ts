// <NAME>_FILE (issue 16, "it takes its token from a file or a Secret"): every secret-bearing setting can be
// read from a mounted file, as the official postgres image does; a conflict or a bad file stops the start
// with a message naming the variables and the path, never the content.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { SECRET_SETTINGS, withSecretFiles } from '../../src/config/secret-files.js';
import { loadSettings, SETTING_DOCS, SettingsError, type Mode, type Settings } from '../../src/config/settings.js';
import { runCli } from '../helpers/gov-process.js';

const dir = mkdtempSync(join(tmpdir(), 'gov-secret-files-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
/** A file holding `content`, as a Secret volume would mount it. */
const secretFile = (content: string | Buffer): string => {
  const file = join(dir, `secret-${++n}`);
  writeFileSync(file, content);
  return file;
};

const JWT_SECRET = 'jwt-secret-from-a-file-0123456789abcdef';
const HEX_KEY = 'a'.repeat(64);

// One row per secret-bearing setting: the other settings it needs, and where its value lands.
const CASES: Record<(typeof SECRET_SETTINGS)[number], { mode: Mode; value: string; env?: Record<string, string>; read: (s: Settings) => unknown; expect?: unknown }> = {
  GOV_EMBED_TOKEN: { mode: 'sidecar', value: 'embed-token-from-file', read: (s) => s.embedToken },
  GOV_DATABASE_URL: { mode: 'gateway', value: 'postgres://gov:pw-from-file@db:5432/gov', read: (s) => s.databaseUrl },
  GOV_API_KEYS: { mode: 'gateway', value: 'key-from-file:enterprise', read: (s) => s.apiKeys, expect: [{ key: 'key-from-file', tier: 'enterprise' }] },
  GOV_JWT_SECRET: { mode: 'gateway', value: JWT_SECRET, read: (s) => s.jwtSecret },
  GOV_LEDGER_ANCHOR_KEY: { mode: 'embedded', value: 'anchor-key-from-file-0123456789abcdef', env: { GOV_EMBED_DB: '/tmp/gov-unused-ledger' }, read: (s) => s.ledgerAnchor?.key },
  GOV_AUDIT_ENCRYPTION_KEY: { mode: 'embedded', value: HEX_KEY, read: (s) => s.auditEncryptionKey },
  GOV_KEY: { mode: 'sidecar', value: 'sidecar-key-from-file', env: { GOV_CENTRAL_URL: 'http://central:8000' }, read: (s) => s.replication?.key },
  GOV_REDIS_URL: { mode: 'gateway', value: 'redis://:pw-from-file@cache:6379/0', read: (s) => s.redis?.url },
  GOV_DETECTOR_TOKEN: { mode: 'gateway', value: 'detector-token-from-file', env: { GOV_DETECTOR_URL: 'http://classifier:8000/score' }, read: (s) => s.detector?.token },
  GOV_REVIEW_WEBHOOK_SECRET: { mode: 'gateway', value: 'webhook-secret-from-file', env: { GOV_REVIEW_WEBHOOK_URL: 'https://review.example/hook' }, read: (s) => s.queues.reviewWebhook?.secret },
};

/** Gateway settings need some auth in any environment that has it on; test mode has it off. */
const base = { GOV_ENV: 'test' };

t.test('each secret setting is read from its _FILE, trailing newline removed', async (t) => {
  t.same(Object.keys(CASES).sort(), [...SECRET_SETTINGS].sort(), 'every secret setting has a case here');
  for (const name of SECRET_SETTINGS) {
    const c = CASES[name];
    const file = secretFile(`${c.value}\n`);
    const s = loadSettings(c.mode, { ...base, ...c.env, [`${name}_FILE`]: file });
    t.same(c.read(s), c.expect ?? c.value, `${name}_FILE fills ${name}`);
  }
});

t.test('only trailing newlines are removed: the rest of the content is the value', async (t) => {
  const read = (content: string) => withSecretFiles({ GOV_JWT_SECRET_FILE: secretFile(content) }).GOV_JWT_SECRET;
  t.equal(read('abc'), 'abc', 'no newline');
  t.equal(read('abc\n'), 'abc', 'one newline (kubectl create secret --from-file, editors)');
  t.equal(read('abc\r\n\n'), 'abc', 'CRLF and several newlines, as $(< file) does');
  t.equal(read(' a b \tc '), ' a b \tc ', 'spaces are part of the value');
  t.equal(read('line1\nline2\n'), 'line1\nline2', 'inner newlines stay');
});

t.test('the input environment is not changed, and variables without _FILE pass through', async (t) => {
  const env: NodeJS.ProcessEnv = { GOV_JWT_SECRET_FILE: secretFile(JWT_SECRET), GOV_API_KEYS: 'k:team', OTHER_FILE: '/nonexistent' };
  const out = withSecretFiles(env);
  t.equal(out.GOV_JWT_SECRET, JWT_SECRET);
  t.equal(out.GOV_API_KEYS, 'k:team');
  t.equal(env.GOV_JWT_SECRET, undefined, 'the caller\'s object is untouched');
  const plain = { GOV_API_KEYS: 'k:team' };
  t.equal(withSecretFiles(plain), plain, 'nothing to read: the same object');
  t.equal(withSecretFiles({ GOV_API_KEYS_FILE: '' }).GOV_API_KEYS, undefined, 'an empty _FILE variable is unset, like every other setting');
});

/** loadSettings' message for `env`, checked to be a SettingsError free of `secret`. */
function refusal(t: Test, env: Record<string, string>, secret: string | null, mode: Mode = 'gateway'): string {
  try {
    loadSettings(mode, { ...base, ...env });
  } catch (e) {
    t.ok(e instanceof SettingsError, 'a SettingsError (gov prints "bad setting" and exits 1)');
    if (secret !== null) t.notOk((e as Error).message.includes(secret), 'the message does not quote the secret');
    return (e as Error).message;
  }
  t.fail('the settings were accepted');
  return '';
}

t.test('setting both the variable and its _FILE is refused, naming both', async (t) => {
  const file = secretFile('from-the-file-0123456789abcdef-0123456789');
  const msg = refusal(t, { GOV_JWT_SECRET: 'from-the-env-0123456789abcdef-0123456789', GOV_JWT_SECRET_FILE: file }, 'from-the-');
  t.match(msg, /^GOV_JWT_SECRET and GOV_JWT_SECRET_FILE are both set/);
});

t.test('a file that cannot be used is a clear error naming the variable and the path', async (t) => {
  const missing = join(dir, 'no-such-secret');
  t.match(refusal(t, { GOV_API_KEYS_FILE: missing }, null), new RegExp(`^GOV_API_KEYS_FILE: cannot read ${missing} \\(ENOENT\\)`));

  const folder = join(dir, 'a-folder');
  mkdirSync(folder);
  t.match(refusal(t, { GOV_API_KEYS_FILE: folder }, null), /^GOV_API_KEYS_FILE: .*a-folder is not a file/, 'a directory (a Secret mounted one level too high)');

  t.match(refusal(t, { GOV_EMBED_TOKEN_FILE: secretFile('\n') }, null, 'sidecar'), /^GOV_EMBED_TOKEN_FILE: .* is empty/, 'an empty file is refused, not read as "unset" (which would generate a token)');

  const big = secretFile('x');
  truncateSync(big, 2 * 1024 * 1024);
  t.match(refusal(t, { GOV_API_KEYS_FILE: big }, null), /^GOV_API_KEYS_FILE: .* is larger than/, 'a file far larger than any secret is the wrong file');

  // Root reads a file whatever its mode; an unreadable file is tested only where the mode is enforced.
  const locked = secretFile('locked-secret-0123456789');
  chmodSync(locked, 0o000);
  let readable = true;
  try {
    readFileSync(locked);
  } catch {
    readable = false;
  }
  if (readable) t.comment('running as root: a mode-000 file is readable here, the EACCES case is not exercised');
  else t.match(refusal(t, { GOV_API_KEYS_FILE: locked }, 'locked-secret'), /^GOV_API_KEYS_FILE: cannot read .* \(EACCES\)/);
});

t.test('the settings table lists each _FILE right after its setting, for the same modes', async (t) => {
  for (const name of SECRET_SETTINGS) {
    const i = SETTING_DOCS.findIndex((d) => d.name === name);
    t.ok(i >= 0, `${name} is in SETTING_DOCS`);
    t.equal(SETTING_DOCS[i + 1]?.name, `${name}_FILE`, `${name}_FILE follows it`);
    t.same(SETTING_DOCS[i + 1]?.modes, SETTING_DOCS[i]?.modes, `${name}_FILE applies in the same modes`);
  }
  const deployment = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'deployment.md'), 'utf8');
  for (const name of SECRET_SETTINGS) t.ok(deployment.includes(`${name}_FILE`), `docs/deployment.md names ${name}_FILE`);
});

t.test('gov gateway refuses an unreadable secret file at start: exit 1, the variable named on stderr', async (t) => {
  const missing = join(dir, 'absent-api-keys');
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete env[d.name];
  const r = await runCli(['gateway'], { ...env, GOV_ENV: 'production', GOV_API_KEYS_FILE: missing, GOV_DB_PATH: join(dir, 'gw-ledger'), GOV_PORT: '0' });
  t.equal(r.code, 1, 'exit 1');
  t.match(r.stderr, new RegExp(`^gov: bad setting GOV_API_KEYS_FILE: cannot read ${missing} \\(ENOENT\\)`));
  t.notMatch(r.stdout, /listening on/, 'it never listened');
});
