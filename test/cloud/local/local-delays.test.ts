import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import { LOCAL_LAUNCH_DELAYS, withLocalDelays } from '../../../src/cloud/local/local-delays.js';

describe('local launch delays', () => {
  it('replace every type’s EC2 delays and keep prices, capacities and names', () => {
    const ec2 = loadCatalogFile();
    const local = withLocalDelays(ec2);
    expect(local.types.map((t) => t.name)).toEqual(ec2.types.map((t) => t.name));
    for (const [i, t] of local.types.entries()) {
      const original = ec2.types[i];
      expect(t.delays).toEqual(LOCAL_LAUNCH_DELAYS);
      expect(t.costPerHour).toBe(original?.costPerHour);
      expect(t.capacity).toEqual(original?.capacity);
    }
    // EC2's boot is minutes; a local worker process is up in seconds.
    const boot = (d: typeof LOCAL_LAUNCH_DELAYS) =>
      d.instantiateSeconds + d.workerStartSeconds + d.workerRegisterSeconds;
    expect(boot(LOCAL_LAUNCH_DELAYS)).toBeLessThan(5);
    expect(boot(ec2.types[0]?.delays ?? LOCAL_LAUNCH_DELAYS)).toBeGreaterThan(60);
  });
});
