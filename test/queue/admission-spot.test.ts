import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../../src/core/model.js';
import type { SpotPreference } from '../../src/core/spot.js';
import { Admission, type AdmissionSettings } from '../../src/queue/admission.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { makeType } from '../helpers/catalogs.js';

/**
 * Admission sizes jobs in the market the plan buys them in: where the run buys spot, a job that may go on spot counts
 * its cheapest host at the price of the pool a spot launch gets, against the spot quota group. The plan check and the
 * launch gate count spot instances so; sized on demand, the fleet would run at a third of a $ cap.
 */

// p3.2xlarge: $3.06/h on demand; a spot launch gets the <5% pool at $0.90/h, not the cheaper >20% one ($0.80/h).
const catalog: Catalog = {
  provider: 'aws',
  region: 'us-east-1',
  types: [makeType('p3.2xlarge', [1, 8, 61], 3.06), makeType('c7i.large', [0, 2, 4], 0.08925)],
  spot: {
    snapshotDate: '2026-01-01',
    source: 'test',
    offerings: [
      { typeName: 'p3.2xlarge', zone: 'us-east-1a', pricePerHour: 0.9, interruption: '<5%' },
      { typeName: 'p3.2xlarge', zone: 'us-east-1b', pricePerHour: 0.8, interruption: '>20%' },
    ],
  },
};

interface JobSketch {
  readonly spot?: SpotPreference;
  /** Placed on this instance (it then holds capacity). */
  readonly on?: SchedInstance;
}

/** One-GPU jobs `j0`, `j1`, …, each one task [1, 4, 16] on p3. */
function snapshot(jobs: readonly JobSketch[]): ClusterSnapshot {
  const sched: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  const instances = new Map<string, SchedInstance>();
  jobs.forEach((j, i) => {
    const id = `j${i}`;
    sched.push({
      id,
      taskIds: [`${id}/t`],
      reconfigurable: true,
      arrivalSeconds: i,
      migrationDelaySeconds: 0,
      expectedRemainingSeconds: 3600,
      ...(j.spot === undefined ? {} : { spot: j.spot }),
    });
    tasks.push({ id: `${id}/t`, jobId: id, key: 'k', demand: { p3: [1, 4, 16] }, instanceId: j.on?.id });
    if (j.on !== undefined) {
      const inst = instances.get(j.on.id) ?? { ...j.on, taskIds: [] };
      instances.set(j.on.id, { ...inst, taskIds: [...inst.taskIds, `${id}/t`] });
    }
  });
  return { nowSeconds: 1000, jobs: sched, tasks, instances: [...instances.values()] };
}

function decide(caps: QueueCaps, jobs: readonly JobSketch[], settings: Partial<AdmissionSettings> = {}) {
  return new Admission(catalog, { caps, ...settings }).decide(snapshot(jobs), () => ({}));
}

const allowed = (n: number): JobSketch[] => Array.from({ length: n }, () => ({}));

describe('admission where the run buys spot', () => {
  it('sizes a job that may go on spot at the pool a spot launch gets, and admits up to the $ cap at that price', () => {
    const open = decide({ maxCostPerHour: 4 }, [...allowed(5), { spot: 'never' }], { spot: true });
    expect(open.waiting.get('j0')?.footprint.instances).toEqual([
      { family: 'p3', gpus: 1, vcpus: 8, costPerHour: 0.9, market: 'spot' },
    ]);
    // A job that refuses spot is bought on demand, and sized so.
    expect(open.waiting.get('j5')?.footprint.instances[0]).toMatchObject({ costPerHour: 3.06 });
    expect(open.waiting.get('j5')?.footprint.instances[0]?.market).toBeUndefined();
    // 4 × $0.90 = $3.60 of the $4/h cap; the fifth would go over it.
    expect(open.result.admitted).toEqual(['j0', 'j1', 'j2', 'j3']);
  });

  it('sizes on demand where the run buys no spot, though the catalog has a spot market', () => {
    for (const settings of [{}, { spot: false }]) {
      const closed = decide({ maxCostPerHour: 4 }, allowed(5), settings);
      expect(closed.waiting.get('j0')?.footprint.instances[0]).toMatchObject({ costPerHour: 3.06 });
      expect(closed.waiting.get('j0')?.footprint.instances[0]?.market).toBeUndefined();
      expect(closed.result.admitted).toEqual(['j0']);
    }
  });

  it('counts a job that may go on spot against the spot quota group, not the on-demand one', () => {
    const quota: QueueCaps = { quotas: [{ group: 'p', maxGpus: 1 }] };
    expect(decide(quota, allowed(3), { spot: true }).result.admitted).toEqual(['j0', 'j1', 'j2']);
    expect(decide(quota, allowed(3)).result.admitted).toEqual(['j0']);
    const spotQuota: QueueCaps = { quotas: [{ group: 'p-spot', maxGpus: 1 }] };
    expect(decide(spotQuota, allowed(3), { spot: true }).result.admitted).toEqual(['j0']);
    // Jobs that refuse spot count against the on-demand group alone.
    expect(decide(spotQuota, [{ spot: 'never' }, { spot: 'never' }], { spot: true }).result.admitted).toEqual(
      ['j0', 'j1'],
    );
  });

  it('sizes on demand a job whose spot footprint alone breaks a spot quota its on-demand one keeps', () => {
    // No spot GPUs at all: the plan buys such jobs on demand (spotQuotaFallback), so they are not never-fits.
    const caps: QueueCaps = {
      quotas: [
        { group: 'p-spot', maxGpus: 0 },
        { group: 'p', maxGpus: 1 },
      ],
    };
    const d = decide(caps, allowed(2), { spot: true });
    expect(d.result.admitted).toEqual(['j0']);
    expect(d.result.queued.map((q) => [q.jobId, q.reason === 'never-fits'])).toEqual([['j1', false]]);
    expect(d.waiting.get('j1')?.footprint.instances[0]).toMatchObject({ costPerHour: 3.06 });
  });

  it('prices the plan-cost fleet at the market it was bought in: a spot instance at its pool', () => {
    // j0 runs alone on its spot instance: fleet and footprint both $0.90/h, a factor of 1. Priced on demand, the fleet
    // ($3.06/h) would count 3.4× the footprint, and no waiting job would fit the $2/h cap.
    const spotA: SchedInstance = {
      id: 'i-a',
      typeName: 'p3.2xlarge',
      state: 'running',
      taskIds: [],
      market: 'spot',
      placement: { zone: 'us-east-1a' },
    };
    const d = decide({ maxCostPerHour: 2 }, [{ on: spotA }, {}, {}], { spot: true, admitBy: 'plan-cost' });
    expect(d.waiting.get('j1')?.footprint.instances[0]?.costPerHour).toBeCloseTo(0.9, 9);
    expect(d.result.admitted).toEqual(['j1']);
    // In the cheaper pool's zone, at that pool's price: the fleet costs 0.8/0.9 of its footprint.
    const spotB: SchedInstance = { ...spotA, id: 'i-b', placement: { zone: 'us-east-1b' } };
    const inB = decide({ maxCostPerHour: 2 }, [{ on: spotB }, {}, {}], { spot: true, admitBy: 'plan-cost' });
    expect(inB.waiting.get('j1')?.footprint.instances[0]?.costPerHour).toBeCloseTo(0.8, 9);
  });

  it('keeps the setting through fork and settings (a prediction replays the same sizing)', () => {
    const admission = new Admission(catalog, { caps: { maxCostPerHour: 4 }, spot: true });
    expect(admission.settings.spot).toBe(true);
    const replay = new Admission(catalog, admission.settings).decide(snapshot(allowed(5)), () => ({}));
    expect(replay.result.admitted).toHaveLength(4);
    expect(admission.fork().decide(snapshot(allowed(5)), () => ({})).result.admitted).toHaveLength(4);
  });
});
