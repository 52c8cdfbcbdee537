import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { createScheduler, NO_INTERFERENCE } from '../../src/scheduler/registry.js';

const catalog = loadCatalogFile();

/** What a run learned: a at 0.6 and 0.8 beside b (mean 0.7), over a prior of 0.9. */
function learned(): ColocationTable {
  const t = new ColocationTable(0.9);
  t.record('a', ['b'], 0.6);
  t.record('a', ['b'], 0.8);
  return t;
}

describe('Eva started from a learned co-location table (§4.4)', () => {
  it('rates co-location as the table learned it, and saves it again unchanged', () => {
    const saved = learned().toJSON();
    const eva = new EvaScheduler(catalog, { learnedColocation: saved });
    expect(eva.expectedRate('a', ['b'])).toBeCloseTo(0.7, 12);
    // A pair the table never saw: its prior, the configured rate and the pairs it learned, (0.9 + 0.7) / 2.
    expect(eva.expectedRate('c', ['d'])).toBeCloseTo(0.8, 12);
    expect(eva.learnedColocation()).toEqual(saved);
    // Without a table Eva knows nothing yet: Eva's own prior everywhere.
    expect(new EvaScheduler(catalog).expectedRate('a', ['b'])).toBe(0.95);
  });

  it('takes a prior given beside the table over the one the table was saved with', () => {
    const eva = new EvaScheduler(catalog, { learnedColocation: learned().toJSON(), defaultRate: 0.5 });
    expect(eva.expectedRate('a', ['b'])).toBeCloseTo(0.7, 12);
    expect(eva.expectedRate('c', ['d'])).toBeCloseTo(0.6, 12);
    expect(eva.learnedColocation().defaultRate).toBe(0.5);
  });

  it('reaches every Eva variant through the scheduler registry, and no baseline', () => {
    const options = {
      catalog,
      interferenceProfile: NO_INTERFERENCE,
      evaLearnedColocation: learned().toJSON(),
    };
    for (const name of ['eva', 'eva-full-only', 'eva-partial-only', 'eva-single'] as const) {
      const scheduler = createScheduler(name, options);
      expect(scheduler).toBeInstanceOf(EvaScheduler);
      expect((scheduler as EvaScheduler).expectedRate('a', ['b']), name).toBeCloseTo(0.7, 12);
    }
  });
});
