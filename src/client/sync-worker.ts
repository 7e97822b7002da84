import { runAsWorker } from 'synckit';
import { GovClient } from './gov-client.js';
import { describeError, type WorkerEvents, type WorkerRequest, type WorkerResponse } from './sync-wire.js';

/**
 * The worker thread behind synchronous governed calls (sync-bridge.ts): the same GovClient and HTTP
 * transport as the async path, so retries, timeouts, failure modes and the queue behave the same. One client
 * per distinct settings, kept for the worker's life (the transport's keep-alive sockets, the queue).
 */

const clients = new Map<string, GovClient>();

/**
 * Warnings and replay decisions since the last answer. A queue replayed on the timer between two calls has
 * nobody to tell at that moment: its events go back with the next answer.
 */
let events: WorkerEvents = { warnings: [], replays: [] };

function clientFor(o: WorkerRequest['options']): GovClient {
  const key = JSON.stringify(o);
  let c = clients.get(key);
  if (c === undefined) {
    c = new GovClient({
      gatewayUrl: o.gatewayUrl,
      ...(o.apiKey !== null ? { apiKey: o.apiKey } : {}),
      failureMode: o.failureMode,
      ...(o.queueDir !== null ? { queueDir: o.queueDir, queueMaxEntries: o.queueMaxEntries!, queueMaxBytes: o.queueMaxBytes!, replayIntervalMs: o.replayIntervalMs! } : {}),
      timeoutMs: o.timeoutMs,
      retries: o.retries,
      maxRetryAfterMs: o.maxRetryAfterMs,
      // The caller decided disabled and kill switch already; the worker's own environment must not decide again.
      enabled: true,
      killSwitch: false,
      env: {},
      onWarning: (message, error) => void events.warnings.push({ message, error: error === undefined ? null : describeError(error) }),
      onReplay: (phase, response) => void events.replays.push({ phase, response: { envelope_id: response.envelope_id, decision: { outcome: response.decision.outcome, reason: response.decision.reason } } }),
    });
    clients.set(key, c);
  }
  return c;
}

runAsWorker(async (call: WorkerRequest): Promise<WorkerResponse> => {
  let answer: WorkerResponse;
  try {
    const response = await clientFor(call.options).send(call.phase, call.req as never);
    answer = { ok: true, response, ...events };
  } catch (e) {
    // Never thrown across: synckit would clone the error and lose its class and fields.
    answer = { ok: false, error: describeError(e), ...events };
  }
  events = { warnings: [], replays: [] };
  return answer;
});
