import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { waitInWords } from '../../src/controller/explain.js';
import { Admission } from '../../src/queue/admission.js';
import { runRound } from '../../src/round/round.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';

const catalog = loadCatalogFile();

/** A small job running on a c7i.large, and one waiting of twelve vCPUs: a c7i.4xlarge ($0.714/h) of its own. */
const snapshot: ClusterSnapshot = {
  nowSeconds: 600,
  jobs: [
    {
      id: 'small',
      taskIds: ['small/t'],
      reconfigurable: true,
      arrivalSeconds: 0,
      migrationDelaySeconds: 60,
      expectedRemainingSeconds: 3600,
      runningSinceSeconds: 0,
      lastCheckpointSeconds: 0,
    },
    {
      id: 'big',
      taskIds: ['big/t'],
      reconfigurable: true,
      arrivalSeconds: 0,
      migrationDelaySeconds: 60,
      expectedRemainingSeconds: 3600,
    },
  ],
  tasks: [
    { id: 'small/t', jobId: 'small', key: 'small', demand: { any: [0, 1, 2] }, instanceId: 'i-l' },
    { id: 'big/t', jobId: 'big', key: 'big', demand: { any: [0, 12, 24] } },
  ],
  instances: [{ id: 'i-l', typeName: 'c7i.large', state: 'running', taskIds: ['small/t'] }],
};

describe('a job that can never run under the caps', () => {
  it('is recorded with every cap it breaks alone, and explained with all of them', () => {
    // Over the $0.50/h cap and the standard family group's 4-vCPU quota, alone: raising one of them is not enough.
    const caps = { maxCostPerHour: 0.5, quotas: [{ group: 'standard', maxVcpus: 4 }] };
    const outcome = runRound({
      snapshot,
      jobInfo: () => ({}),
      admission: new Admission(catalog, { caps }),
      scheduler: new EvaScheduler(catalog, { caps }),
      observations: [],
      catalog,
      carriedOut: true,
    });
    const waiting = outcome.planned?.plan.decision.waiting.find((w) => w.jobId === 'big');
    expect(waiting).toMatchObject({
      cap: 'queue all: never-fits',
      capName: 'maxCostPerHour',
      brokenAlone: ['maxCostPerHour', 'quota standard maxVcpus'],
    });
    expect(waitInWords(waiting?.cap ?? '', waiting?.brokenAlone?.join(', '))).toBe(
      'it can never run: alone it breaks maxCostPerHour, quota standard maxVcpus',
    );
  });
});
