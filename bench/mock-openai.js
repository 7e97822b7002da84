// A minimal OpenAI Chat Completions upstream for bench/proxy.js, run as its own process so that its CPU
// is not the benchmark's: JSON answers, and `stream: true` answers as SSE written as fast as possible.
// Prints `mock-openai listening on <port>` once bound (port from argv[2], 0 for any).
import { createServer } from 'node:http';

const TEXT = 'Thanks for reaching out. I can help you with that question about your order today, step by step.';
const completion = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: TEXT, refusal: null }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 20, completion_tokens: 25, total_tokens: 45 },
});
const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'gpt-4o-mini', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
const STREAM_TEXT = TEXT.repeat(4);
const events = [chunk({ role: 'assistant', content: '' })];
for (let i = 0; i < STREAM_TEXT.length; i += 4) events.push(chunk({ content: STREAM_TEXT.slice(i, i + 4) }));
events.push(chunk({}, 'stop'), 'data: [DONE]\n\n');

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString();
    if (body.includes('"stream":true')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      // Spread over event-loop turns so the stream arrives as many chunks, like a real one.
      let i = 0;
      const next = () => {
        if (i < events.length) {
          res.write(events[i++]);
          setImmediate(next);
        } else res.end();
      };
      next();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(completion) });
    res.end(completion);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`mock-openai listening on ${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
