// Build step (npm run build, after tsc): the sidecar's code as a few minified ES modules in
// dist/sidecar-bundle/, which `gov sidecar` loads instead of dist/'s ~400 modules (cli/sidecar.ts).
//
// Why: V8 keeps the source text of every loaded module for the life of the process (lazy compilation reads
// it again), so the sidecar held ~7 MB of module sources in its heap; one bundle, minified, holds ~1.7 MB.
// Peak RSS at the shared harness's load fell ~7 MB (docs/performance.md, "Session 15"). Only the
// sidecar: every other mode keeps dist/'s modules, where memory per process matters less than readable traces.
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { escapeBeyondLatin1 } from './latin1-source.js';

const DIST = join(dirname(fileURLToPath(import.meta.url)), '..');
export const SIDECAR_BUNDLE_DIR = join(DIST, 'sidecar-bundle');

/**
 * Packages loaded from node_modules at run time rather than bundled: native code (lmdb, koffi), code that starts
 * worker threads from its own files (pino's transports), packages this code already loads by path through
 * createRequire (undici's dispatchers, libphonenumber-js's metadata), and the server-only packages the
 * sidecar imports only when a setting asks for them (Redis, PostgreSQL, job queues, API docs, telemetry).
 */
const EXTERNAL = [
  'lmdb',
  'koffi',
  'pino',
  'undici',
  'libphonenumber-js',
  'ioredis',
  'bullmq',
  'pg',
  '@fastify/swagger',
  '@fastify/swagger-ui',
  '@opentelemetry/*',
];

/**
 * Each module of dist/ that reads import.meta.url (paths to policies/, manifests/, worker scripts, the
 * package root) keeps reading its own URL: inside the bundle, import.meta.url is the chunk's, so it is
 * rewritten to the module's original file, relative to the chunk (all chunks sit in one directory), which
 * keeps working wherever the package is installed.
 */
function ownModuleUrls(outdir: string): Plugin {
  return {
    name: 'own-module-urls',
    setup(b) {
      b.onLoad({ filter: /\.js$/ }, async (args) => {
        if (!args.path.startsWith(DIST + sep)) return undefined;
        const text = await readFile(args.path, 'utf8');
        if (!text.includes('import.meta.url')) return undefined;
        const own = relative(outdir, args.path).split(sep).join('/');
        return { contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(own)}, import.meta.url).href`), loader: 'js', resolveDir: dirname(args.path) };
      });
    },
  };
}

export async function buildSidecarBundle(outdir = SIDECAR_BUNDLE_DIR): Promise<void> {
  // Chunk names carry content hashes: an earlier build's chunks would stay beside the new ones.
  await rm(outdir, { recursive: true, force: true });
  await build({
    entryPoints: { 'sidecar-thread': join(DIST, 'cli', 'sidecar-thread.js'), 'sidecar-serve': join(DIST, 'cli', 'sidecar-serve.js') },
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    minify: true,
    // For NODE_OPTIONS=--enable-source-maps when a trace must be read; never loaded otherwise. Once loaded,
    // the map takes ~32 MB of heap: docs/proxy.md, "Memory in a pod".
    sourcemap: 'linked',
    legalComments: 'none',
    chunkNames: 'chunk-[hash]',
    external: EXTERNAL,
    // Bundled CommonJS packages call require() for Node's built-ins and the external packages.
    banner: { js: "import { createRequire as __govCreateRequire } from 'node:module'; const require = __govCreateRequire(import.meta.url);" },
    // cli/sidecar-serve.ts reports which code runs (its start log line).
    define: { GOV_SIDECAR_BUNDLE: 'true' },
    plugins: [ownModuleUrls(outdir)],
    logLevel: 'warning',
  });
  // One byte per character in V8's heap (build/latin1-source.ts). The source maps' columns on the few
  // lines this lengthens drift by the escapes' extra characters.
  for (const name of await readdir(outdir)) {
    if (!name.endsWith('.js')) continue;
    const file = join(outdir, name);
    const text = await readFile(file, 'utf8');
    const latin1 = escapeBeyondLatin1(text);
    if (latin1 !== text) await writeFile(file, latin1);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildSidecarBundle();
