import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { InstanceRecord, StateStore } from '../../src/controller/state-store.js';
import {
  STANDALONE_OBSERVATIONS,
  STANDALONE_OBSERVATIONS_KEY,
  STANDALONE_THROUGHPUT_KEY,
  ThroughputObservations,
} from '../../src/controller/throughput-observations.js';
import { catalog, CPU_SMALL } from './controller-fixtures.js';

/**
 * What the controller makes of the throughputs workers report: each workload's throughput alone, estimated from what
 * its tasks show alone, and the normalized throughputs the scheduler learns co-location from (Eva §4.3). A state store
 * on disk, as a controller keeps it.
 */

let dir: string;
let store: SqliteStateStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'fw-throughput-'));
  store = new SqliteStateStore(join(dir, 'state.db'));
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A one-task job of `workload` (`replicas` tasks, one gang), its task ids. */
function submit(s: StateStore, workload: string, replicas = 1): string[] {
  const spec = validateJobSpec(
    {
      name: workload,
      team: 'research',
      workload,
      tasks: [{ name: 'main', image: 'busybox:latest', demand: CPU_SMALL, replicas }],
    },
    workload,
    catalog,
  );
  return s
    .listTasks({ jobId: s.submitJob(spec).id })
    .map((t) => t.id)
    .sort();
}

function run(s: StateStore, taskId: string, inst: InstanceRecord): void {
  s.setTaskState(taskId, 'starting', inst.id);
  s.setTaskState(taskId, 'running');
}

/** `times` heartbeats of `inst` reporting `rates` (task → iterations per second). */
function beat(
  obs: ThroughputObservations,
  inst: InstanceRecord,
  rates: Record<string, number>,
  times = 1,
): void {
  for (let i = 0; i < times; i++) obs.observe(inst, new Map(Object.entries(rates)));
}

function standalone(s: StateStore): unknown {
  return s.getValue(STANDALONE_THROUGHPUT_KEY);
}

describe('throughput alone and normalized throughputs', () => {
  it('comes down from a high first reading alone: beside another workload the task reads its true share', () => {
    const obs = new ThroughputObservations(store);
    const [gamma] = submit(store, 'gamma') as [string];
    const [beta] = submit(store, 'beta') as [string];
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    run(store, gamma, inst);
    // Alone: a first window read high (8 it/s of a 4.7 it/s task), then its true pace for a few minutes.
    beat(obs, inst, { [gamma]: 8 });
    beat(obs, inst, { [gamma]: 4.7 }, 60);
    obs.take();
    const saved = standalone(store) as Record<string, number>;
    expect(saved.gamma).toBeGreaterThan(4.7);
    expect(saved.gamma).toBeLessThan(4.7 * 1.01);
    // Beside beta, gamma slows by 2%: it is observed at 0.98 of its pace alone, not at 4.6 / 8.
    run(store, beta, inst);
    beat(obs, inst, { [gamma]: 4.6, [beta]: 4.65 });
    const observed = new Map(obs.take().map((o) => [o.taskId, o.normalizedThroughput]));
    expect(observed.get(gamma)).toBeCloseTo(4.6 / 4.7, 2);
    // Beta was never seen alone: no reference, no observation.
    expect(observed.has(beta)).toBe(false);
  });

  it('is moved little by one outlier among steady readings alone, and forgets it', () => {
    const obs = new ThroughputObservations(store);
    const [alpha] = submit(store, 'alpha') as [string];
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    run(store, alpha, inst);
    beat(obs, inst, { [alpha]: 4.7 }, 30);
    beat(obs, inst, { [alpha]: 8 });
    obs.take();
    const afterSpike = (standalone(store) as Record<string, number>).alpha as number;
    expect(afterSpike).toBeCloseTo(4.7 + 3.3 / STANDALONE_OBSERVATIONS, 9);
    beat(obs, inst, { [alpha]: 4.7 }, 100);
    obs.take();
    expect((standalone(store) as Record<string, number>).alpha).toBeCloseTo(4.7, 2);
    // A slower pace alone is followed too: the reference is no record to beat.
    beat(obs, inst, { [alpha]: 4 }, 100);
    obs.take();
    expect((standalone(store) as Record<string, number>).alpha).toBeCloseTo(4, 2);
    expect(store.getValue(STANDALONE_OBSERVATIONS_KEY)).toEqual({ alpha: STANDALONE_OBSERVATIONS });
  });

  it('keeps a number per workload across a restart; a value saved as the best rate alone comes down', () => {
    // A state whose throughput alone is the highest rate once seen (one number per workload).
    store.setValue(STANDALONE_THROUGHPUT_KEY, { gamma: 8, beta: 4.708 });
    const [gamma] = submit(store, 'gamma') as [string];
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    run(store, gamma, inst);
    let obs = new ThroughputObservations(store);
    beat(obs, inst, { [gamma]: 4.7 }, 60);
    obs.take();
    const saved = standalone(store) as Record<string, number>;
    expect(saved.beta).toBe(4.708);
    expect(saved.gamma).toBeGreaterThan(4.7);
    expect(saved.gamma).toBeLessThan(4.7 * 1.01);
    // Saved once a round, and read back by a controller that restarts on the same state.
    store.close();
    store = new SqliteStateStore(join(dir, 'state.db'));
    obs = new ThroughputObservations(store);
    const [beta] = submit(store, 'beta') as [string];
    run(store, beta, inst);
    beat(obs, inst, { [gamma]: 4.23, [beta]: 4.6 });
    const observed = new Map(obs.take().map((o) => [o.taskId, o.normalizedThroughput]));
    expect(observed.get(gamma)).toBeCloseTo(4.23 / (saved.gamma as number), 9);
    expect(observed.get(beta)).toBeCloseTo(4.6 / 4.708, 9);
  });

  it("observes every task of a job at its slowest task's pace", () => {
    const obs = new ThroughputObservations(store);
    const [t0, t1] = submit(store, 'ddp', 2) as [string, string];
    const a = store.createInstance({ typeName: 'c7i.xlarge' });
    const b = store.createInstance({ typeName: 'c7i.xlarge' });
    run(store, t0, a);
    beat(obs, a, { [t0]: 10 }, 5);
    run(store, t1, a);
    beat(obs, a, { [t0]: 9, [t1]: 8 });
    expect(new Map(obs.take().map((o) => [o.taskId, o.normalizedThroughput]))).toEqual(
      new Map([
        [t0, 0.8],
        [t1, 0.8],
      ]),
    );
    // Nothing reported since: nothing to take. A rate that is no rate is no observation.
    expect(obs.take()).toEqual([]);
    beat(obs, b, { [t0]: 0 });
    beat(obs, a, { [t0]: Number.NaN, [t1]: -1 });
    expect(obs.take()).toEqual([]);
  });
});
