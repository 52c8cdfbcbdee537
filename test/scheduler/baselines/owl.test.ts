import { describe, expect, it } from 'vitest';
import { OwlScheduler, type InterferenceOracle } from '../../../src/scheduler/baselines/owl.js';
import { catalog, layout, snapshot } from './fixtures.js';

const fullSpeed: InterferenceOracle = () => 1;

describe('OwlScheduler', () => {
  it('never puts more than two tasks on an instance, even when more would fit at no interference', () => {
    // Five [0,1,2] tasks of one class: the pair (ratio 2 × 0.08925 / 0.08925 = 2) beats the singleton (1).
    const plan = new OwlScheduler(catalog, fullSpeed).plan(
      snapshot({
        jobs: ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id, key: 'w', demand: [0, 1, 2] as const })),
      }),
    );
    const sizes = plan.configuration.instances.map((i) => i.taskIds.length).sort();
    expect(sizes).toEqual([1, 2, 2]);
    expect(plan.configuration.instances.every((i) => i.typeName === 'c7i.large' && i.isNew)).toBe(true);
  });

  it('pairs by descending TNRP(oracle)/price of the pair’s cheapest type', () => {
    const oracle: InterferenceOracle = (target, others) => {
      const pair = [target, ...others].sort().join('+');
      return pair === 'x+y' ? 0.4 : pair === 'x+z' ? 0.9 : pair === 'y+z' ? 0.8 : 1;
    };
    // (x,z): 2 × 0.08925 × 0.9 / 0.08925 = 1.8 > (y,z) 1.6 > singletons 1 > (x,y) 0.8.
    const plan = new OwlScheduler(catalog, oracle).plan(
      snapshot({
        jobs: [
          { id: 'x', demand: [0, 1, 2] },
          { id: 'y', demand: [0, 1, 2] },
          { id: 'z', demand: [0, 1, 2] },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.large[x-0,z-0]', 'new-2:c7i.large[y-0]']);
  });

  it('keeps a lone task on its cheapest type and moves a lone task off a larger one', () => {
    const interfering: InterferenceOracle = () => 0.3; // every pair is worth less than its price
    const plan = new OwlScheduler(catalog, interfering).plan(
      snapshot({
        instances: [
          { id: 'min', type: 'c7i.large' },
          { id: 'big', type: 'c7i.4xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 1, 2], on: 'min' },
          { id: 'b', demand: [0, 4, 8], on: 'big' },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['min:c7i.large[a-0]', 'new-1:c7i.xlarge[b-0]']);
    expect(plan.decision.candidates[0]?.movedJobs).toEqual(['b']);
  });

  it('pairs a new task with a task alone on an instance when the pair pays', () => {
    const plan = new OwlScheduler(catalog, fullSpeed).plan(
      snapshot({
        instances: [{ id: 'min', type: 'c7i.large' }],
        jobs: [
          { id: 'a', demand: [0, 1, 2], on: 'min' },
          { id: 'n', demand: [0, 1, 2] },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.large[a-0,n-0]']);
  });

  it('leaves paired instances and pinned lone tasks where they are', () => {
    const plan = new OwlScheduler(catalog, fullSpeed).plan(
      snapshot({
        instances: [
          { id: 'pair', type: 'c7i.4xlarge' },
          { id: 'lone', type: 'c7i.4xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 1, 2], on: 'pair' },
          { id: 'b', demand: [0, 1, 2], on: 'pair' },
          { id: 'p', demand: [0, 1, 2], on: 'lone', reconfigurable: false },
          { id: 'n', demand: [0, 1, 2] },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual([
      'lone:c7i.4xlarge[p-0]',
      'new-1:c7i.large[n-0]',
      'pair:c7i.4xlarge[a-0,b-0]',
    ]);
  });
});
