// The generated embedded token outside development (issue 16: "never prints it to stdout in production
// (cluster logs keep stdout)"): it goes to <GOV_EMBED_DB>.token, mode 0600, and neither stdout nor stderr
// carries it; in development it is still printed once for the person at the terminal.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { generatedTokenFile, handOverGeneratedToken } from '../../src/cli/generated-token.js';
import { loadSettings, SETTING_DOCS, SettingsError } from '../../src/config/settings.js';
import { freePort, httpJson, runCli, startGovProcess } from '../helpers/gov-process.js';

const TOKEN = 'eyJhbGciOiJub25lIn0.eyJ0aWVyIjoidGVhbSJ9.';

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete env[d.name];
  return { ...env, ...extra };
}

const tempDir = (t: Test) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-token-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};

t.test('in development the token is the printed line and no file is written', async (t) => {
  const dir = tempDir(t);
  const dbPath = join(dir, 'ledger');
  t.equal(handOverGeneratedToken({ isDev: true, dbPath }, TOKEN), `GOV_EMBED_TOKEN=${TOKEN}\n`);
  t.throws(() => statSync(generatedTokenFile({ dbPath })), { code: 'ENOENT' }, 'no token file');
});

t.test('outside development the token goes to <ledger>.token, mode 0600, and the line only names the file', async (t) => {
  const dir = tempDir(t);
  const dbPath = join(dir, 'ledger/');
  const file = join(dir, 'ledger.token');
  t.equal(generatedTokenFile({ dbPath }), file, 'beside the ledger directory, like the head anchor');
  writeFileSync(file, 'an older token\n', { mode: 0o644 });
  const line = handOverGeneratedToken({ isDev: false, dbPath }, TOKEN);
  t.notOk(line.includes(TOKEN), 'the printed line does not carry the token');
  t.ok(line.includes(file), 'it names the file');
  t.equal(readFileSync(file, 'utf8'), `${TOKEN}\n`, 'the file holds the token (one line, as GOV_EMBED_TOKEN_FILE reads it)');
  t.equal(statSync(file).mode & 0o777, 0o600, 'readable by its owner only, even where an older file was 0644');
});

t.test('a token file that cannot be written is an error naming the file, not the token', async (t) => {
  const dir = tempDir(t);
  const dbPath = join(dir, 'no-such-parent', 'ledger');
  try {
    handOverGeneratedToken({ isDev: false, dbPath }, TOKEN);
    t.fail('no error');
  } catch (e) {
    t.match((e as Error).message, /cannot write the generated GOV_EMBED_TOKEN to .*ledger\.token \(ENOENT\): set GOV_EMBED_TOKEN or GOV_EMBED_TOKEN_FILE/);
    t.notOk((e as Error).message.includes(TOKEN));
  }
});

t.test('outside development a :memory: ledger needs a configured token', async (t) => {
  try {
    loadSettings('sidecar', { GOV_ENV: 'production', GOV_EMBED_DB: ':memory:' });
    t.fail('accepted');
  } catch (e) {
    t.ok(e instanceof SettingsError, 'a SettingsError: gov exits 1 with "bad setting"');
    t.match((e as Error).message, /^GOV_EMBED_TOKEN or GOV_EMBED_TOKEN_FILE must be set when GOV_ENV=production and GOV_EMBED_DB=:memory:/);
  }
  t.throws(() => loadSettings('embedded', { GOV_ENV: 'staging', GOV_EMBED_DB: ':memory:' }), /GOV_EMBED_TOKEN or GOV_EMBED_TOKEN_FILE must be set/);
  t.equal(loadSettings('embedded', { GOV_ENV: 'production', GOV_EMBED_DB: ':memory:', GOV_EMBED_TOKEN: 'configured-token-0123456789' }).embedToken, 'configured-token-0123456789');
  t.equal(loadSettings('embedded', { GOV_ENV: 'development', GOV_EMBED_DB: ':memory:' }).embedToken, null, 'development generates and prints it');
});

t.test('gov embedded in production: the token is in the file only, never on stdout or stderr, and it works', async (t) => {
  const dir = tempDir(t);
  const db = join(dir, 'ledger');
  const port = await freePort();
  const p = await startGovProcess('embedded', cleanEnv({ GOV_ENV: 'production', GOV_EMBED_PORT: String(port), GOV_EMBED_DB: db, GOV_LOG_LEVEL: 'info' }));
  t.teardown(() => p.kill());
  const file = `${db}.token`;
  const token = readFileSync(file, 'utf8').trim();
  t.equal(token.split('.').length, 3, 'the file holds the generated JWT');
  t.equal(statSync(file).mode & 0o777, 0o600, 'mode 0600');
  const check = await httpJson(`${p.url}/v1/auth/check`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(check.status, 200, 'the token from the file authenticates');
  p.child.kill('SIGTERM');
  const exit = await p.exited;
  t.equal(exit.code, 0, 'SIGTERM exits 0');
  t.notOk(p.stdout().includes(token), 'stdout never carries the token');
  t.notOk(p.stderr().includes(token), 'stderr never carries the token');
  t.match(p.stdout(), new RegExp(`GOV_EMBED_TOKEN written to ${file.replace(/[.]/g, '\\.')}`), 'stdout says where it is');
  t.notMatch(p.stdout(), /GOV_EMBED_TOKEN=/, 'no GOV_EMBED_TOKEN= line');
});

t.test('gov embedded in production exits 1 when the token file cannot be written', async (t) => {
  const dir = tempDir(t);
  // A directory where the token file goes: renaming the new file onto it fails.
  const db = join(dir, 'ledger');
  mkdirSync(join(`${db}.token`, 'occupied'), { recursive: true });
  const r = await runCli(['embedded'], cleanEnv({ GOV_ENV: 'production', GOV_EMBED_PORT: String(await freePort()), GOV_EMBED_DB: db }), 20_000);
  t.equal(r.code, 1, `exit 1 (stderr: ${r.stderr.slice(-300)})`);
  t.match(r.stderr, /cannot write the generated GOV_EMBED_TOKEN to .*ledger\.token/);
  t.notMatch(r.stdout, /listening on/, 'it never listened');
});
