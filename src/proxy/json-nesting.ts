import { MAX_JSON_DEPTH } from '../contracts/json-data.js';

/** The product's one nesting limit (contracts/json-data.ts), as the sidecar applies it to raw bytes. */
export const MAX_JSON_NESTING = MAX_JSON_DEPTH;

const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * True when the JSON text in `bytes` nests objects and arrays deeper than `max` (brackets inside strings
 * do not count). A byte scan, so it costs no parse and no allocation; text that is not JSON at all yields
 * whatever its brackets say, which for real text is shallow.
 */
export function nestsDeeperThan(bytes: Uint8Array, max = MAX_JSON_NESTING): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      if (++depth > max) return true;
    } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) depth--;
  }
  return false;
}
