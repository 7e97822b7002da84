import type { z } from 'zod';

/** A policy pack, golden file or manifest file that cannot be used; the message names the file and the path. */
export class PolicyLoadError extends Error {
  constructor(
    readonly origin: string,
    readonly problems: readonly string[],
  ) {
    super(`${origin}: ${problems.join('; ')}`);
    this.name = 'PolicyLoadError';
  }
}

export function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out === '' ? '(root)' : out;
}

export function zodProblems(error: z.ZodError): string[] {
  return error.issues.map((i) => `${issuePath(i.path)}: ${i.message}`);
}
