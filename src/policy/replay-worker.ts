// Worker thread of `gov policy replay`: takes chunks of seqs from the shared counter, replays each in its
// own read snapshot, and posts every chunk's report back; see runReplay() in replay-run.ts.
import { parentPort, workerData } from 'node:worker_threads';
import { replay } from './replay.js';
import { prepareReplay, type WorkerInput, type WorkerMessage } from './replay-run.js';

const input = workerData as WorkerInput;
const counter = new Int32Array(input.nextChunk);
const post = (m: WorkerMessage) => parentPort!.postMessage(m);

try {
  const { reader, options } = await prepareReplay(input.job);
  try {
    const last = input.chunkStarts.length - 1;
    for (let i = Atomics.add(counter, 0, 1); i <= last; i = Atomics.add(counter, 0, 1)) {
      post({ chunk: i, report: replay(reader.rows(input.chunkStarts[i], i === last ? input.end : input.chunkStarts[i + 1]), options) });
    }
  } finally {
    await reader.close();
  }
  post({ done: true });
} catch (e) {
  post({ error: (e as Error).message });
}
