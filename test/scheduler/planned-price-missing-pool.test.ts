import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { instancePricePerHour } from '../../src/core/catalog.js';
import { plannedPricePerHour } from '../../src/scheduler/market-choice.js';

const catalog = loadCatalogFile();

/**
 * A spot instance already running in a pool the catalog no longer has (a catalog file replaced across a restart) is
 * priced on demand, as it is billed, rather than stopping every round with an error; a new one must have its pool.
 */
describe('the planned price of a spot instance whose pool the catalog lacks', () => {
  const withoutC7iPools = {
    ...catalog,
    spot: catalog.spot && {
      ...catalog.spot,
      offerings: catalog.spot.offerings.filter((o) => o.typeName !== 'c7i.large'),
    },
  };
  const running = {
    id: 'inst-1',
    typeName: 'c7i.large',
    isNew: false,
    taskIds: ['job-1.0'],
    market: 'spot' as const,
    placement: { zone: 'us-east-1a' },
  };

  it('is the on-demand price for one already running', () => {
    expect(catalog.spot?.offerings.some((o) => o.typeName === 'c7i.large')).toBe(true);
    expect(plannedPricePerHour(withoutC7iPools, running)).toBe(
      instancePricePerHour(catalog, 'c7i.large', 'on-demand'),
    );
    // With its pool, its pool's price, below on demand.
    expect(plannedPricePerHour(catalog, running)).toBeLessThan(
      instancePricePerHour(catalog, 'c7i.large', 'on-demand'),
    );
  });

  it('is still an error for a new one: a plan may not buy spot where there is no pool', () => {
    expect(() => plannedPricePerHour(withoutC7iPools, { ...running, isNew: true })).toThrow(
      'no spot offering for c7i.large in us-east-1a',
    );
  });
});
