// An upstream error answer that is not JSON is checked whole (issue 12, Medium 7): a secret past its first
// 4,096 characters was released before. Real `openai` client, a mock upstream.
import t from 'tap';
import OpenAI from 'openai';
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const SECRET = 'AKIAIOSFODNN7EXAMPLE';
let mock: MockUpstream;
let sc: TestSidecar;
let body = '';

t.before(async () => {
  mock = await startMockUpstream(() => ({ status: 500, headers: { 'content-type': 'text/plain' }, sse: [body] }));
  sc = await startSidecar({ openai: mock.url });
});
t.teardown(async () => {
  await sc.close();
  await mock.close();
});

t.test('a secret deep in a long text error body is withheld', async (t) => {
  body = `${'upstream stack trace line\n'.repeat(400)}key=${SECRET}\n`;
  const err = await refusedWith(t, OpenAI.APIError, new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'k', maxRetries: 0 }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
  t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 403, 'the caller gets the refusal, not the upstream body');
  t.notMatch(String((err as Error).message), SECRET);
});
