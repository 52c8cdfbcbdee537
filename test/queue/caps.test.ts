import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import { ValidationError } from '../../src/core/validation.js';
import { awsQuotaGroup } from '../../src/core/quota-groups.js';
import {
  capViolations,
  dominantShare,
  fitsCaps,
  parseQueueCaps,
  reservationFootprint,
  usageOf,
  type JobFootprint,
  type QueueCaps,
} from '../../src/queue/caps.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';

const delays = {
  instantiateSeconds: 0,
  workerStartSeconds: 0,
  workerRegisterSeconds: 0,
  terminateSeconds: 0,
};
const catalog: Catalog = {
  provider: 'aws',
  region: 'us-east-1',
  types: [
    { name: 'p3.2xlarge', family: 'p3', capacity: [1, 8, 61], costPerHour: 3.06, delays },
    { name: 'c7i.large', family: 'c7i', capacity: [0, 2, 4], costPerHour: 0.08925, delays },
    { name: 'c7i.xlarge', family: 'c7i', capacity: [0, 4, 8], costPerHour: 0.1785, delays },
  ],
};

const gpuJob: JobFootprint = {
  jobId: 'gpu',
  instances: [
    { family: 'p3', gpus: 1, vcpus: 8, costPerHour: 3.06 },
    { family: 'p3', gpus: 1, vcpus: 8, costPerHour: 3.06 },
  ],
};
const cpuJob: JobFootprint = {
  jobId: 'cpu',
  instances: [{ family: 'c7i', gpus: 0, vcpus: 4, costPerHour: 0.1785 }],
};

describe('caps', () => {
  it('maps families to AWS on-demand quota groups', () => {
    expect(
      ['p3', 'p4d', 'g5', 'vt1', 'inf2', 'trn1', 'c7i', 'r7i', 'm5', 'x2iedn'].map(awsQuotaGroup),
    ).toEqual(['p', 'p', 'g-vt', 'g-vt', 'inf', 'trn', 'standard', 'standard', 'standard', 'x']);
  });

  it('counts $/hour, instances and per-group vCPUs/GPUs, and names the cap a set breaks', () => {
    const caps: QueueCaps = {
      maxCostPerHour: 7,
      maxInstances: 3,
      quotas: [{ group: 'p', maxVcpus: 16, maxGpus: 2 }],
    };
    const u = usageOf([gpuJob, cpuJob], caps);
    expect(u.costPerHour).toBeCloseTo(6.2985, 9);
    expect(u.instances).toBe(3);
    expect(u.byGroup.get('p')).toEqual({ vcpus: 16, gpus: 2 });
    expect(u.byGroup.get('standard')).toEqual({ vcpus: 4, gpus: 0 });
    expect(fitsCaps([gpuJob, cpuJob], caps)).toBe(true);
    expect(capViolations(usageOf([gpuJob, gpuJob], caps), caps)).toEqual([
      'maxCostPerHour',
      'maxInstances',
      'quota p maxVcpus',
      'quota p maxGpus',
    ]);
    expect(fitsCaps([cpuJob, cpuJob, cpuJob], { quotas: [{ group: 'standard', maxVcpus: 8 }] })).toBe(false);
  });

  it('family overrides move a family to another quota group', () => {
    const caps: QueueCaps = { quotas: [{ group: 'special', maxVcpus: 2 }], familyGroups: { c7i: 'special' } };
    expect(fitsCaps([cpuJob], caps)).toBe(false);
  });

  it('dominant share = the largest fraction of any cap the job uses', () => {
    const caps: QueueCaps = { maxCostPerHour: 12.24, maxInstances: 10, quotas: [{ group: 'p', maxGpus: 8 }] };
    expect(dominantShare(gpuJob, caps)).toBeCloseTo(0.5, 12); // $6.12 of $12.24
    expect(dominantShare(cpuJob, caps)).toBeCloseTo(0.1, 12); // 1 of 10 instances
    expect(dominantShare(cpuJob, {})).toBe(0);
    expect(dominantShare(gpuJob, { quotas: [{ group: 'p', maxGpus: 0 }] })).toBe(Number.POSITIVE_INFINITY);
  });

  it('reservation footprint: one cheapest standalone instance per task (Eva §4.2)', () => {
    const f = reservationFootprint('j', [{ any: [0, 3, 4] }, { p3: [1, 4, 20] }], new PriceBook(catalog));
    expect(f.instances.map((i) => [i.family, i.vcpus, i.gpus, i.costPerHour])).toEqual([
      ['c7i', 4, 0, 0.1785],
      ['p3', 8, 1, 3.06],
    ]);
  });

  it('validates caps and names the bad field', () => {
    expect(parseQueueCaps({ maxInstances: 4, quotas: [{ group: 'p', maxGpus: 8 }] }).maxInstances).toBe(4);
    expect(() => parseQueueCaps({ quotas: [{ group: 'p', maxGpus: -1 }] }, 'fleetwise.yaml caps')).toThrow(
      /fleetwise\.yaml caps: quotas\.0\.maxGpus/,
    );
    expect(() => parseQueueCaps({ maxInstances: 1.5 })).toThrow(ValidationError);
  });
});
