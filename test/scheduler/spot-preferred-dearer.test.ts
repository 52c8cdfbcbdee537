import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { applyPriceOverrides, typesByName, type Catalog } from '../../src/core/catalog.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { spotOffering, type SpotPreference } from '../../src/core/spot.js';
import { Admission } from '../../src/queue/admission.js';
import { runRound } from '../../src/round/round.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { marketChoice, marketContext, plannedPricePerHour } from '../../src/scheduler/market-choice.js';

/**
 * A job that prefers spot takes the cheaper, riskier market, not a dearer one. With an 80% discount on on-demand
 * prices (price overrides), a p3.2xlarge costs $0.612/h on demand and ~$0.95/h on spot: bought on spot, the job's
 * plan broke a $0.8/h cap that admission (sizing it on demand there) kept, and the cap cut it, round after round.
 */

const list = loadCatalogFile();
const discounted = applyPriceOverrides(list, { discountPercent: 80 });
const TYPE = 'p3.2xlarge';

function snapshotWith(spot: SpotPreference, nowSeconds = 600): ClusterSnapshot {
  return {
    nowSeconds,
    jobs: [
      {
        id: 'g',
        taskIds: ['g/0'],
        reconfigurable: true,
        arrivalSeconds: 0,
        migrationDelaySeconds: 60,
        expectedRemainingSeconds: 36_000,
        spot,
      },
    ],
    tasks: [{ id: 'g/0', jobId: 'g', key: 'g', demand: { any: [1, 4, 16] } }],
    instances: [],
  };
}

function marketOf(catalog: Catalog, spot: SpotPreference): string | undefined {
  const snapshot = snapshotWith(spot);
  const instance = { id: 'new-1', typeName: TYPE, isNew: true, taskIds: ['g/0'] };
  const input = { catalog, snapshot, rpPerHourOfJob: () => 1 };
  return marketChoice(instance, input, marketContext(snapshot)).planned.market;
}

describe('a spot preference where spot is dearer than on demand', () => {
  it('the prices as the case has them', () => {
    const onDemand = typesByName(discounted).get(TYPE)?.costPerHour as number;
    const spot = spotOffering(discounted.spot, TYPE)?.pricePerHour as number;
    expect(onDemand).toBeCloseTo(0.612, 3);
    expect(spot).toBeGreaterThan(0.8);
    // Without the overrides spot is the cheaper market.
    expect(spot).toBeLessThan(typesByName(list).get(TYPE)?.costPerHour as number);
  });

  it('buys on demand where spot costs more, and spot where it costs less', () => {
    expect(marketOf(discounted, 'preferred')).toBeUndefined();
    expect(marketOf(list, 'preferred')).toBe('spot');
    // Risk-blind spot baselines buy spot wherever it is offered, as before.
    const snapshot = snapshotWith('allowed');
    const instance = { id: 'new-1', typeName: TYPE, isNew: true, taskIds: ['g/0'] };
    const blind = { catalog: discounted, snapshot, rpPerHourOfJob: () => 1, riskBlind: true };
    expect(marketChoice(instance, blind, marketContext(snapshot)).planned.market).toBe('spot');
  });

  it('under a $0.8/h cap the job is placed at the first round, on demand, as admission sized it', () => {
    const caps = { maxCostPerHour: 0.8 };
    const admission = new Admission(discounted, { caps, spot: true });
    const eva = new EvaScheduler(discounted, { caps, spot: true });
    const out = runRound({
      snapshot: snapshotWith('preferred'),
      jobInfo: () => ({}),
      admission,
      scheduler: eva,
      observations: [],
      catalog: discounted,
      carriedOut: true,
    });
    expect(out.queue.result.admitted).toEqual(['g']);
    const planned = out.planned;
    expect(planned?.capViolation).toBeUndefined();
    expect(planned?.plan.decision.waiting).toEqual([]);
    const instances = planned?.plan.configuration.instances ?? [];
    expect(instances.map((i) => [i.typeName, i.market ?? 'on-demand', i.taskIds])).toEqual([
      [TYPE, 'on-demand', ['g/0']],
    ]);
    expect(plannedPricePerHour(discounted, instances[0] as (typeof instances)[0])).toBeCloseTo(0.612, 3);
    expect(planned?.diff.startedJobIds).toEqual(['g']);
  });
});
