import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { InProcessPredictionEngine, type PredictionEngine } from '../../src/controller/prediction-engine.js';
import { predictionInputs, predictionSpec, type PredictionJob } from '../../src/controller/prediction-job.js';
import { WorkerThreadPredictionEngine } from '../../src/controller/prediction-worker-engine.js';
import { readQueueRecord } from '../../src/controller/queue-records.js';
import { readSnapshotInputs } from '../../src/controller/snapshot.js';
import { predictCompletions } from '../../src/predict/predict.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import { catalog, rig } from './controller-fixtures.js';

/**
 * A completion-time prediction is given each job's spec cut to what it reads (demands, durations, delays, the success
 * model, the spot preference): not what the tasks run, their env, the description or the `queue:` section. Every job
 * of an array carries its own copy of those, and a state of large specs sent whole to the prediction thread ran it
 * out of heap, so that every prediction failed.
 */

const WORKER_URL = pathToFileURL(join(PROJECT_ROOT, 'dist', 'controller', 'prediction-worker.js'));

beforeAll(() => ensureBuiltCli(['controller/prediction-worker.ts']), 240_000);

const SECRET = 'do-not-send-this-to-the-prediction-thread';

/** A spec with every field a prediction does not read set, and `queueBytes` of notes in its `queue:` section. */
function fullSpec(name: string, queueBytes = 16): JobSpec {
  return validateJobSpec(
    {
      name,
      team: 'research',
      description: `a description ${SECRET}`,
      tasks: [
        {
          name: 'main',
          image: 'busybox:latest',
          command: ['sh', '-c', `echo ${SECRET}`],
          env: { TOKEN: SECRET },
          demand: { c7i: [0, 2, 4] },
          replicas: 2,
          shmSizeGiB: 1,
        },
        { name: 'side', build: { context: 'ctx', dockerfile: 'Dockerfile.gpu' }, demand: { any: [0, 1, 1] } },
      ],
      expectedDurationSeconds: 3600,
      totalIterations: 1000,
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 30, restoreDelaySeconds: 5, initDelaySeconds: 7 },
      spot: 'allowed',
      spotMaxDelayMinutes: 10,
      maxRunSeconds: 7200,
      noMoveSeconds: 60,
      queue: { class: 'small', notes: `${SECRET}${'x'.repeat(queueBytes)}` },
    },
    name,
    catalog,
  );
}

describe('the spec a prediction is given', () => {
  it('keeps what a prediction reads and drops the rest', () => {
    const spec = fullSpec('full');
    const cut = predictionSpec(spec);
    expect(JSON.stringify(cut)).not.toContain(SECRET);
    expect(cut).toEqual({
      name: 'full',
      team: 'research',
      tasks: [
        {
          name: 'main',
          image: 'busybox:latest',
          env: {},
          demand: { c7i: [0, 2, 4] },
          replicas: 2,
          shmSizeGiB: 1,
          workload: spec.tasks[0]?.workload,
        },
        {
          name: 'side',
          build: { context: 'ctx' },
          env: {},
          demand: { any: [0, 1, 1] },
          replicas: 1,
          shmSizeGiB: spec.tasks[1]?.shmSizeGiB,
          workload: spec.tasks[1]?.workload,
        },
      ],
      checkpoint: spec.checkpoint,
      queue: {},
      totalIterations: 1000,
      expectedDurationSeconds: 3600,
      spot: 'allowed',
      spotMaxDelaySeconds: 600,
    });
  });

  it('cuts the specs of queued and held jobs alike, and nothing else of the snapshot', () => {
    const r = rig({}, { predict: false });
    const first = r.controller.submit(fullSpec('first'), 'research');
    r.controller.submit({ ...fullSpec('second'), dependsOn: [first.id] }, 'research');
    const inputs = readSnapshotInputs(r.store, r.clock.nowSeconds());
    expect(inputs.heldJobs).toHaveLength(1);
    const cut = predictionInputs(inputs);
    expect(JSON.stringify(inputs)).toContain(SECRET);
    expect(JSON.stringify(cut)).not.toContain(SECRET);
    expect(cut.jobs.map((j) => j.spec)).toEqual(inputs.jobs.map((j) => predictionSpec(j.spec)));
    expect(cut.heldJobs?.map((j) => j.spec)).toEqual(inputs.heldJobs?.map((j) => predictionSpec(j.spec)));
    expect({ ...cut.jobs[0], spec: undefined }).toEqual({ ...inputs.jobs[0], spec: undefined });
    expect(cut.tasks).toBe(inputs.tasks);
    expect(cut.heldFor).toBe(inputs.heldFor);
  });

  it("is what the controller's predictions hand their engine, and the jobs get ETAs from it", async () => {
    const given: PredictionJob[] = [];
    const inProcess = new InProcessPredictionEngine(predictCompletions);
    const recording: PredictionEngine = {
      run: (job) => {
        given.push(job);
        return inProcess.run(job);
      },
      close: () => inProcess.close(),
    };
    const r = rig({}, { predict: recording });
    try {
      const job = r.controller.submit(fullSpec('watched'), 'research');
      await r.controller.predictionsSettled();
      expect(given.length).toBeGreaterThan(0);
      for (const sent of given) {
        expect(JSON.stringify(sent.inputs)).not.toContain(SECRET);
        expect(sent.inputs.jobs.map((j) => j.id)).toEqual([job.id]);
      }
      expect(readQueueRecord(r.store, job.id)?.eta?.completionSeconds).toEqual(expect.any(Number));
      // The stored job keeps its whole spec.
      expect(r.store.getJob(job.id)?.spec.tasks[0]?.env).toEqual({ TOKEN: SECRET });
    } finally {
      await r.controller.stop();
    }
  });

  it('a state of large specs is predicted in a worker thread whose heap is smaller than those specs', async () => {
    // 60 jobs of 1 MB each (in their queue sections) against a 48 MB heap: sent whole, the thread runs out of heap.
    const r = rig({}, { predict: new WorkerThreadPredictionEngine({ url: WORKER_URL, maxHeapMb: 48 }) });
    try {
      const jobs = Array.from({ length: 60 }, (_, i) =>
        r.controller.submit(fullSpec(`big-${i}`, 1024 * 1024 + i), 'research'),
      );
      await r.controller.predictionsSettled();
      for (const job of jobs) {
        const eta = readQueueRecord(r.store, job.id)?.eta;
        expect(eta?.basis, job.id).not.toMatch(/prediction failed/);
        expect(eta?.completionSeconds, job.id).toEqual(expect.any(Number));
      }
    } finally {
      await r.controller.stop();
    }
  }, 60_000);
});
