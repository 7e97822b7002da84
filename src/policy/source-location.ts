import YAML, { isMap, isNode, isPair, isScalar, LineCounter, type Document, type Node } from 'yaml';
import { issuePath, type PolicyProblem } from './errors.js';

export type SourceFormat = 'yaml' | 'json';

/** A parsed pack text that can point at the line and column of any path into it. */
export interface LocatedDocument {
  /** The parsed value, or undefined when the text does not parse (then `errors` says why and where). */
  readonly value: unknown;
  readonly errors: readonly PolicyProblem[];
  /** Line and column of the node at `path`, else of its nearest existing ancestor (the root: 1:1). */
  locate(path: readonly PropertyKey[], key?: string): { line: number; column: number };
  /** A problem at `path`, located. */
  problem(path: readonly PropertyKey[], message: string, key?: string): PolicyProblem;
}

/** `Unexpected token } in JSON at position 12` (Node 20) → 12. */
function jsonErrorOffset(message: string): number | null {
  const m = /at position (\d+)/.exec(message);
  return m ? Number(m[1]) : null;
}

/**
 * Parses a pack's text keeping every node's position (yaml's parseDocument with a LineCounter), so that a
 * schema problem found later on the plain value can still be reported at its line and column. JSON goes
 * through JSON.parse first, so that only strict JSON is accepted as `json`; its positions come from the
 * same YAML document (JSON is YAML 1.2).
 */
export function parseLocated(text: string, format: SourceFormat = 'yaml'): LocatedDocument {
  const lc = new LineCounter();
  const pos = (offset: number) => {
    const p = lc.linePos(offset);
    return { line: p.line, column: p.col };
  };
  let jsonValue: unknown;
  let jsonError: PolicyProblem | null = null;
  if (format === 'json') {
    try {
      jsonValue = JSON.parse(text);
    } catch (e) {
      const message = (e as Error).message;
      const offset = jsonErrorOffset(message);
      jsonError = { path: '', line: null, column: null, message: `invalid JSON: ${message.replace(/ in JSON at position \d+.*$/s, '').replace(/^Unexpected token/, 'unexpected token')}` };
      if (offset !== null) {
        // LineCounter learns line starts while parsing; count them here instead for a text that failed.
        const before = text.slice(0, offset);
        const line = before.split('\n').length;
        jsonError = { ...jsonError, line, column: offset - before.lastIndexOf('\n') };
      }
    }
  }
  const doc: Document = YAML.parseDocument(text, { lineCounter: lc, uniqueKeys: true, prettyErrors: false });
  const locate = (path: readonly PropertyKey[], key?: string): { line: number; column: number } => {
    if (doc.errors.length > 0 || doc.contents === null) return { line: 1, column: 1 };
    // The nearest node that exists: a missing key is reported at the object that lacks it.
    for (let n = path.length; n >= 0; n--) {
      const node = n === 0 ? doc.contents : (doc.getIn(path.slice(0, n) as unknown[], true) as unknown);
      if (!isNode(node)) continue;
      if (n === path.length && key !== undefined && isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === key);
        if (pair && isNode(pair.key) && pair.key.range) return pos(pair.key.range[0]);
      }
      const range = (node as Node).range;
      if (range) return pos(range[0]);
    }
    return { line: 1, column: 1 };
  };
  const errors: PolicyProblem[] = [];
  if (jsonError !== null) errors.push(jsonError);
  else if (format === 'yaml' || jsonValue === undefined) {
    for (const e of doc.errors) {
      const p = pos(e.pos[0]);
      errors.push({ path: '', line: p.line, column: p.column, message: `invalid YAML: ${e.message.split('\n')[0]}` });
    }
  }
  let value: unknown;
  if (errors.length === 0) value = format === 'json' ? jsonValue : doc.toJS();
  return {
    value,
    errors,
    locate,
    problem(path, message, key) {
      const at = locate(path, key);
      return { path: issuePath(path), line: at.line, column: at.column, message };
    },
  };
}
