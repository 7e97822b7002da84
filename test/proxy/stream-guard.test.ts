// Unit behaviour of the SSE parser and the streaming guard window (src/proxy/sse.ts, stream-guard.ts).
import t from 'tap';
import { ChatCompletions } from '../../src/proxy/protocols/openai-chat/protocol.js';
import { SseParser, type SseEvent } from '../../src/proxy/sse.js';
import { StreamGuard, type DraftVerdict } from '../../src/proxy/stream-guard.js';
import type { Inspected, StreamEventView, StreamInspector } from '../../src/proxy/protocol.js';
import { openAiStream } from '../helpers/mock-upstreams.js';

function parseAll(bytes: Buffer, cut: number): SseEvent[] {
  const p = new SseParser();
  const out: SseEvent[] = [];
  for (let i = 0; i < bytes.length; i += cut) p.push(bytes.subarray(i, i + cut), (e) => out.push(e));
  p.end((e) => out.push(e));
  return out;
}

t.test('the SSE parser yields the same events however the bytes are split', async (t) => {
  const text = 'héllo wörld ✓ — naïve café 🚀 ';
  const events = openAiStream(text.repeat(3), [{ name: 'lookup_order', args: { order_id: '1234' } }], 3);
  const bytes = Buffer.from(events.join(''));
  const whole = parseAll(bytes, bytes.length);
  t.equal(whole.length, events.length);
  t.same(whole.map((e) => e.raw), events, 'raw text is kept byte for byte');
  for (const cut of [1, 2, 3, 5, 7, 64]) t.same(parseAll(bytes, cut), whole, `split every ${cut} bytes`);
});

t.test('the SSE parser handles CRLF, CR, comments, event names and a last event without its blank line', async (t) => {
  const raw = ': keep-alive\r\n\r\nevent: message_start\r\ndata: {"a":1}\r\n\r\ndata: line1\rdata: line2\r\rdata: tail';
  for (const cut of [1, 4, raw.length]) {
    const ev = parseAll(Buffer.from(raw), cut);
    t.same(
      ev.map((e) => [e.event, e.data]),
      [
        [null, ''],
        ['message_start', '{"a":1}'],
        [null, 'line1\nline2'],
        [null, 'tail'],
      ],
      `split every ${cut}`,
    );
    t.equal(ev.map((e) => e.raw).join(''), raw, 'raw parts add up to the input');
  }
});

const SECRET_RE = /(?<![A-Z0-9])AKIA[0-9A-Z]{16}(?![A-Z0-9])/;

/** A check that, like the policy pack, withholds any draft whose text or tool calls contain an AWS key id. */
function check(draft: Inspected): DraftVerdict {
  return SECRET_RE.test(JSON.stringify(draft.output)) ? 'withhold' : 'pass';
}

function run(text: string, windowChars: number, size: number) {
  const inspector = new ChatCompletions().openStream();
  let delivered = '';
  const lags: number[] = [];
  let seen = 0;
  const guard = new StreamGuard({
    windowChars,
    inspector,
    check,
    write: (s) => {
      for (const e of parseAll(Buffer.from(s), s.length)) {
        if (e.data.startsWith('{')) delivered += JSON.parse(e.data).choices[0]?.delta?.content ?? '';
      }
    },
  });
  let ok = true;
  for (const e of parseAll(Buffer.from(openAiStream(text, [], size).join('')), 1 << 20)) {
    if (e.data.startsWith('{')) seen += (JSON.parse(e.data).choices[0]?.delta?.content ?? '').length;
    if (!guard.push(e)) {
      ok = false;
      break;
    }
    lags.push(seen - delivered.length);
  }
  if (ok) ok = guard.finish();
  return {
    ok,
    guard,
    maxLag: Math.max(...lags),
    get delivered() {
      return delivered;
    },
  };
}

t.test('no prefix of a secret is ever delivered, wherever it falls and however the text is chunked', async (t) => {
  const secret = 'AKIAIOSFODNN7EXAMPLE';
  let cases = 0;
  for (const windowChars of [32, 64, 128]) {
    for (const size of [1, 3, 7, 16]) {
      for (const at of [0, 5, 31, 32, 33, 100, 257]) {
        const text = 'x'.repeat(at) + ' ' + secret + ' trailing words after the key';
        const r = run(text, windowChars, size);
        cases++;
        if (r.ok || r.delivered.length > at + 1) {
          t.fail(`window ${windowChars}, ${size}-char deltas, secret at ${at}: ok=${r.ok}, delivered ${r.delivered.length} chars`);
        }
        const acct = r.guard.account(true);
        if (acct.withheldSha256 === null || acct.releasedTextChars !== r.delivered.length) t.fail('the account matches what left');
      }
    }
  }
  t.pass(`${cases} placements: the stream was cut and nothing past the clean prefix left`);
});

t.test('clean text flows with a bounded lag and is released whole at the end', async (t) => {
  const text = 'The quick brown fox jumps over the lazy dog. '.repeat(40);
  for (const windowChars of [32, 128]) {
    const r = run(text, windowChars, 4);
    t.ok(r.ok, 'nothing withheld');
    const step = Math.max(8, Math.floor(windowChars / 4));
    t.ok(r.maxLag <= windowChars + step + 4, `window ${windowChars}: at most ${r.maxLag} chars held at any time`);
    t.ok(r.delivered.length >= text.length - windowChars - step - 4, 'all but the window left before the end');
    r.guard.releaseAll();
    t.equal(r.delivered, text, 'the rest leaves once the final check passed');
  }
});

t.test('a false alarm in a chunk is confirmed against the whole text before the stream is cut', async (t) => {
  // "xAKIA..." is no key (the letter before it joins the run), but a chunk starting at "AKIA" would match.
  const text = 'y'.repeat(40) + 'ZAKIAIOSFODNN7EXAMPLE' + ' more text '.repeat(10);
  for (const size of [1, 2, 3]) {
    const r = run(text, 16, size);
    t.ok(r.ok, `${size}-char deltas: not cut`);
  }
});

/** A reader whose events say outright what they carry: `{"c": channel, "t": text, "close": [channels]}`. */
function scriptedInspector(): StreamInspector {
  const texts = new Map<string, string>();
  return {
    onEvent(ev) {
      const e = JSON.parse(ev.data) as { c?: string; t?: string; close?: string[] };
      const v: StreamEventView = {};
      if (e.c !== undefined && e.t !== undefined) {
        texts.set(e.c, (texts.get(e.c) ?? '') + e.t);
        v.texts = [{ channel: e.c, text: e.t }];
      }
      if (e.close !== undefined) v.closes = e.close;
      return v;
    },
    finish: () => [],
    snapshot: () => ({ output: { text: [...texts.values()].join('\n') }, toolsCalled: [] }),
    unitsSnapshot: () => ({ output: {}, toolsCalled: [] }),
    errorEvent: () => '',
  };
}

function scripted(events: object[], windowChars: number) {
  const delivered: string[] = [];
  const guard = new StreamGuard({
    windowChars,
    inspector: scriptedInspector(),
    check,
    write: (s) => {
      for (const e of parseAll(Buffer.from(s), s.length)) delivered.push(e.data);
    },
  });
  const results = events.map((e) => guard.push({ event: null, id: null, data: JSON.stringify(e), raw: `data: ${JSON.stringify(e)}\n\n` }));
  return { guard, delivered, results };
}

t.test('channels are checked each as one text: a secret split across interleaved channels is still seen', async (t) => {
  const secret = 'AKIAIOSFODNN7EXAMPLE';
  const events: object[] = [];
  const a = `${secret} then a long clean tail of words that goes on and on well past the window size here`;
  const b = 'other channel words '.repeat(8);
  for (let i = 0; i < Math.max(a.length, b.length); i += 2) {
    if (i < a.length) events.push({ c: 'a', t: a.slice(i, i + 2) });
    if (i < b.length) events.push({ c: 'b', t: b.slice(i, i + 2) });
  }
  const r = scripted(events, 16);
  t.ok(r.results.includes(false), 'the stream was cut');
  const gotA = r.delivered.map((d) => JSON.parse(d)).filter((e) => e.c === 'a').map((e) => e.t).join('');
  t.notMatch(gotA, /AKIA/, 'nothing of the secret left');
});

t.test('a closed channel needs no window: its tail leaves once checked, not at the end of the stream', async (t) => {
  const short = 'a short clean answer';
  const events = [{ c: '0', t: short }, { close: ['0'] }, { c: '1', t: 'x' }];
  const closed = scripted(events, 64);
  t.same(closed.results, [true, true, true]);
  t.equal(closed.delivered.length, 2, 'the closed channel\'s text and the close event left at once');
  t.equal(JSON.parse(closed.delivered[0]).t, short);

  const open = scripted([{ c: '0', t: short }, { c: '1', t: 'x' }], 64);
  t.equal(open.delivered.length, 0, 'without the close it is held behind the window');
  t.ok(open.guard.finish());
  t.equal(open.delivered.length, 0, 'until the final check, which the caller runs');
  open.guard.releaseAll();
  t.equal(open.delivered.length, 2);

  const reopened = scripted([{ c: '0', t: short }, { close: ['0'] }, { c: '0', t: ` more AKIAIOSFODNN7EXAMPL` }, { c: '0', t: 'E' }], 64);
  t.equal(reopened.delivered.length, 2, 'text added to a closed channel is held behind the window again');
  t.notOk(reopened.guard.finish(), 'and checked: the secret it completes cuts the stream');
  t.equal(reopened.delivered.length, 2, 'nothing of it left');
});
