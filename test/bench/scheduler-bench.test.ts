import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { benchScheduler, type WeightedDemand } from '../../src/bench/scheduler-bench.js';

describe('bench scheduler', () => {
  it('reports the median time of an even number of repeats: the mean of the two middle ones', () => {
    const catalog = loadCatalogFile();
    const demands: WeightedDemand[] = [{ demand: { any: [1, 0, 4] }, weight: 1, key: 'w' }];
    // Each run reads the clock twice (start, end); the runs take 1, 4, 2 and 10 seconds.
    const durations = [1000, 4000, 2000, 10_000];
    let clock = 0;
    let reads = 0;
    const now = (): number => {
      if (reads % 2 === 1) clock += durations[(reads - 1) / 2] as number;
      reads++;
      return clock;
    };
    const [result] = benchScheduler(catalog, demands, [3], { repeats: 4, now });
    expect(reads).toBe(8);
    expect(result?.seconds).toBe(3);
    expect(result?.tasks).toBe(3);
  });
});
