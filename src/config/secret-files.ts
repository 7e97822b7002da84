import { readFileSync, statSync } from 'node:fs';

/**
 * `<NAME>_FILE` for the settings that hold a secret, the convention of the official postgres and redis
 * images: a Kubernetes Secret or a Docker secret is mounted as a file, and the variable names the file, so
 * the secret never sits in the pod spec, `docker inspect` or /proc/<pid>/environ. The file's content is the
 * value, with its trailing newlines removed (as `$(< file)` does: `kubectl create secret --from-file` and
 * editors leave one).
 */
export const SECRET_SETTINGS = [
  'GOV_EMBED_TOKEN',
  'GOV_DATABASE_URL',
  'GOV_API_KEYS',
  'GOV_JWT_SECRET',
  'GOV_LEDGER_ANCHOR_KEY',
  'GOV_AUDIT_ENCRYPTION_KEY',
  'GOV_KEY',
  'GOV_REDIS_URL',
  'GOV_DETECTOR_TOKEN',
  'GOV_REVIEW_WEBHOOK_SECRET',
] as const;

export type SecretSetting = (typeof SECRET_SETTINGS)[number];

/** A secret file is a key, a URL or a list of keys: anything this large is the wrong file. */
const MAX_SECRET_FILE_BYTES = 1024 * 1024;

export class SecretFileError extends Error {
  override name = 'SecretFileError';
}

const set = (v: string | undefined): v is string => v !== undefined && v !== '';

/**
 * The environment with every `<NAME>_FILE` of `names` read into `<NAME>`. Throws SecretFileError naming the
 * variables and the path, never the content, when both are set, or when the file cannot be read, is
 * empty or is too large. The input is not modified.
 */
export function withSecretFiles(env: NodeJS.ProcessEnv, names: readonly string[] = SECRET_SETTINGS): NodeJS.ProcessEnv {
  let out: NodeJS.ProcessEnv | null = null;
  for (const name of names) {
    const path = env[`${name}_FILE`];
    if (!set(path)) continue;
    // Which one would win is a guess either way; refusing both makes a leftover variable visible.
    if (set(env[name])) throw new SecretFileError(`${name} and ${name}_FILE are both set: set one of them`);
    out ??= { ...env };
    out[name] = readSecretFile(`${name}_FILE`, path);
  }
  return out ?? env;
}

function readSecretFile(variable: string, path: string): string {
  let text: string;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new SecretFileError(`${variable}: ${path} is not a file`);
    if (st.size > MAX_SECRET_FILE_BYTES) throw new SecretFileError(`${variable}: ${path} is larger than ${MAX_SECRET_FILE_BYTES} bytes`);
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if (e instanceof SecretFileError) throw e;
    // The code only (ENOENT, EACCES): a message from deeper down could quote what it read.
    throw new SecretFileError(`${variable}: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const value = text.replace(/[\r\n]+$/, '');
  // An empty value would read as "unset" and fall back to a default (a generated token, no auth key).
  if (value === '') throw new SecretFileError(`${variable}: ${path} is empty`);
  return value;
}

/** The settings-table rows of the `_FILE` variables, each beside the setting it fills. */
export function withSecretFileDocs<D extends { name: string; modes: unknown; default: string; help: string }>(docs: D[]): D[] {
  const secret = new Set<string>(SECRET_SETTINGS);
  return docs.flatMap((d) =>
    secret.has(d.name)
      ? [d, { ...d, name: `${d.name}_FILE`, default: '', help: `file holding ${d.name} (a mounted Secret), trailing newlines removed; setting both is refused` }]
      : [d],
  );
}
