// The image's recipe (issue 16, "a lint of the Dockerfile by a test"): Docker is not available here, so the
// Dockerfile and .dockerignore are read and held to the rules of test/helpers/dockerfile-rules.ts, with
// the facts taken from the code (the paths the runtime reads, the ports, the injector's UID). Each rule is
// also shown to catch a broken Dockerfile.
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { INJECTOR_SETTING_DOCS, loadInjectorSettings } from '../../src/config/injector-settings.js';
import { PACKAGE_ROOT, SETTING_DOCS } from '../../src/config/settings.js';
import { MODEL_PATH } from '../../src/policy/injection/model.js';
import { BUNDLED_MANIFEST_DIR, BUNDLED_MANIFEST_ROOT, BUNDLED_POLICY_DIR } from '../../src/policy/paths.js';
import { MIGRATIONS_DIR } from '../../src/ledger/postgres-migrations.js';
import { dockerignore, instructions, parseDockerfile } from '../helpers/dockerfile.js';
import { dockerfileProblems, type ImageFacts } from '../helpers/dockerfile-rules.js';

const root = join(import.meta.dirname, '..', '..');
const DOCKERFILE = readFileSync(join(root, 'Dockerfile'), 'utf8');
const DOCKERIGNORE = readFileSync(join(root, '.dockerignore'), 'utf8');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const tsconfig = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8'));

const defaultPort = (name: string) => Number([...SETTING_DOCS, ...INJECTOR_SETTING_DOCS].find((d) => d.name === name)!.default);
const fromRoot = (abs: string) => relative(PACKAGE_ROOT, abs).replace(/\/$/, '');
const FACTS: ImageFacts = {
  root,
  nodeEngines: pkg.engines.node,
  binGov: pkg.bin.gov,
  outDir: tsconfig.compilerOptions.outDir,
  sidecarUid: loadInjectorSettings({}).sidecar.uid,
  // Read from the modules that resolve them, so a new shipped directory cannot be forgotten here.
  runtimePaths: [BUNDLED_POLICY_DIR, MODEL_PATH, BUNDLED_MANIFEST_DIR, BUNDLED_MANIFEST_ROOT, join(PACKAGE_ROOT, 'manifests', 'rate-limits.yaml'), MIGRATIONS_DIR].map(fromRoot),
  ports: ['GOV_PORT', 'GOV_EMBED_PORT', 'GOV_PROXY_PORT', 'GOV_INJECTOR_PORT'].map(defaultPort),
};

t.test('the facts the rules use are what the code says', async (t) => {
  t.same(FACTS.runtimePaths, ['policies', 'policies/models/injection-model.json', 'manifests/agents', 'manifests', 'manifests/rate-limits.yaml', 'migrations']);
  t.same(FACTS.ports, [8000, 8765, 15080, 8443]);
  t.equal(FACTS.sidecarUid, 10001);
  t.equal(FACTS.binGov, 'dist/cli/main.js');
});

t.test('the Dockerfile and .dockerignore keep every rule', async (t) => {
  t.same(dockerfileProblems(DOCKERFILE, DOCKERIGNORE, FACTS), []);
});

t.test('the parser: continuations, comments inside them, stages, ARG defaults in FROM', async (t) => {
  const ins = instructions('# c\nARG X=1\nFROM node:${X} AS a\nRUN one \\\n  # dropped\n  two \\\n\n  three\nCMD ["x"]\n');
  t.same(ins.map((i) => [i.keyword, i.args, i.line]), [['ARG', 'X=1', 2], ['FROM', 'node:${X} AS a', 3], ['RUN', 'one two three', 4], ['CMD', '["x"]', 9]]);
  const d = parseDockerfile('ARG IMG=node:20.20.2-bookworm-slim\nFROM ${IMG} AS build\nFROM build AS next\n');
  t.same(d.stages.map((s) => [s.name, s.image]), [['build', 'node:20.20.2-bookworm-slim'], ['next', 'build']]);
});

t.test('.dockerignore is read as Docker reads it: last match wins, a directory covers its files', async (t) => {
  const ignored = dockerignore(DOCKERIGNORE);
  for (const p of ['node_modules', 'node_modules/lmdb/package.json', '.git', '.git/HEAD', 'dist/cli/main.js', 'test/cli/cli.test.ts', '.env', 'src/.env', 'policies/node_modules/x', 'README.md', 'Dockerfile']) t.ok(ignored(p), `${p} stays out`);
  for (const p of ['package.json', 'package-lock.json', 'tsconfig.json', 'src/cli/main.ts', 'policies/models/injection-model.json', 'manifests/rate-limits.yaml', 'migrations/0001_init.sql']) t.notOk(ignored(p), `${p} is sent`);
});

// Each mutation breaks one rule; the lint must name it.
const MUTATIONS: Array<[string, (f: string) => string, RegExp, string?]> = [
  ['a stage without a name', (f) => f.replace('AS deps', ''), /every stage needs a name/],
  ['node:latest', (f) => f.replace('ARG NODE_IMAGE=node:20.20.2-bookworm-slim', 'ARG NODE_IMAGE=node:latest'), /not pinned/],
  ['node:20-slim (no patch release)', (f) => f.replace('ARG NODE_IMAGE=node:20.20.2-bookworm-slim', 'ARG NODE_IMAGE=node:20-bookworm-slim'), /pinned to a patch release/],
  ['Node 22', (f) => f.replace('ARG NODE_IMAGE=node:20.20.2-bookworm-slim', 'ARG NODE_IMAGE=node:22.12.0-bookworm-slim'), /is not Node 20/],
  ['Node 20 older than engines', (f) => f.replace('ARG NODE_IMAGE=node:20.20.2-bookworm-slim', 'ARG NODE_IMAGE=node:20.10.0-bookworm-slim'), /does not satisfy engines/],
  ['root', (f) => f.replace('USER 10001:10001', 'USER root'), /numeric USER/],
  ['uid 0', (f) => f.replace('USER 10001:10001', 'USER 0:0'), /runs as root/],
  ['no USER', (f) => f.replace('USER 10001:10001\n', ''), /numeric USER .*found none/],
  ['shell-form entrypoint', (f) => f.replace('ENTRYPOINT ["tini", "--", "/app/dist/cli/main.js"]', 'ENTRYPOINT /app/dist/cli/main.js'), /exec \(JSON\) form/],
  ['no tini', (f) => f.replace('ENTRYPOINT ["tini", "--", "/app/dist/cli/main.js"]', 'ENTRYPOINT ["/app/dist/cli/main.js"]'), /start with tini/],
  ['node instead of the launcher', (f) => f.replace('ENTRYPOINT ["tini", "--", "/app/dist/cli/main.js"]', 'ENTRYPOINT ["tini", "--", "node", "/app/dist/cli/main.js"]'), /launcher sizes the sidecar's heap/],
  ['ADD of a URL', (f) => f.replace('COPY migrations ./migrations', 'ADD https://example.com/m.tgz ./migrations'), /ADD of a remote URL/],
  ['npm install', (f) => f.replace('RUN npm ci --omit=dev', 'RUN npm install --omit=dev'), /use npm ci/],
  ['dev dependencies shipped', (f) => f.replace('npm ci --omit=dev', 'npm ci'), /without --omit=dev/],
  ['prepare run in the deps stage', (f) => f.replace('npm ci --omit=dev --ignore-scripts', 'npm ci --omit=dev'), /without --ignore-scripts/],
  ['a secret ENV', (f) => f.replace('ENV NODE_ENV=production', 'ENV GOV_EMBED_TOKEN=abc NODE_ENV=production'), /GOV_EMBED_TOKEN looks like a secret/],
  ['a secret ARG', (f) => f.replace('ARG NODE_IMAGE', 'ARG NPM_TOKEN=x\nARG NODE_IMAGE'), /NPM_TOKEN looks like a secret/],
  ['binding 0.0.0.0 in the image', (f) => f.replace('ENV NODE_ENV=production', 'ENV GOV_HOST=0.0.0.0 NODE_ENV=production'), /GOV_HOST would make every container listen/],
  ['the ledger off the volume', (f) => f.replace('GOV_EMBED_DB=/var/lib/gov/ledger', 'GOV_EMBED_DB=/app/.gov/ledger'), /GOV_EMBED_DB .* must default to a path on the VOLUME/],
  ['no VOLUME', (f) => f.replace('VOLUME ["/var/lib/gov"]\n', ''), /no VOLUME/],
  ['policies not copied', (f) => f.replace('COPY policies ./policies\n', ''), /does not put policies under \/app/],
  ['policies copied flat (a directory\'s contents land at the destination)', (f) => f.replace('COPY policies ./policies', 'COPY policies ./'), /does not put policies under \/app/],
  ['package.json not copied', (f) => f.replace('COPY package.json ./\n', ''), /does not put package\.json under/],
  ['migrations not copied', (f) => f.replace('COPY migrations ./migrations\n', ''), /does not put migrations under/],
  ['a COPY source that does not exist', (f) => f.replace('COPY migrations ./migrations', 'COPY migrations ./migrations\nCOPY schemas ./schemas'), /COPY schemas: not in the repository/],
  ['a COPY --from of a stage that does not make it', (f) => f.replace('COPY --from=build /app/dist ./dist', 'COPY --from=build /app/build ./dist'), /does not make it/],
  ['a COPY --from of an unknown stage', (f) => f.replace('--from=deps', '--from=prod'), /no earlier stage/],
  ['sources copied into the runtime', (f) => f.replace('COPY migrations ./migrations', 'COPY migrations ./migrations\nCOPY src ./src'), /copies src, which the runtime does not read/],
  ['a port not exposed', (f) => f.replace('EXPOSE 8000 8765 15080 8443', 'EXPOSE 8000'), /EXPOSE lacks 8765/],
  ['NODE_ENV unset', (f) => f.replace('ENV NODE_ENV=production \\\n    ', 'ENV '), /NODE_ENV=production/],
  ['single stage', (f) => 'FROM node:20.20.2-bookworm-slim AS only\n' + f.split('FROM ${NODE_IMAGE} AS runtime\n')[1], /at least three stages/],
  ['curl | sh', (f) => f.replace('RUN npm run build', 'RUN curl -fsSL https://x.example/i.sh | sh && npm run build'), /piped from the network/],
];

t.test('each rule catches the Dockerfile that breaks it', async (t) => {
  for (const [what, mutate, expected] of MUTATIONS) {
    const broken = mutate(DOCKERFILE);
    t.not(broken, DOCKERFILE, `${what}: the mutation applies (the Dockerfile still has the text it edits)`);
    const problems = dockerfileProblems(broken, DOCKERIGNORE, FACTS);
    t.ok(problems.some((p) => expected.test(p)), `${what}: ${problems.join(' | ') || 'no problem found'}`);
  }
});

t.test('each .dockerignore rule catches the file that breaks it', async (t) => {
  const check = (ignoreText: string, expected: RegExp, what: string) => {
    const problems = dockerfileProblems(DOCKERFILE, ignoreText, FACTS);
    t.ok(problems.some((p) => expected.test(p)), `${what}: ${problems.join(' | ') || 'no problem found'}`);
  };
  check(DOCKERIGNORE.replace('*\n', ''), /lets \.git into the build context/, 'no catch-all');
  check(DOCKERIGNORE.replace('**/node_modules\n', ''), /lets src\/node_modules into the build context/, 'nested node_modules');
  check(`${DOCKERIGNORE}\npolicies/models\n`, /COPY policies: \.dockerignore leaves out policies\/models\/injection-model\.json/, 'a shipped file left out');
  check(DOCKERIGNORE.replace('!migrations/\n', ''), /COPY migrations: \.dockerignore leaves out migrations\//, 'a COPY source not let in');
});
