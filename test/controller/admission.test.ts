import { describe, expect, it } from 'vitest';
import {
  describeQueue,
  queuedJobOf,
  stagesDone,
  UNKNOWN_DURATION_SECONDS,
} from '../../src/controller/admission.js';
import { newJobRecord } from '../../src/controller/state/lifecycle.js';
import type { SchedJob } from '../../src/core/model.js';
import { orderingKey } from '../../src/queue/ordering.js';
import { toDistribution } from '../../src/queue/success.js';
import { FIFO_CONFIG } from '../../src/queue/wfq.js';
import { CPU_SMALL, jobSpec } from './controller-fixtures.js';

const sched = (id: string, remaining?: number): SchedJob => ({
  id,
  taskIds: [`${id}.0`],
  reconfigurable: true,
  arrivalSeconds: 0,
  migrationDelaySeconds: 0,
  ...(remaining === undefined ? {} : { expectedRemainingSeconds: remaining }),
});
const footprint = { jobId: 'x', instances: [] };

describe('controller admission: what the queue knows of a job', () => {
  it('counts the stages a job has passed from its attained service (the last one is the end, not a stage)', () => {
    const dist = toDistribution({
      kind: 'stages',
      stageSeconds: [1000, 4000],
      continueProbabilities: [0.25],
    });
    expect([0, 999, 1000, 4999, 5000, 9999].map((a) => stagesDone(dist, a))).toEqual([0, 0, 1, 1, 1, 1]);
  });

  it('re-ranks a job under success-rank once it passed a stage (it came back to the queue after running)', () => {
    const spec = {
      ...jobSpec('staged', CPU_SMALL, { expectedDurationSeconds: 5000 }),
      success: { kind: 'stages' as const, stageSeconds: [1000, 4000], continueProbabilities: [0.25] },
    };
    const job = newJobRecord('job-1', spec, 0);
    const fresh = queuedJobOf(job, sched('job-1', 5000), footprint, 1);
    const survived = queuedJobOf(job, sched('job-1', 3800), footprint, 1);
    expect(fresh.stagesDone).toBe(0);
    expect(survived.stagesDone).toBe(1);
    // (0.75·1000 + 0.25·5000)/0.25 = 8000 before; after surviving stage 1 only the 4000 s stage is left, sure.
    expect(orderingKey('success-rank', fresh, 0)).toBeCloseTo(8000, 9);
    expect(orderingKey('success-rank', survived, 0)).toBeCloseTo(4000, 9);
  });

  it('sizes jobs by declared duration × tasks, and assumes a day per task for jobs that declare none', () => {
    const declared = newJobRecord(
      'job-1',
      jobSpec('a', CPU_SMALL, { expectedDurationSeconds: 600, replicas: 3 }),
      0,
    );
    expect(queuedJobOf(declared, sched('job-1', 300), footprint, 3)).toMatchObject({
      sizeSeconds: 1800,
      remainingWorkSeconds: 900,
      team: 'research',
    });
    const unknown = newJobRecord('job-2', jobSpec('b', CPU_SMALL), 0);
    expect(queuedJobOf(unknown, sched('job-2'), footprint, 1)).toMatchObject({
      sizeSeconds: UNKNOWN_DURATION_SECONDS,
      remainingWorkSeconds: UNKNOWN_DURATION_SECONDS,
    });
  });

  it('describes the queue configuration and caps in one line', () => {
    expect(describeQueue(FIFO_CONFIG, {})).toBe(
      '1 class(es) by size: all (weight 1, fifo); preemption on (margin 0.05 of the capacity, after 2 short round(s)); caps: none (every job is admitted)',
    );
    expect(
      describeQueue(
        {
          classifyBy: 'team',
          classes: [
            { id: 'cv', weight: 2, teams: ['vision'], ordering: 'srpt' },
            { id: 'rest', weight: 1, ordering: 'fifo' },
          ],
          preemption: { enabled: false, marginShare: 0, minShortRounds: 1 },
        },
        { maxCostPerHour: 20, quotas: [{ group: 'p', maxGpus: 8 }] },
      ),
    ).toBe(
      '2 class(es) by team: cv (vision) (weight 2, srpt), rest (other teams) (weight 1, fifo); preemption off; caps: $20/h, quota p 8 GPUs',
    );
  });
});
