import { describe, expect, it } from 'vitest';
import { whyJob } from '../../src/controller/explain.js';
import { jobRestarts } from '../../src/controller/job-runs.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { RoundInput } from '../../src/controller/state-store.js';
import type { PlannedInstance } from '../../src/scheduler/types.js';
import { CPU_SMALL, jobSpec } from './controller-fixtures.js';

function round(instances: readonly PlannedInstance[]): RoundInput {
  return {
    configuration: { instances },
    decision: {
      scheduler: 'eva',
      nowSeconds: 0,
      candidates: [],
      chosen: 'stay',
      reason: 'only candidate',
      waiting: [],
      pinned: [],
    },
  };
}

describe('whyJob', () => {
  it('finds the rounds of a job that ended long ago, behind hundreds of later rounds', () => {
    let clock = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => clock, storeId: 'test' });
    const job = store.submitJob(jobSpec('old', CPU_SMALL));
    const task = `${job.id}.0`;
    const applied = (n: number, moved: readonly string[]) =>
      store.appendEvent({
        kind: 'round.applied',
        message: `round ${n}`,
        data: { round: n, moved: [...moved] },
      });
    clock = 1010;
    const placed = store.recordRound(
      round([{ id: 'inst-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [task] }]),
    ).round;
    applied(placed, []);
    clock = 1020;
    // The plan's own record does not list the move: only the round as carried out (its event) says so.
    const moved = store.recordRound(
      round([{ id: 'inst-2', typeName: 'c7i.xlarge', isNew: true, taskIds: [task] }]),
    ).round;
    applied(moved, [job.id]);
    clock = 1030;
    store.setJobState(job.id, 'cancelled');
    for (let i = 0; i < 300; i++) {
      clock = 1040 + 10 * i;
      applied(store.recordRound(round([])).round, []);
    }
    const why = whyJob(store, job.id, 10);
    expect(why.map((r) => [r.round, r.summary])).toEqual([
      [moved, expect.stringMatching(/^moved to inst-2 \(c7i\.xlarge, new\) /) as unknown],
      [placed, 'placed on inst-1 (c7i.xlarge, new)'],
    ]);
  });

  it('says a placement restarted the job when its last run went back to the queue, and what ended that run', () => {
    let clock = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => clock, storeId: 'test' });
    const job = store.submitJob({ ...jobSpec('flaky', CPU_SMALL), retryStrategy: { attempts: 2 } });
    const task = `${job.id}.0`;
    const startedBy = (instanceId: string, isNew: boolean): number => {
      clock += 10;
      const n = store.recordRound(
        round([{ id: instanceId, typeName: 'c7i.xlarge', isNew, taskIds: [task] }]),
      ).round;
      store.appendEvent({
        kind: 'round.applied',
        message: `round ${n}`,
        data: { round: n, moved: [], started: [job.id] },
      });
      store.setJobState(job.id, 'starting', `round ${n}`);
      store.setJobState(job.id, 'running', 'all tasks running');
      return n;
    };
    const first = startedBy('inst-1', true);
    // An attempt fails: the job is queued again for its next one.
    clock += 10;
    store.retryJob(
      job.id,
      { taskId: task, exitCode: 3, reason: 'exit code 3' },
      'attempt 1 of 2 failed: task exited 3',
    );
    const retried = startedBy('inst-1', false);
    // A plan returns it to the queue (a migration): checkpointed and stopped, then placed again.
    clock += 10;
    store.setJobState(job.id, 'migrating', `returned to the queue (round ${retried + 1})`);
    store.setJobState(job.id, 'queued', 'checkpointed and stopped');
    const returned = startedBy('inst-2', true);

    expect(whyJob(store, job.id).map((r) => [r.round, r.summary])).toEqual([
      [
        returned,
        `placed on inst-2 (c7i.xlarge, new), restarted because round ${retried + 1} returned it to the queue`,
      ],
      [retried, 'placed on inst-1 (c7i.xlarge), restarted because attempt 1 of 2 failed: task exited 3'],
      [first, 'placed on inst-1 (c7i.xlarge, new)'],
    ]);
    // Its attempts and migrations count those: no restart of its own.
    expect(jobRestarts(store, store.getJob(job.id)!)).toEqual([]);

    // Its instance vanishes: a restart, named by the instance and what became of it.
    clock += 10;
    store.setJobState(job.id, 'queued', 'instance inst-2 lost: vanished from EC2');
    const lost = startedBy('inst-3', true);
    expect(whyJob(store, job.id, 1)[0]).toMatchObject({
      round: lost,
      summary: 'placed on inst-3 (c7i.xlarge, new), restarted because inst-2 was lost: vanished from EC2',
    });
    expect(jobRestarts(store, store.getJob(job.id)!)).toEqual([
      { atSeconds: clock - 10, cause: 'inst-2 was lost: vanished from EC2' },
    ]);
  });

  it('says a round preempted the job, for which class and why, from its own queue.preempted event', () => {
    let clock = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => clock, storeId: 'test' });
    const job = store.submitJob(jobSpec('victim', CPU_SMALL));
    const other = store.submitJob(jobSpec('bystander', CPU_SMALL));
    const task = `${job.id}.0`;
    const applied = (instances: readonly PlannedInstance[]): number => {
      clock += 10;
      const n = store.recordRound(round(instances)).round;
      store.appendEvent({ kind: 'round.applied', message: `round ${n}`, data: { round: n, moved: [] } });
      return n;
    };
    const preempt = (jobId: string, reason: string) =>
      store.appendEvent({
        kind: 'queue.preempted',
        jobId,
        message: `job ${jobId} checkpointed back to the queue: ${reason}`,
        data: { classId: 'alpha', forClassId: 'beta' },
      });
    const placed = applied([{ id: 'inst-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [task] }]);
    const reason = 'class beta reclaims its guaranteed share 0.333 (using 0.000, head job job-5 needs 0.333)';
    const stopped = applied([]);
    preempt(job.id, reason);
    // Another job's preemption in a later round is not this job's.
    const later = applied([]);
    preempt(other.id, 'class beta reclaims its guaranteed share');

    expect(whyJob(store, job.id).map((r) => [r.round, r.summary])).toEqual([
      [later, 'not placed by this plan'],
      [stopped, `preempted: checkpointed back to the queue so class beta reclaims its share (${reason})`],
      [placed, 'placed on inst-1 (c7i.xlarge, new)'],
    ]);
  });
});
