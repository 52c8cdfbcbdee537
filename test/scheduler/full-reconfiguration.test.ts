import { describe, expect, it } from 'vitest';
import {
  configurationCostPerHour,
  FreePool,
  NewIds,
  packFromScratch,
  topDownProvisioning,
} from '../../src/scheduler/full-reconfiguration.js';
import { classify, type PackTask } from '../../src/scheduler/packing.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import { table3Catalog, TABLE3_TASKS } from '../helpers/catalogs.js';

describe('Full Reconfiguration on Eva Table 3', () => {
  const book = new PriceBook(table3Catalog());

  it('reservation prices are the cheapest standalone types: $12, $3, $0.8, $0.4', () => {
    expect(TABLE3_TASKS.map((t) => book.reservationPrice(t.demand))).toEqual([12, 3, 0.8, 0.4]);
  });

  it('puts t1, t2, t4 on one A and t3 on C: $12.80/h instead of $16.20/h', () => {
    const config = packFromScratch(book, TABLE3_TASKS);
    const byType = Object.fromEntries(config.instances.map((i) => [i.typeName, i.taskIds]));
    expect(config.instances).toHaveLength(2);
    expect(byType['a.x']).toEqual(['t1', 't2', 't4']);
    expect(byType['c.x']).toEqual(['t3']);
    expect(configurationCostPerHour(book, config)).toBeCloseTo(12.8, 10);
    const noPacking = TABLE3_TASKS.reduce((s, t) => s + book.reservationPrice(t.demand), 0);
    expect(noPacking).toBeCloseTo(16.2, 10);
  });
});

describe('interference-aware packing (Eva §4.3 example)', () => {
  const book = new PriceBook(table3Catalog());
  const tasks = TABLE3_TASKS.slice(0, 2).map((t) => ({ ...t, key: t.id }));

  it('co-locates t1 and t2 on A when they keep 0.8 and 0.9: $12×0.8 + $3×0.9 = $12.3 ≥ $12', () => {
    const table = new ColocationTable();
    table.record('t1', ['t2'], 0.8);
    table.record('t2', ['t1'], 0.9);
    const config = packFromScratch(book, tasks, table);
    expect(config.instances.map((i) => [i.typeName, i.taskIds])).toEqual([['a.x', ['t1', 't2']]]);
    expect(configurationCostPerHour(book, config)).toBe(12);
  });

  it('separates them at 0.7 and 0.8: $10.8 < $12 is not cost-efficient', () => {
    const table = new ColocationTable();
    table.record('t1', ['t2'], 0.7);
    table.record('t2', ['t1'], 0.8);
    const config = packFromScratch(book, tasks, table);
    expect(config.instances.map((i) => [i.typeName, i.taskIds]).sort()).toEqual([
      ['a.x', ['t1']],
      ['b.x', ['t2']],
    ]);
    expect(configurationCostPerHour(book, config)).toBe(15);
  });
});

describe('top-down provisioning places every task', () => {
  it('even one worth less than nothing on any instance (a slow network priced at a high value of time)', () => {
    // Both tasks of a latency-sensitive job expected at P = 0.1 apart and $50/h of delay: alone, each is worth
    // 0.4·0.1 − 50·0.9 < 0, so no set grows on any type; they still go on their cheapest type, one each.
    const book = new PriceBook(table3Catalog());
    const demand = TABLE3_TASKS[3]?.demand as PackTask['demand'];
    const tasks: PackTask[] = [0, 1].map((i) => ({
      id: `j/${i}`,
      jobId: 'j',
      key: `j_${i}`,
      demand,
      rp: book.reservationPrice(demand),
      jobTaskCount: 2,
      latency: { jobId: 'j', isRoot: i === 0, together: 1, spread: 0.1 },
      timeValue: 50,
    }));
    const model = { table: new ColocationTable(), throughputAware: true, multiTaskAware: true };
    const drafts = topDownProvisioning(book, classify(tasks), model, new FreePool([]), new NewIds());
    expect(drafts.flatMap((d) => d.taskIds).sort()).toEqual(['j/0', 'j/1']);
  });
});
