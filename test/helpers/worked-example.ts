import { readFileSync } from 'node:fs';

/** The README's worked example: one copy, shared by the HTTP tests, the engine tests and the benchmarks. */
export const WORKED_EXAMPLE: Record<string, any> = JSON.parse(readFileSync(new URL('../fixtures/worked-example.json', import.meta.url), 'utf8'));
