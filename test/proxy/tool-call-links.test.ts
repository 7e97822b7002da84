import t from 'tap';
import { canonicalArgumentsHash, toolCallLinkMetadata, ToolCallLinks, type RequestedToolCall } from '../../src/proxy/tool-call-links.js';

const req = (o: Partial<RequestedToolCall> = {}): RequestedToolCall => ({
  agentId: 'a1',
  sessionId: 's1',
  tool: 'lookup_order',
  args: '{"order_id":"1","history_days":30}',
  llmEnvelopeId: 'llm-1',
  toolCallId: 'call_1',
  ...o,
});

t.test('arguments match canonically, whichever side wrote them', async (t) => {
  const h = canonicalArgumentsHash({ order_id: '1', history_days: 30 });
  t.equal(canonicalArgumentsHash('{"history_days":30,"order_id":"1"}'), h, 'OpenAI JSON string, other key order');
  t.equal(canonicalArgumentsHash(' {"order_id" : "1", "history_days": 30.0} '), h, 'whitespace and number spelling');
  t.not(canonicalArgumentsHash({ order_id: 1, history_days: 30 }), h, 'types matter');
  t.equal(canonicalArgumentsHash(''), canonicalArgumentsHash({}), 'an empty string is no arguments');
  t.equal(canonicalArgumentsHash(undefined), canonicalArgumentsHash({}));
  t.equal(canonicalArgumentsHash('{oops'), canonicalArgumentsHash('{oops'), 'unparsable strings match only themselves');
  t.not(canonicalArgumentsHash('{oops'), canonicalArgumentsHash({}));
  t.match(h, /^[A-Za-z0-9_-]{43}$/);
});

t.test('a requested call is claimed once by the matching execution', async (t) => {
  const links = new ToolCallLinks({ now: () => Date.parse('2025-01-01T00:00:00Z') });
  links.recordRequested(req());
  t.equal(links.claim('a1', 's1', 'lookup_order', { order_id: '2', history_days: 30 }), null, 'other arguments');
  t.equal(links.claim('a1', 's1', 'issue_refund', { order_id: '1', history_days: 30 }), null, 'other tool');
  t.equal(links.claim('a2', 's1', 'lookup_order', { order_id: '1', history_days: 30 }), null, 'other agent');
  t.equal(links.claim('a1', 's2', 'lookup_order', { order_id: '1', history_days: 30 }), null, 'other session');
  const link = links.claim('a1', 's1', 'lookup_order', { history_days: 30, order_id: '1' });
  t.same(link, {
    llm_envelope_id: 'llm-1',
    tool_call_id: 'call_1',
    tool: 'lookup_order',
    session_id: 's1',
    args_sha256: canonicalArgumentsHash({ order_id: '1', history_days: 30 }),
    requested_at: '2025-01-01T00:00:00.000Z',
  });
  t.equal(links.claim('a1', 's1', 'lookup_order', { history_days: 30, order_id: '1' }), null, 'one request, one execution');
  t.equal(links.size, 0);
  t.same(toolCallLinkMetadata(link), { tool_call_link: link });
  t.same(toolCallLinkMetadata(null), { unrequested_tool_call: true });
});

t.test('sessions: exact match first, an unknown session on either side matches the agent', async (t) => {
  const links = new ToolCallLinks();
  links.recordRequested(req({ sessionId: null, toolCallId: 'no-session' }));
  links.recordRequested(req({ sessionId: 's1', toolCallId: 'exact' }));
  t.equal(links.claim('a1', 's1', 'lookup_order', { order_id: '1', history_days: 30 })!.tool_call_id, 'exact', 'the exact session wins over an older sessionless entry');
  t.equal(links.claim('a1', 's1', 'lookup_order', { order_id: '1', history_days: 30 })!.tool_call_id, 'no-session');
  links.recordRequested(req({ sessionId: 's9', toolCallId: 'from-s9' }));
  t.equal(links.claim('a1', null, 'lookup_order', { order_id: '1', history_days: 30 })!.tool_call_id, 'from-s9', 'an execution without a session matches any of the agent');
});

t.test('duplicates are claimed oldest first', async (t) => {
  const links = new ToolCallLinks();
  links.recordRequested(req({ toolCallId: 'first' }));
  links.recordRequested(req({ toolCallId: 'second' }));
  t.equal(links.claim('a1', 's1', 'lookup_order', { order_id: '1', history_days: 30 })!.tool_call_id, 'first');
  t.equal(links.claim('a1', 's1', 'lookup_order', { order_id: '1', history_days: 30 })!.tool_call_id, 'second');
});

t.test('bounded: entries expire after the TTL and the oldest go beyond maxEntries', async (t) => {
  let now = 1_000_000;
  const links = new ToolCallLinks({ ttlMs: 1000, maxEntries: 3, now: () => now });
  links.recordRequested(req({ toolCallId: 'old' }));
  now += 1000;
  t.equal(links.claim('a1', 's1', 'lookup_order', { order_id: '1', history_days: 30 }), null, 'expired at exactly the TTL');
  t.equal(links.size, 0);
  for (let i = 0; i < 5; i++) links.recordRequested(req({ args: { i }, toolCallId: `c${i}` }));
  t.equal(links.size, 3);
  t.equal(links.claim('a1', 's1', 'lookup_order', { i: 0 }), null, 'evicted');
  t.equal(links.claim('a1', 's1', 'lookup_order', { i: 1 }), null, 'evicted');
  t.equal(links.claim('a1', 's1', 'lookup_order', { i: 4 })!.tool_call_id, 'c4');
  for (let i = 0; i < 20_000; i++) links.recordRequested(req({ args: { i } }));
  t.equal(links.size, 3, 'memory stays bounded under a flood');
  t.throws(() => new ToolCallLinks({ ttlMs: 0 }), RangeError);
});
