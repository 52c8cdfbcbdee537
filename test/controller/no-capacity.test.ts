import { describe, expect, it } from 'vitest';
import { hosts } from '../../src/round/replacement.js';
import { NO_CAPACITY } from '../../src/round/capacity-holds.js';
import { whyJob } from '../../src/controller/explain.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { catalog, CPU_SMALL, GPU_ONE, jobSpec, rig, type Rig } from './controller-fixtures.js';

/**
 * A cloud with no capacity for any type that fits a job: the job waits in the queue until the cloud's capacity-error
 * window ends, no round is asked for on its account, and the rounds that come meanwhile do not plan it again.
 */

/** The catalog's types that can host one GPU_ONE task (p3.2xlarge, p3.8xlarge, p3.16xlarge). */
const GPU_TYPES = catalog.types.filter((t) => hosts(t, [GPU_ONE])).map((t) => t.name);

function gpuRecords(store: StateStore): number {
  return store.listInstances().filter((i) => GPU_TYPES.includes(i.typeName)).length;
}

/** Let the loop run until it sleeps again (its pass done), then move the clock to its next wake. */
async function nextWake(r: Rig): Promise<void> {
  const deadline = Date.now() + 5000;
  while (r.clock.pendingSleeps === 0) {
    if (Date.now() > deadline) throw new Error('the loop never went to sleep');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  r.clock.advance((r.clock.nextWakeSeconds() ?? r.clock.nowSeconds()) - r.clock.nowSeconds());
}

describe('no capacity for any type that fits a job', () => {
  it('keeps the job waiting in later rounds of the window, without new instance records, then plans it again', async () => {
    const r = rig();
    for (const name of GPU_TYPES) r.cloud.noCapacity.add(name);
    const gpu = r.controller.submit(jobSpec('gpu', GPU_ONE), 'research');
    await r.controller.runRound('submitted');
    // The cheapest type is refused and the others are known short of capacity (no call): back in the queue, with why.
    expect(gpuRecords(r.store)).toBe(1);
    expect(r.store.getJob(gpu.id)?.state).toBe('queued');
    expect(r.store.getJob(gpu.id)?.reason).toMatch(/^no capacity: p3\.\d+xlarge was refused/);

    // Reconciliation passes and a round asked for by another job, inside the provider's window.
    for (let i = 0; i < 5; i += 1) {
      r.clock.advance(15);
      await r.controller.reconcile();
    }
    const cpu = r.controller.submit(jobSpec('cpu', CPU_SMALL), 'research');
    const second = await r.controller.runRound('cpu submitted');
    expect(r.store.getTask(`${cpu.id}.0`)?.state).toBe('running');
    expect(gpuRecords(r.store)).toBe(1);
    expect(r.store.getJob(gpu.id)?.state).toBe('queued');
    const wait = second.decision?.waiting.find((w) => w.jobId === gpu.id);
    expect(wait?.capName).toBe(NO_CAPACITY);
    expect(wait?.cap).toContain('p3.2xlarge');
    expect(whyJob(r.store, gpu.id)[0]?.summary).toMatch(
      /^kept waiting: in the queue for capacity: the cloud refused every instance type that fits it \(p3\.2xlarge, /,
    );
    await r.controller.reconcile();
    expect(gpuRecords(r.store)).toBe(1);

    // The window (180 s from the refusals) is over: the next round plans the job again, and the cloud has capacity.
    r.cloud.noCapacity.clear();
    r.clock.advance(120);
    await r.controller.runRound('period');
    expect(r.store.getTask(`${gpu.id}.0`)?.state).toBe('running');
    expect(gpuRecords(r.store)).toBe(2);
  });

  it('asks for no early round: a round comes as each window ends, each leaving one closed record', async () => {
    const r = rig({ roundSeconds: 300, pollSeconds: 15 });
    for (const t of catalog.types) r.cloud.noCapacity.add(t.name);
    const startedAt = r.clock.nowSeconds();
    r.controller.submit(jobSpec('gpu', GPU_ONE), 'research');
    await r.controller.start();
    try {
      // Eleven and a half minutes of the loop's wakes (reconciliation every 15 s), bounded in wakes too.
      for (let wakes = 0; wakes < 120 && r.clock.nowSeconds() < startedAt + 690; wakes += 1)
        await nextWake(r);
    } finally {
      await r.controller.stop();
    }
    const rounds = r.store.listRounds(1000).map((x) => x.atSeconds - startedAt);
    // The start's round, then one as each capacity-error window (180 s) ends, which plans the job again and is
    // refused again: one round a window, never one every 2 s.
    expect(rounds.sort((a, b) => a - b)).toEqual([0, 180, 360, 540]);
    expect(r.store.listInstances()).toHaveLength(4);
    expect(r.store.listInstances({ states: ['terminated'] })).toHaveLength(4);
  });
});
