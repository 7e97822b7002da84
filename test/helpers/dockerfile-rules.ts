// The rules the image's Dockerfile and .dockerignore must keep (issue 16, "Image"). Each returns the
// problems it finds, so test/image/dockerfile.test.ts can show both that the real files pass and that a
// broken file is caught.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import semver from 'semver';
import { dockerignore, execForm, parseCopy, parseDockerfile, parseEnv, workdirAt, type Dockerfile, type Stage } from './dockerfile.js';

export interface ImageFacts {
  /** The repository root (the build context). */
  root: string;
  /** package.json's engines.node. */
  nodeEngines: string;
  /** package.json's bin.gov, relative to the package root (dist/cli/main.js). */
  binGov: string;
  /** tsconfig.json's outDir (dist). */
  outDir: string;
  /** The UID the injector runs the sidecar as (GOV_INJECTOR_SIDECAR_UID's default). */
  sidecarUid: number;
  /** Paths under the package root the runtime reads (policies/, policies/models/..., manifests/, migrations/). */
  runtimePaths: string[];
  /** Default ports of the modes (GOV_PORT, GOV_EMBED_PORT, GOV_PROXY_PORT, GOV_INJECTOR_PORT). */
  ports: number[];
}

const SECRET_NAME = /TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH/i;
/** The settings that make gov listen beyond loopback: only a deployment may set them (docs/kubernetes.md). */
const BIND_SETTINGS = ['GOV_HOST', 'GOV_PROXY_HOST', 'GOV_INJECTOR_HOST'];

const finalStage = (d: Dockerfile): Stage => d.stages[d.stages.length - 1];
const runs = (s: Stage): string[] => s.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
const envOf = (s: Stage): Map<string, string> => new Map(s.instructions.filter((i) => i.keyword === 'ENV').flatMap(parseEnv));
const stageByName = (d: Dockerfile, name: string): { stage: Stage; index: number } | null => {
  const index = d.stages.findIndex((s) => s.name === name);
  return index < 0 ? null : { stage: d.stages[index], index };
};

function filesUnder(root: string, rel: string): string[] {
  const abs = join(root, rel);
  if (!statSync(abs).isDirectory()) return [rel];
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

/** Every problem of the Dockerfile and .dockerignore, as sentences; [] when the image recipe is sound. */
export function dockerfileProblems(dockerfileText: string, dockerignoreText: string, facts: ImageFacts): string[] {
  const problems: string[] = [];
  const d = parseDockerfile(dockerfileText);
  const ignored = dockerignore(dockerignoreText);

  // Multi-stage, every stage named (COPY --from names them, never numbers).
  if (d.stages.length < 3) problems.push(`expected at least three stages (build, production dependencies, runtime), found ${d.stages.length}`);
  const names = d.stages.map((s) => s.name);
  if (names.some((n) => n === null)) problems.push(`every stage needs a name (FROM ... AS <name>): lines ${d.stages.filter((s) => s.name === null).map((s) => s.line).join(', ')}`);
  if (new Set(names).size !== names.length) problems.push('stage names must be unique');

  // Base images: a patch release of Node 20 the package accepts; never latest, never unresolved.
  for (const s of d.stages) {
    if (names.includes(s.image)) continue;
    const m = /^(?:[\w.-]+\/)*node:(\d+\.\d+\.\d+)(-[\w.-]+)?(@sha256:[0-9a-f]{64})?$/.exec(s.image);
    if (s.image.includes('$')) problems.push(`line ${s.line}: FROM ${s.image} has an ARG without a default`);
    else if (/:latest\b/.test(s.image) || !s.image.includes(':')) problems.push(`line ${s.line}: FROM ${s.image} is not pinned (no tag, or latest)`);
    else if (!m) problems.push(`line ${s.line}: FROM ${s.image} is not a node image pinned to a patch release (node:20.x.y-...)`);
    else {
      if (semver.major(m[1]) !== 20) problems.push(`line ${s.line}: FROM ${s.image} is not Node 20`);
      if (!semver.satisfies(m[1], facts.nodeEngines)) problems.push(`line ${s.line}: Node ${m[1]} does not satisfy engines.node ${facts.nodeEngines}`);
    }
  }

  for (const s of d.stages) {
    for (const ins of s.instructions) {
      if (ins.keyword === 'ADD' && /(^|\s)(https?|git|ssh):\/\/|(^|\s)git@/.test(ins.args)) problems.push(`line ${ins.line}: ADD of a remote URL (fetch it in a RUN with a checksum, or COPY it)`);
      if (ins.keyword === 'RUN' && /\bnpm\s+(install|i|add)\b/.test(ins.args)) problems.push(`line ${ins.line}: npm install: use npm ci, which installs exactly the lock`);
      if (ins.keyword === 'RUN' && /\b(curl|wget)\b[^|]*\|\s*(ba|z)?sh\b/.test(ins.args)) problems.push(`line ${ins.line}: a script piped from the network into a shell`);
      if (ins.keyword === 'RUN' && /\bapt-get\s+install\b/.test(ins.args) && !/--no-install-recommends/.test(ins.args)) problems.push(`line ${ins.line}: apt-get install without --no-install-recommends`);
      if (ins.keyword === 'ARG' || ins.keyword === 'ENV') {
        const pairs = ins.keyword === 'ENV' ? parseEnv(ins) : [[ins.args.split('=')[0].trim(), ''] as [string, string]];
        for (const [name] of pairs) {
          if (SECRET_NAME.test(name)) problems.push(`line ${ins.line}: ${ins.keyword} ${name} looks like a secret; secrets come from the deployment (_FILE settings, Secrets), never from the image`);
          if (BIND_SETTINGS.includes(name)) problems.push(`line ${ins.line}: ENV ${name} would make every container listen beyond loopback; the deployment sets it where needed`);
        }
      }
    }
  }
  for (const [name, value] of d.globalArgs) if (SECRET_NAME.test(name) || SECRET_NAME.test(value)) problems.push(`ARG ${name} looks like a secret`);

  const last = finalStage(d);
  if (last === undefined) return [...problems, 'no FROM at all'];

  // Who it runs as: a numeric non-root UID, the one the injector declares for the sidecar.
  const users = last.instructions.filter((i) => i.keyword === 'USER');
  const user = users[users.length - 1]?.args.trim();
  const uid = user === undefined ? null : /^(\d+)(:\d+)?$/.exec(user);
  if (uid === null) problems.push(`the last stage must end as a numeric USER (uid or uid:gid), found ${user ?? 'none'}: runAsNonRoot can only verify a number`);
  else if (Number(uid[1]) === 0) problems.push('the last stage runs as root');
  else if (Number(uid[1]) !== facts.sidecarUid) problems.push(`USER ${uid[1]} is not the injector's sidecar UID ${facts.sidecarUid}`);

  // The entrypoint: tini, then gov, in exec form (a shell in between would eat SIGTERM). gov is run as a
  // program, not by `node`: its preamble execs node with the sidecar's heap flags (cli/main.ts).
  const entries = last.instructions.filter((i) => i.keyword === 'ENTRYPOINT');
  const entry = entries.length === 0 ? null : execForm(entries[entries.length - 1].args);
  const workdir = workdirAt(last);
  const govPath = `${workdir.replace(/\/$/, '')}/${facts.binGov}`;
  if (entry === null) problems.push('ENTRYPOINT must be in exec (JSON) form');
  else {
    if (!/(^|\/)tini$/.test(entry[0] ?? '')) problems.push(`ENTRYPOINT must start with tini (signal forwarding, reaping), found ${entry[0]}`);
    if (JSON.stringify(entry.slice(1)) !== JSON.stringify(['--', govPath])) problems.push(`ENTRYPOINT must run ["tini", "--", "${govPath}"] so that args: [sidecar] selects the mode and gov's launcher sizes the sidecar's heap, found ${JSON.stringify(entry)}`);
  }
  if (!runs(last).some((r) => /\bapt-get\s+install\b.*\btini\b/.test(r))) problems.push('the last stage does not install tini');

  const env = envOf(last);
  if (env.get('NODE_ENV') !== 'production') problems.push('the last stage must set NODE_ENV=production');
  const volumes = last.instructions.filter((i) => i.keyword === 'VOLUME').flatMap((i) => execForm(i.args) ?? i.args.split(/\s+/));
  if (volumes.length === 0) problems.push('no VOLUME: with a read-only root filesystem the ledger needs one');
  for (const name of ['GOV_EMBED_DB', 'GOV_DB_PATH']) {
    const v = env.get(name);
    if (v === undefined || !volumes.some((vol) => v.startsWith(`${vol.replace(/\/$/, '')}/`))) problems.push(`${name} (${v ?? 'unset'}) must default to a path on the VOLUME (${volumes.join(', ') || 'none'}): the root filesystem is read-only`);
  }

  const exposed = last.instructions.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map((p) => Number(p.split('/')[0]));
  for (const p of facts.ports) if (!exposed.includes(p)) problems.push(`EXPOSE lacks ${p}`);

  // COPY: local sources exist and pass .dockerignore; --from sources are what an earlier stage made.
  const lastCopies = last.instructions.filter((i) => i.keyword === 'COPY').map(parseCopy);
  for (const [index, s] of d.stages.entries()) {
    for (const ins of s.instructions.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD')) {
      const c = parseCopy(ins);
      if (c.from === null) {
        for (const src of c.sources) {
          const rel = src.replace(/^\.\//, '').replace(/\/$/, '');
          if (!existsSync(join(facts.root, rel))) {
            problems.push(`line ${c.line}: COPY ${src}: not in the repository`);
            continue;
          }
          const shut = filesUnder(facts.root, rel).filter((f) => ignored(f));
          if (shut.length > 0) problems.push(`line ${c.line}: COPY ${src}: .dockerignore leaves out ${shut.slice(0, 3).join(', ')}`);
        }
        continue;
      }
      const from = stageByName(d, c.from);
      if (from === null || from.index >= index) {
        problems.push(`line ${c.line}: COPY --from=${c.from}: no earlier stage of that name`);
        continue;
      }
      const dir = workdirAt(from.stage).replace(/\/$/, '');
      for (const src of c.sources) {
        const made =
          (src === `${dir}/node_modules` && runs(from.stage).some((r) => /\bnpm ci\b/.test(r))) ||
          (src === `${dir}/${facts.outDir}` && runs(from.stage).some((r) => /\bnpm run build\b|\btsc\b/.test(r)));
        if (!made) problems.push(`line ${c.line}: COPY --from=${c.from} ${src}: stage ${c.from} does not make it (npm ci makes ${dir}/node_modules, npm run build ${dir}/${facts.outDir})`);
      }
    }
  }

  // The production dependencies: the stage the runtime takes node_modules from installs without devDependencies.
  const modules = lastCopies.find((c) => c.from !== null && c.sources.some((s) => s.endsWith('/node_modules')));
  if (modules === undefined) problems.push('the last stage copies no node_modules from a dependency stage');
  else {
    const deps = stageByName(d, modules.from!);
    const ci = deps === null ? [] : runs(deps.stage).filter((r) => /\bnpm ci\b/.test(r));
    if (!ci.some((r) => /--omit=dev\b/.test(r))) problems.push(`stage ${modules.from}: npm ci without --omit=dev: devDependencies would ship`);
    if (!ci.some((r) => /--ignore-scripts\b/.test(r))) problems.push(`stage ${modules.from}: npm ci without --ignore-scripts runs our prepare script, which needs typescript (a devDependency)`);
  }
  if (runs(last).some((r) => /(^|[;&|]\s*)npm\s/.test(r))) problems.push('the last stage runs npm: it should only copy what earlier stages made');

  // What the runtime reads is in the image, under the working directory gov is started from. COPY puts a
  // directory's contents at the destination, and a file at the destination, or in it when that ends in /.
  const base = workdir.replace(/\/$/, '');
  const absolute = (dest: string) => (dest.startsWith('/') ? dest : `${base}/${dest.replace(/^\.\/?/, '')}`);
  const shipped = (rel: string): boolean => {
    const target = `${base}/${rel}`;
    return lastCopies.some((c) =>
      c.sources.some((src) => {
        const dest = absolute(c.dest).replace(/\/$/, '');
        const into = c.dest.endsWith('/') || c.dest === '.' || c.sources.length > 1;
        if (c.from !== null) return target === dest || target.startsWith(`${dest}/`);
        const srcRel = src.replace(/^\.\//, '').replace(/\/$/, '');
        if (!existsSync(join(facts.root, srcRel))) return false;
        if (statSync(join(facts.root, srcRel)).isDirectory()) {
          return (target === dest || target.startsWith(`${dest}/`)) && existsSync(join(facts.root, srcRel, target.slice(dest.length)));
        }
        return target === (into ? `${dest}/${srcRel.split('/').pop()}` : dest);
      }),
    );
  };
  for (const rel of [...facts.runtimePaths, facts.binGov, 'package.json', 'node_modules']) {
    if (!shipped(rel)) problems.push(`the last stage does not put ${rel} under ${workdir}`);
  }
  for (const c of lastCopies.filter((x) => x.from === null)) {
    for (const src of c.sources) if (/^(\.\/)?(src|test|bench|docs|\.git)(\/|$)/.test(src)) problems.push(`line ${c.line}: the last stage copies ${src}, which the runtime does not read`);
  }

  // .dockerignore: the build context never carries these.
  for (const path of ['node_modules', '.git', facts.outDir, '.env', '.npmrc', '.gov', 'test/fixtures', '.ci/logs', 'bench/results', '.tap', 'src/node_modules']) {
    if (!ignored(path)) problems.push(`.dockerignore lets ${path} into the build context`);
  }
  return problems;
}
