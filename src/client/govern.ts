import type { Framework, JsonObject } from '../contracts/common.js';
import { BlockedError, GatewayUnavailableError } from '../contracts/client-errors.js';
import { resolveClientSettings, type ClientSettings, type GovClientOptions } from './client-settings.js';
import { ENV_KILL_SWITCH_REASON, GovClient, localDecision, type Phase, type PhaseTypes, type PostCheckInput, type PostCheckResponse, type PreCheckInput, type PreCheckResponse, type ValidateInput, type ValidateResponse } from './gov-client.js';
import { sendSync } from './sync-bridge.js';
import { clientTelemetry, clientTelemetryNow, startWrappedCall, type WrappedCallFacts } from './telemetry.js';

export interface GovernOptions extends GovClientOptions {
  /** The governed agent (spec: `^[\w\-\.]+$`). */
  agentId: string;
  /** The key of the first argument that names the end user. Default `user`. */
  userArg?: string;
  /** The key of the first argument that holds the input. Default `input`. */
  inputArg?: string;
  /**
   * `two-phase` (default): pre-check before the body, post-check of its result, one row each.
   * `single-shot`: one validate after the body.
   */
  mode?: 'two-phase' | 'single-shot';
  /** Default `Custom`. */
  framework?: Framework;
  /** Recorded as the execution's model; the contracts require one. Default `unknown`. */
  model?: string;
  /**
   * The tool this function is, as the agent's manifest declares it: the pre-check then checks the call
   * (the first argument, less user and input, as its params) against the manifest's scopes and limits.
   * Leave it out for a function the manifest does not declare: an undeclared action is a hard `block`.
   */
  action?: string;
  /** Recorded with every row (pre-check `metadata`, validate `request.metadata`). */
  metadata?: JsonObject;
  /** Share one client between wrappers; default: one per wrapper, built on its first call. */
  client?: GovClient;
  /** Sees every decision the wrapper receives, local ones included (isLocalDecision()). */
  onDecision?: (phase: 'pre_check' | 'post_check' | 'validate', response: PreCheckResponse | PostCheckResponse | ValidateResponse) => void;
}

/**
 * A governed function is the wrapped function's own type: parameters, `this` and return type. A synchronous
 * function stays synchronous (the caller's thread blocks for the governance round trips); an async one
 * still returns its promise. Either way the value is the wrapped function's own (the same object).
 */
export type Governed<F extends (...args: any[]) => unknown> = F;

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/** The contracts' cap on `user` (src/contracts/runtime.ts): a longer name would make the call a 422. */
const USER_MAX = 500;

interface CallerFields {
  user: string;
  input: string;
  params: JsonObject;
}

/**
 * JavaScript has no keyword arguments: user and input are read from the first argument when it is a plain
 * object; otherwise the record carries user `unknown` and an empty input (spec, Client wrapper behaviour).
 */
function callerFields(first: unknown, userArg: string, inputArg: string): CallerFields {
  if (!isPlainObject(first)) return { user: 'unknown', input: '', params: {} };
  const { [userArg]: u, [inputArg]: i, ...params } = first;
  const user = u === undefined || u === null ? 'unknown' : (typeof u === 'string' ? u : String(u)).slice(0, USER_MAX);
  const input = i === undefined || i === null ? '' : typeof i === 'string' ? i : JSON.stringify(i);
  return { user, input, params };
}

/** The contracts want `output` as a JSON object: a plain object is sent as it is, anything else as `{result}`. */
function asOutput(v: unknown): JsonObject {
  return isPlainObject(v) ? v : { result: v === undefined ? null : v };
}

/** The error message kept in a failed body's post-check: enough to tell failures apart, not a dump. */
const FAILURE_MESSAGE_MAX = 500;

/**
 * The output a post-check records for a body that threw (docs/client.md, "A body that throws"): the
 * error's class and message, so the pre-check's row is followed by one that says the call failed.
 */
function failureOutput(e: unknown): JsonObject {
  const err = e instanceof Error ? e : null;
  const message = err !== null ? err.message : typeof e === 'string' ? e : String(e);
  return { error: { name: err?.name ?? typeof e, message: message.slice(0, FAILURE_MESSAGE_MAX) } };
}

/** What the wrapper does with a governance failure that is not a block: rethrow it, or warn and go on. */
function tolerate(e: unknown, s: ClientSettings, what: string): void {
  if (e instanceof BlockedError) throw e;
  // Spec: an unreachable gateway is fatal only with failure mode closed *and* raise_on_error.
  if (e instanceof GatewayUnavailableError) {
    if (s.failureMode === 'closed' && s.raiseOnError) throw e;
    s.onWarning(`gateway unavailable, ${what} not governed (failure mode ${s.failureMode})`, e);
    return;
  }
  if (s.raiseOnError) throw e;
  s.onWarning(`${what} not governed: the governance call failed`, e);
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (typeof v === 'object' || typeof v === 'function') && v !== null && typeof (v as { then?: unknown }).then === 'function';
}

/** An `async function` (native or compiled to one) takes the async path; anything else may stay synchronous. */
function isAsyncFunction(fn: Function): boolean {
  return fn.constructor?.name === 'AsyncFunction' || (fn as unknown as { [Symbol.toStringTag]?: string })[Symbol.toStringTag] === 'AsyncFunction';
}

function blockedBy(phase: 'pre_check' | 'post_check' | 'validate', r: { envelope_id: string; decision: { outcome: string; reason: string } }): BlockedError {
  return new BlockedError('block', r.decision.reason, r.envelope_id, phase);
}

/**
 * Wraps a sync or async function in governance. With governance disabled (GOV_ENABLED=false) the wrapper
 * only calls through: no network, no timer. With the environment kill switch every call is refused before
 * the body runs and before any network call.
 */
export function govern<F extends (...args: any[]) => unknown>(fn: F, options: GovernOptions): Governed<F> {
  const userArg = options.userArg ?? 'user';
  const inputArg = options.inputArg ?? 'input';
  const twoPhase = (options.mode ?? 'two-phase') === 'two-phase';
  const framework = options.framework ?? 'Custom';
  const model = options.model ?? 'unknown';
  const name = fn.name || 'anonymous function';
  // Built on the first call, so that settings loaded after import time (a .env file) still apply.
  let client = options.client;

  // What the asynchronous and the synchronous path share: the bodies they send, and what they do with an
  // answer (note it for the span, hand it to onDecision, raise a block).
  const take = <P extends Phase>(phase: P, r: PhaseTypes[P]['out'], facts: WrappedCallFacts): PhaseTypes[P]['out'] => {
    facts.outcome = r.decision.outcome;
    facts.riskScore = r.risk?.score ?? null;
    options.onDecision?.(phase, r);
    if (r.decision.outcome === 'block') throw blockedBy(phase, r);
    return r;
  };
  const envKillSwitch = (facts: WrappedCallFacts): never => {
    const blocked = localDecision('pre_check', { agent_id: options.agentId }, 'block', ENV_KILL_SWITCH_REASON);
    facts.outcome = 'block';
    options.onDecision?.('pre_check', blocked);
    throw blockedBy('pre_check', blocked);
  };
  const preCheckBody = (caller: CallerFields): PreCheckInput => ({
    agent_id: options.agentId,
    framework,
    ...(options.action !== undefined ? { action: options.action, params: caller.params } : {}),
    user: caller.user,
    input: caller.input,
    model,
    ...(options.metadata !== undefined ? { metadata: options.metadata } : {}),
  });
  const validateBody = (caller: CallerFields, started: number, value: unknown): ValidateInput => ({
    agent_id: options.agentId,
    framework,
    request: { user: caller.user, input: caller.input, session_id: null, metadata: options.metadata ?? {} },
    execution: { model, latency_ms: performance.now() - started },
    output: asOutput(value),
  });
  const postCheckBody = (pre: PreCheckResponse, started: number, output: JsonObject, metadata?: JsonObject): PostCheckInput => ({
    pre_check_envelope_id: pre.envelope_id,
    execution: { model, latency_ms: performance.now() - started },
    output,
    ...(metadata !== undefined ? { metadata } : {}),
  });
  const failedPostCheckBody = (pre: PreCheckResponse, started: number, e: unknown): PostCheckInput =>
    postCheckBody(pre, started, failureOutput(e), { ...options.metadata, body_failed: true });
  // The body's own error is what the caller gets: the failure's post-check never raises over it, a block
  // included (there is no output to withhold), and a governance failure is only a warning.
  const failureNotRecorded = (ge: unknown, s: ClientSettings): void => {
    if (!(ge instanceof BlockedError)) s.onWarning(`${name} (post-check of a failed call) not governed: the governance call failed`, ge);
  };

  async function governedCall(c: GovClient, self: unknown, args: unknown[], facts: WrappedCallFacts): Promise<unknown> {
    const s = c.settings;
    const caller = callerFields(args[0], userArg, inputArg);
    const decide = async <P extends Phase>(phase: P, req: PhaseTypes[P]['in']) => {
      const t0 = performance.now();
      try {
        return take(phase, await c.send(phase, req), facts);
      } finally {
        facts.validationMs += performance.now() - t0;
      }
    };
    if (s.killSwitch) envKillSwitch(facts);
    if (!twoPhase) {
      const started = performance.now();
      const value = await fn.apply(self, args);
      try {
        await decide('validate', validateBody(caller, started, value));
      } catch (e) {
        tolerate(e, s, `${name} (validate)`);
      }
      return value;
    }

    let pre: PreCheckResponse | null = null;
    try {
      pre = await decide('pre_check', preCheckBody(caller));
    } catch (e) {
      tolerate(e, s, `${name} (pre-check)`);
    }
    const started = performance.now();
    let value: unknown;
    try {
      value = await fn.apply(self, args);
    } catch (e) {
      // A pre-check that never reached the gateway has no row for a post-check to name.
      if (pre !== null) await decide('post_check', failedPostCheckBody(pre, started, e)).catch((ge: unknown) => failureNotRecorded(ge, s));
      throw e;
    }
    if (pre === null) return value;
    try {
      await decide('post_check', postCheckBody(pre, started, asOutput(value)));
    } catch (e) {
      tolerate(e, s, `${name} (post-check)`);
    }
    return value;
  }

  async function tracedCall(c: GovClient, self: unknown, args: unknown[]): Promise<unknown> {
    const facts: WrappedCallFacts = { outcome: null, riskScore: null, validationMs: 0 };
    const end = startWrappedCall(await clientTelemetry(), options.agentId);
    try {
      return await governedCall(c, self, args, facts);
    } finally {
      end(facts);
    }
  }

  let settings: ClientSettings | null = null;

  /**
   * The synchronous path (docs/client.md, Synchronous functions): the same steps as governedCall, each
   * governance call blocking in sendSync. It does not build a GovClient of its own: under failure mode
   * `queue` the queue belongs to the worker's client, and a second one in this thread would race it.
   */
  function governedSync(s: ClientSettings, self: unknown, args: unknown[], facts: WrappedCallFacts, finish: (p: Promise<unknown>) => Promise<unknown>): unknown {
    const caller = callerFields(args[0], userArg, inputArg);
    const decide = <P extends Phase>(phase: P, req: PhaseTypes[P]['in']) => {
      const t0 = performance.now();
      try {
        return take(phase, sendSync(s, phase, req), facts);
      } finally {
        facts.validationMs += performance.now() - t0;
      }
    };
    if (s.killSwitch) envKillSwitch(facts);
    let pre: PreCheckResponse | null = null;
    if (twoPhase) {
      try {
        pre = decide('pre_check', preCheckBody(caller));
      } catch (e) {
        tolerate(e, s, `${name} (pre-check)`);
      }
    }
    const started = performance.now();
    const after = (value: unknown): unknown => {
      try {
        if (!twoPhase) decide('validate', validateBody(caller, started, value));
        // A pre-check that never reached the gateway has no row for a post-check to name.
        else if (pre !== null) decide('post_check', postCheckBody(pre, started, asOutput(value)));
      } catch (e) {
        tolerate(e, s, `${name} (${twoPhase ? 'post-check' : 'validate'})`);
      }
      return value;
    };
    const failed = (e: unknown): never => {
      if (pre !== null) {
        try {
          decide('post_check', failedPostCheckBody(pre, started, e));
        } catch (ge) {
          failureNotRecorded(ge, s);
        }
      }
      throw e;
    };
    let value: unknown;
    try {
      value = fn.apply(self, args);
    } catch (e) {
      failed(e);
    }
    // A plain function that returned a promise: its value exists only later, so the result stays a promise.
    // The post-check then runs once the value has arrived (still through the worker: a queued pre-check's
    // post-check must follow it through the same queue).
    if (isThenable(value)) return finish(Promise.resolve(value).then(after, failed));
    return after(value);
  }

  function syncCall(self: unknown, args: unknown[]): unknown {
    const s = (settings ??= options.client?.settings ?? resolveClientSettings(options));
    if (!s.enabled) return fn.apply(self, args);
    const facts: WrappedCallFacts = { outcome: null, riskScore: null, validationMs: 0 };
    const end = startWrappedCall(clientTelemetryNow(), options.agentId);
    let pending = false;
    try {
      return governedSync(s, self, args, facts, (p) => {
        pending = true;
        return p.finally(() => end(facts));
      });
    } finally {
      if (!pending) end(facts);
    }
  }

  if (!isAsyncFunction(fn)) {
    return function governed(this: ThisParameterType<F>, ...args: Parameters<F>): ReturnType<F> {
      return syncCall(this, args) as ReturnType<F>;
    } as F;
  }

  return async function governed(this: ThisParameterType<F>, ...args: Parameters<F>): Promise<Awaited<ReturnType<F>>> {
    client ??= new GovClient(options);
    if (!client.settings.enabled) return (await fn.apply(this, args)) as Awaited<ReturnType<F>>;
    return tracedCall(client, this, args) as Promise<Awaited<ReturnType<F>>>;
  } as unknown as F;
}

/**
 * The TS 5 standard method decorator form of govern(). A synchronous method stays synchronous and an async
 * one async: the method keeps its type.
 */
export function governed(options: GovernOptions) {
  return function <This, Args extends any[], R>(
    target: (this: This, ...args: Args) => R,
    _context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => R>,
  ): (this: This, ...args: Args) => R {
    return govern(target, options);
  };
}
