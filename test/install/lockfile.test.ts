import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import semver from 'semver';
import t from 'tap';

const root = join(import.meta.dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));

// Container builds and CI install with `npm ci`, which refuses a lock that drifted from package.json
// (the optional platform packages of a native dependency missing, a version bumped by hand). A dry run
// reads only the two files, offline, so the check costs half a second and reaches no registry.
t.test('npm ci accepts package-lock.json as it is', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-lock-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
  copyFileSync(join(root, 'package-lock.json'), join(dir, 'package-lock.json'));
  const run = await promisify(execFile)('npm', ['ci', '--dry-run', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir }).then(
    () => ({ ok: true, err: '' }),
    (e: { stderr?: string }) => ({ ok: false, err: String(e.stderr ?? e) }),
  );
  t.ok(run.ok, run.ok ? 'npm ci --dry-run succeeded' : `npm ci refused the lock: ${run.err.split('\n').filter((l) => /Missing|Invalid|sync/.test(l)).join('; ')}`);
});

t.test('the lock holds every platform package of the native dependencies (npm ci on Linux and macOS)', async (t) => {
  for (const [path, entry] of Object.entries<any>(lock.packages)) {
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) {
      const nested = `${path}/node_modules/${dep}`;
      t.ok(lock.packages[nested] !== undefined || lock.packages[`node_modules/${dep}`] !== undefined, `${path || 'root'}: optional ${dep} is locked`);
    }
  }
});

t.test('every locked package runs on the oldest Node the package declares', async (t) => {
  const floor = semver.minVersion(pkg.engines.node)!.version;
  const refusing: string[] = [];
  for (const [path, entry] of Object.entries<any>(lock.packages)) {
    const range = entry.engines?.node;
    if (path !== '' && typeof range === 'string' && !semver.satisfies(floor, range)) refusing.push(`${path} (${range})`);
  }
  t.same(refusing, [], `all locked packages accept Node ${floor}`);
});
