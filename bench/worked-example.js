import { readFileSync } from 'node:fs';

/** The README's worked example (one copy, shared with the tests). */
export const WORKED_EXAMPLE = JSON.parse(readFileSync(new URL('../test/fixtures/worked-example.json', import.meta.url), 'utf8'));

const FILLER = ' The parcel left the warehouse this morning and is on its way to the delivery address.';

/** The worked example with its output answer padded with plain prose to about `bytes` of output JSON. */
export function paddedWorkedExample(bytes = 2048) {
  const body = structuredClone(WORKED_EXAMPLE);
  while (Buffer.byteLength(JSON.stringify(body.output)) + FILLER.length <= bytes) body.output.answer += FILLER;
  return body;
}
