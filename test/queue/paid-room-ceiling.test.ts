import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { Admission, type AdmissionInfo, type AdmitBy } from '../../src/queue/admission.js';
import { FIFO_CONFIG, type WfqConfig } from '../../src/queue/wfq.js';
import { makeType } from '../helpers/catalogs.js';

/**
 * A class's `maxShare` under `admitBy: plan-cost`, on room already paid for. A job that ends leaves its instance empty
 * and paid: the fleet then costs more than its jobs' standalone footprints, and plan-cost sizes every job up by that
 * idle room. The ceiling must count what a class's jobs hold, not that idle room: otherwise the paid room goes to the
 * class without a ceiling, over its fair share, and the next rounds preempt it for the capped class.
 */
const catalog: Catalog = { provider: 'test', region: 'test', types: [makeType('d.x', [0, 4, 16], 0.4)] };

const config: WfqConfig = {
  classifyBy: 'team',
  classes: [
    { id: 'alpha', weight: 0.5, teams: ['a'], ordering: 'fifo' },
    { id: 'rest', weight: 0.5, ordering: 'fifo', maxShare: 0.5 },
  ],
  preemption: { ...FIFO_CONFIG.preemption, enabled: true },
};

const teamOf: AdmissionInfo = (id) => ({ team: id.startsWith('a') ? 'a' : 'b' });

/** One-task jobs, each needing a whole d.x ($0.40/h); `placed` maps a running job to its instance. */
function world(
  waiting: readonly string[],
  placed: Readonly<Record<string, string>>,
  idle: number,
): ClusterSnapshot {
  const ids = [...Object.keys(placed), ...waiting];
  const jobs: SchedJob[] = ids.map((id, i) => ({
    id,
    taskIds: [`${id}.0`],
    reconfigurable: true,
    arrivalSeconds: 10 * i,
    migrationDelaySeconds: 0,
    expectedRemainingSeconds: 600,
  }));
  const tasks: SchedTask[] = ids.map((id) => ({
    id: `${id}.0`,
    jobId: id,
    key: id,
    demand: { any: [0, 4, 12] },
    instanceId: placed[id],
  }));
  const busy = Object.entries(placed).map(([id, instance]) => ({
    id: instance,
    typeName: 'd.x',
    state: 'running' as const,
    taskIds: [`${id}.0`],
  }));
  const empty = Array.from({ length: idle }, (_, i) => ({
    id: `i-idle-${i}`,
    typeName: 'd.x',
    state: 'running' as const,
    taskIds: [],
  }));
  return { nowSeconds: 1000, jobs, tasks, instances: [...busy, ...empty] };
}

const admission = (admitBy: AdmitBy, maxCostPerHour: number): Admission =>
  new Admission(catalog, { caps: { maxCostPerHour }, config, admitBy });

describe("a class's ceiling on room already paid for", () => {
  it('gives an emptied paid instance to the class under its share first, as standalone sizing does', () => {
    // $0.80/h = two d.x. a1 (alpha) runs on one; the other was just emptied. alpha holds its share (half the cap);
    // b2 would bring rest to half the cap, its ceiling, and no more. Counting the idle d.x, plan-cost sizes every job
    // at twice its $0.40/h: b2 read as the whole cap, over rest's ceiling, and a2 (alpha, already at its share) took
    // the room.
    const snapshot = world(['a2', 'b2'], { a1: 'i-1' }, 1);
    expect(admission('standalone', 0.8).admissibleNow(snapshot, teamOf)).toEqual(['b2', 'a2']);
    expect(admission('plan-cost', 0.8).admissibleNow(snapshot, teamOf)).toEqual(['b2', 'a2']);
  });

  it('still keeps a class at its ceiling by what its jobs hold', () => {
    // $1.20/h = three d.x. b1 (rest) holds a third of the cap; b2 would bring rest to two thirds, over its ceiling of
    // a half whether sized at $0.40/h or at the $0.60/h plan-cost gives it beside the idle d.x: only a2 is let in.
    const snapshot = world(['a2', 'b2'], { a1: 'i-1', b1: 'i-2' }, 1);
    for (const admitBy of ['standalone', 'plan-cost'] as const)
      expect(admission(admitBy, 1.2).admissibleNow(snapshot, teamOf)).toEqual(['a2']);
  });

  it("leaves a round's decision under the caps as it was: the idle instance still counts against the $ cap", () => {
    // At a round the empty instance costs what it costs until the plan drops it: b2 waits for the caps, in its place.
    const decision = admission('plan-cost', 0.8).decide(world(['a2', 'b2'], { a1: 'i-1' }, 1), teamOf);
    expect(decision.result.admitted).toEqual([]);
    expect(decision.result.queued.find((q) => q.jobId === 'b2')?.reason).toBe('caps');
  });
});
