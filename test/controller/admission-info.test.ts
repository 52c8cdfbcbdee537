import { describe, expect, it } from 'vitest';
import { admissionInfo } from '../../src/controller/admission-info.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { buildSnapshot, readSnapshotInputs } from '../../src/controller/snapshot.js';
import type { JobState } from '../../src/controller/state-store.js';
import { example } from '../helpers/job-history.js';

describe("what admission reads of the controller's jobs", () => {
  it('dates a job from when its current run began: its last start out of the queue, a move continuing it', () => {
    let now = 0;
    const store = new MemoryStateStore({ nowSeconds: () => now });
    const history = (id: string, steps: readonly (readonly [number, JobState])[]): void => {
      for (const [at, state] of steps) {
        now = at;
        store.setJobState(id, state);
      }
    };
    const spec = example('resnet.yaml');
    const [preempted, moved, waiting] = [store.submitJob(spec), store.submitJob(spec), store.submitJob(spec)];
    // Started at 100, moved at 400, preempted back to the queue at 1000, placed again (between rounds) at 1200.
    history(preempted.id, [
      [100, 'starting'],
      [150, 'running'],
      [400, 'migrating'],
      [420, 'starting'],
      [450, 'running'],
      [1000, 'migrating'],
      [1010, 'queued'],
      [1200, 'starting'],
      [1300, 'running'],
    ]);
    // Started at 200 and moved since: its run goes on.
    history(moved.id, [
      [200, 'starting'],
      [260, 'running'],
      [700, 'migrating'],
      [720, 'starting'],
      [760, 'running'],
    ]);
    now = 1400;
    const inputs = readSnapshotInputs(store, now);
    const info = admissionInfo(inputs, buildSnapshot(inputs), store);
    expect(store.getJob(preempted.id)?.startedAtSeconds).toBe(150);
    expect(info(preempted.id).runBeganSeconds?.()).toBe(1200);
    expect(info(moved.id).runBeganSeconds?.()).toBe(200);
    expect(info(waiting.id).runBeganSeconds?.()).toBeUndefined();
  });
});
