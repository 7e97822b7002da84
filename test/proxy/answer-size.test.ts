// Unbounded answers (issue 12, High 2): an answer past GOV_PROXY_MAX_ANSWER_BYTES is not read further nor
// released, streamed or whole, and the cut is recorded with the withheld part's SHA-256; a long text is
// stored in its row as a bounded excerpt plus its length and SHA-256 (GOV_AUDIT_MAX_TEXT_CHARS), while the
// decision reads all of it. Real `openai` client, a mock upstream.
import t from 'tap';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { openAiCompletion, openAiStream, startMockUpstream, type MockReply, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';
import { drain } from '../helpers/answer-events.js';

const CAP = 64 * 1024;
const STORED = 1000;
const LINE = 'The agent writes a long and entirely harmless report about order 1234. ';

let mock: MockUpstream;
let sc: TestSidecar;
let reply: () => MockReply;

const openai = () => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': 'size-bot' } });
const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Write the report' }] };
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

t.before(async () => {
  mock = await startMockUpstream(() => reply());
  sc = await startSidecar({ openai: mock.url, env: { GOV_PROXY_MAX_ANSWER_BYTES: String(CAP), GOV_AUDIT_MAX_TEXT_CHARS: String(STORED) } });
});
t.teardown(async () => {
  await sc.close();
  await mock.close();
});

t.test('a stream past the cap ends with an error event; the held part is withheld and its SHA-256 recorded', async (t) => {
  const text = LINE.repeat(Math.ceil((4 * CAP) / LINE.length));
  reply = () => ({ sse: openAiStream(text, [], 64) });
  const { data, response } = await openai().chat.completions.create({ ...ask, stream: true }).withResponse();
  const { events, error } = await drain(data);
  t.ok(error instanceof OpenAI.APIError, 'the SDK raises the error event');
  t.match(String((error as Error).message), /GOV_PROXY_MAX_ANSWER_BYTES/, 'which names the setting');
  const got = (events as OpenAI.ChatCompletionChunk[]).map((c) => c.choices[0]?.delta.content ?? '').join('');
  t.ok(got.length < CAP, `less than the cap reached the caller (${got.length} chars)`);
  t.ok(text.startsWith(got), 'and what did is the start of the answer, in order');
  const { post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
  const meta = post.payload.request.metadata;
  t.equal(meta.upstream_failure, 'too_large', 'the row names the failure');
  t.equal(meta.stream.cut_by, 'size_cap', 'and the cut');
  t.match(meta.stream.withheld_sha256, /^[0-9a-f]{64}$/, 'and commits to the withheld part');
  t.ok(meta.stream.withheld_bytes > 0, 'whose size it records');
});

t.test('a whole answer past the cap is refused with 502 and recorded, never released', async (t) => {
  reply = () => ({ json: openAiCompletion(LINE.repeat(Math.ceil((2 * CAP) / LINE.length))) });
  const err = await refusedWith(t, OpenAI.APIError, openai().chat.completions.create(ask));
  t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 502);
  const id = (err as InstanceType<typeof OpenAI.APIError>).headers?.get('x-gov-envelope-id');
  const { post } = await sc.rowsOf(id!);
  t.equal(post.payload.request.output.upstream_error, 'too_large', 'the post-check row records why');
});

t.test('a long answer is decided on whole but stored as a bounded excerpt with its length and SHA-256', async (t) => {
  const text = LINE.repeat(Math.ceil(10_000 / LINE.length));
  reply = () => ({ sse: openAiStream(text, [], 256) });
  const { data, response } = await openai().chat.completions.create({ ...ask, stream: true }).withResponse();
  const { events, error } = await drain(data);
  t.equal(error, null, 'the stream is delivered');
  t.equal((events as OpenAI.ChatCompletionChunk[]).map((c) => c.choices[0]?.delta.content ?? '').join(''), text, 'whole');
  const { post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
  const stored: string = post.payload.request.output.text;
  t.ok(stored.length < STORED + 200, `the row stores ${stored.length} chars of ${text.length}`);
  t.ok(stored.startsWith(text.slice(0, STORED)), 'the excerpt is the text as it began');
  t.ok(stored.endsWith(`[gov: truncated, ${text.length} chars, sha256 ${sha256(text)}]`), 'and the marker commits to the whole text');

  // The decision reads all of it: a secret past the excerpt still withholds the answer.
  reply = () => ({ json: openAiCompletion(`${text} AKIAIOSFODNN7EXAMPLE`) });
  await refusedWith(t, OpenAI.APIError, openai().chat.completions.create(ask));
});
