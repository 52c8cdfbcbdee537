import { describe, expect, it } from 'vitest';
import { launchedOnSpot } from '../../src/controller/instance-market.js';
import type { ControllerLogger } from '../../src/controller/seams.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { jobSpec, liveRecords, rig } from './controller-fixtures.js';

/**
 * The round log's `costPerHour` is what the plan's fleet costs, each instance at its own market's price: the figure
 * `fleetwise cluster` and /metrics show once the plan is carried out, whatever the candidates were valued at.
 */

function costLogger(): ControllerLogger & { readonly costs: number[] } {
  const costs: number[] = [];
  const keep = (_message: string, data?: Record<string, unknown>) => {
    if (typeof data?.['costPerHour'] === 'number') costs.push(data['costPerHour']);
  };
  return { costs, info: keep, warn: keep, error: keep };
}

describe('the round log prices the fleet by market', () => {
  it('a fleet of spot and on-demand instances is logged at what cluster bills, not all at spot', async () => {
    const logger = costLogger();
    const { controller, store } = rig(
      {},
      {
        logger,
        spotMarket: true,
        schedulerRecipe: { kind: 'eva', options: { caps: schedulerCaps({}), spot: true } },
      },
    );
    const demand = { c7i: [0, 2, 4] as [number, number, number] };
    for (const name of ['spot-a', 'spot-b'])
      controller.submit(
        { ...jobSpec(name, demand, { expectedDurationSeconds: 36_000 }), spot: 'preferred' },
        'research',
      );
    controller.submit(
      { ...jobSpec('never', demand, { expectedDurationSeconds: 36_000 }), spot: 'never' },
      'research',
    );
    await controller.runRound('submitted');
    await controller.runRound('period');
    const markets = liveRecords(store).map((i) => launchedOnSpot(store, i.id));
    // The fleet this is about: some instances on spot, some on demand.
    expect(markets).toContain(true);
    expect(markets).toContain(false);
    const billed = controller.cluster().costPerHour;
    expect(logger.costs.length).toBeGreaterThanOrEqual(2);
    for (const logged of logger.costs) expect(logged).toBeCloseTo(billed, 9);
  });
});
