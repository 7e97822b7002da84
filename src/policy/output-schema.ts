import { Ajv as AjvDraft07, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { compileUserPattern } from './detectors.js';

/**
 * An agent manifest's `output_schema`: a JSON Schema (draft 2020-12 by default, draft-07 when its `$schema`
 * says so) compiled once, when the manifest is loaded or registered, into a pure function the schema check
 * calls. Compiling generates code, so it happens only there, never while a request is being scored.
 */

/** One violation: where in the output (never its value), the keyword that failed, and ajv's message. */
export interface OutputSchemaIssue {
  readonly path: string;
  readonly keyword: string;
  readonly message: string;
}

/** null when the output conforms; otherwise its violations (at most MAX_REPORTED_ISSUES). */
export type OutputSchemaValidator = (output: unknown) => readonly OutputSchemaIssue[] | null;

export class OutputSchemaError extends Error {}

/** Serialized size cap: a schema is configuration, and ajv's compile time grows with its size. */
export const MAX_SCHEMA_BYTES = 64 * 1024;
/** Violations reported per output (the first ones found); the rest are counted in the score only once. */
export const MAX_REPORTED_ISSUES = 10;

const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/;
const DRAFT_2020 = /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/;

/**
 * `pattern` and `patternProperties` run against agent output on every call, so they pass the same check as
 * policy-pack patterns (a nested quantifier is refused at compile time, not discovered as a stalled event loop).
 */
const safeRegExp = Object.assign(
  (pattern: string, flags: string): RegExp => {
    compileUserPattern('output_schema pattern', pattern, flags);
    return new RegExp(pattern, flags);
  },
  { code: 'new RegExp' },
);

const OPTIONS: Options = {
  allErrors: true,
  // Strict: an unknown keyword (a typo such as `requried`) is refused rather than silently ignored. The
  // type, tuple and required checks only warn through console (or refuse plain schemas such as a `required`
  // without `properties`): off.
  strict: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
  // `format` is an annotation in 2020-12; no format vocabulary is installed, so it is not asserted.
  validateFormats: false,
  // A schema must stand alone: no remote `$ref` is fetched.
  loadSchema: undefined,
  code: { regExp: safeRegExp },
};

type Draft = '2020-12' | 'draft-07';

function newAjv(draft: Draft, options: Options): AjvDraft07 | Ajv2020 {
  return draft === '2020-12' ? new Ajv2020(options) : new AjvDraft07(options);
}

/**
 * Checking a schema against its meta-schema needs the meta-schema compiled, which is most of a compile's
 * cost (measured ~45 ms of ~50 on a fresh instance): one instance per draft does it once, and keeps nothing
 * of the schemas it checks.
 */
const META = new Map<Draft, AjvDraft07 | Ajv2020>();
function metaValidator(draft: Draft): AjvDraft07 | Ajv2020 {
  let ajv = META.get(draft);
  if (ajv === undefined) META.set(draft, (ajv = newAjv(draft, OPTIONS)));
  return ajv;
}

function depthOf(v: unknown, depth = 0): number {
  if (depth > 64 || v === null || typeof v !== 'object') return depth;
  let max = depth;
  for (const x of Object.values(v as Record<string, unknown>)) max = Math.max(max, depthOf(x, depth + 1));
  return max;
}

/** `/items/0/price` → `output.items[0].price` (the path style of every other failure). */
function outputPath(pointer: string): string {
  if (pointer === '') return 'output';
  let out = 'output';
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(key) ? `[${key}]` : `.${key}`;
  }
  return out;
}

function issue(e: ErrorObject): OutputSchemaIssue {
  // ajv's messages name schema facts (a type, a limit, a required property), never the instance's value.
  return { path: outputPath(e.instancePath), keyword: e.keyword, message: e.message ?? 'is invalid' };
}

/** Compiles a schema, or throws OutputSchemaError with the reason (ajv's message, or the cap it passed). */
export function compileOutputSchema(schema: unknown): OutputSchemaValidator {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) throw new OutputSchemaError('output_schema must be a JSON Schema object');
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > MAX_SCHEMA_BYTES) throw new OutputSchemaError(`output_schema is ${bytes} bytes, above the ${MAX_SCHEMA_BYTES}-byte cap`);
  if (depthOf(schema) > 32) throw new OutputSchemaError('output_schema nests deeper than 32 levels');
  const declared = (schema as Record<string, unknown>).$schema;
  let draft: Draft;
  if (declared === undefined || (typeof declared === 'string' && DRAFT_2020.test(declared))) draft = '2020-12';
  else if (typeof declared === 'string' && DRAFT_07.test(declared)) draft = 'draft-07';
  else throw new OutputSchemaError(`output_schema: unsupported $schema ${JSON.stringify(declared)} (use draft 2020-12 or draft-07)`);
  const meta = metaValidator(draft);
  if (!meta.validateSchema(schema)) throw new OutputSchemaError(`output_schema is not a valid schema: schema is invalid: ${meta.errorsText(meta.errors)}`);
  let validate: ValidateFunction;
  try {
    // A fresh instance per schema: two manifests may use the same `$id` without colliding in a shared cache,
    // and nothing compiled for one agent stays behind when its manifest is replaced.
    validate = newAjv(draft, { ...OPTIONS, validateSchema: false }).compile(schema);
  } catch (e) {
    if (e instanceof OutputSchemaError) throw e;
    throw new OutputSchemaError(`output_schema is not a valid schema: ${(e as Error).message}`);
  }
  return (output) => {
    if (validate(output)) return null;
    const errors = validate.errors ?? [];
    return errors.slice(0, MAX_REPORTED_ISSUES).map(issue);
  };
}
