// Loaded into a sidecar by bench/sidecar-timeline.js, as NODE_OPTIONS="--require <this file>", so that the
// build measured is the one shipped: no probe build, no code of the sidecar's own on the call's path. It
// times each proxied call from Node's and undici's diagnostics channels, in µs since the call's request
// headers were parsed: when undici starts writing the upstream request, when that write returns, when the
// answer's head and its end are parsed, and when the response to the caller is finished. Around the
// upstream write it also reads the process's CPU time and involuntary context switches (getrusage): on a
// 2-vCPU VM the upstream, woken by that write, often preempts the sidecar inside it and answers before the
// sidecar runs again (docs/performance.md, "Session 27").
//
// Only calls that had the sidecar to themselves are kept (undici's channels do not name the caller's
// request). On SIGUSR2 it appends one JSON line of medians to GOV_TIMELINE_OUT and starts over.
'use strict';
const dc = require('node:diagnostics_channel');
const { appendFileSync } = require('node:fs');

const OUT = process.env.GOV_TIMELINE_OUT;
const ROUTE = process.env.GOV_TIMELINE_ROUTE || '/openai/';
const STAGES = ['writeStart', 'writeEnd', 'answerHead', 'answerEnd', 'finish'];

if (OUT) install(OUT);

function install(out) {
  const now = () => performance.now() * 1000;
  const inFlight = new Set();
  const byResponse = new WeakMap();
  /** The call the upstream channels are about: the only one in flight, else none. */
  let alone = null;
  let kept = [];
  let shared = 0;

  dc.subscribe('http.server.request.start', ({ request, response }) => {
    if (!request.url || !request.url.startsWith(ROUTE)) return;
    const call = { t0: now(), alone: inFlight.size === 0 };
    for (const other of inFlight) other.alone = false;
    inFlight.add(call);
    byResponse.set(response, call);
    alone = call.alone ? call : null;
    response.once('close', () => {
      inFlight.delete(call);
      if (alone === call) alone = null;
      if (call.finish === undefined) return;
      if (call.alone) kept.push(call);
      else shared++;
    });
  });
  dc.subscribe('http.server.response.finish', ({ response }) => {
    const call = byResponse.get(response);
    if (call !== undefined) call.finish = now() - call.t0;
  });
  dc.subscribe('undici:client:sendHeaders', () => {
    if (alone === null || alone.writeStart !== undefined) return;
    const u = process.resourceUsage();
    alone.writeStart = now() - alone.t0;
    alone.cpu = u.userCPUTime + u.systemCPUTime;
    alone.preemptions = u.involuntaryContextSwitches;
  });
  dc.subscribe('undici:request:bodySent', () => {
    if (alone === null || alone.writeStart === undefined || alone.writeEnd !== undefined) return;
    const u = process.resourceUsage();
    alone.writeEnd = now() - alone.t0;
    alone.cpu = u.userCPUTime + u.systemCPUTime - alone.cpu;
    alone.preemptions = u.involuntaryContextSwitches - alone.preemptions;
  });
  dc.subscribe('undici:request:headers', () => {
    if (alone !== null && alone.answerHead === undefined) alone.answerHead = now() - alone.t0;
  });
  dc.subscribe('undici:request:trailers', () => {
    if (alone !== null && alone.answerEnd === undefined) alone.answerEnd = now() - alone.t0;
  });

  process.on('SIGUSR2', () => {
    const line = { calls: kept.length, shared };
    for (const s of STAGES) line[s] = median(kept.map((c) => c[s]));
    const written = kept.filter((c) => c.writeEnd !== undefined);
    line.writeCpu = median(written.map((c) => c.cpu));
    line.writesPreempted = written.length === 0 ? null : written.filter((c) => c.preemptions > 0).length / written.length;
    appendFileSync(out, JSON.stringify(line) + '\n');
    kept = [];
    shared = 0;
  });
}

function median(values) {
  const v = values.filter((x) => x !== undefined).sort((a, b) => a - b);
  return v.length === 0 ? null : Math.round(v[v.length >> 1]);
}
