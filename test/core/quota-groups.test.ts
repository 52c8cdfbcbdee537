import { describe, expect, it } from 'vitest';
import { typeFitsQuotas } from '../../src/core/quota-groups.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import { instanceType, testCatalog } from '../sim/sim-fixtures.js';

/** Which types one instance of fits its quota group, and the order Eva buys in when some do not. */

const mid = instanceType('mid.x', [3, 28, 96], 9);
const small = instanceType('small.x', [1, 8, 32], 3.6);

describe('types under quotas', () => {
  it('a type fits when one instance keeps its group’s quotas (its spot group’s, where spot may be bought)', () => {
    const quotas = [{ group: 'standard', maxVcpus: 24 }];
    expect(typeFitsQuotas(small, quotas, undefined)).toBe(true);
    expect(typeFitsQuotas(mid, quotas, undefined)).toBe(false);
    // Another group's quota does not bind it, nor does a GPU quota it keeps.
    expect(
      typeFitsQuotas(
        mid,
        [
          { group: 'p', maxVcpus: 8 },
          { group: 'standard', maxGpus: 3 },
        ],
        undefined,
      ),
    ).toBe(true);
    // Mapped to a group of its own by familyGroups.
    expect(typeFitsQuotas(mid, quotas, { mid: 'big' })).toBe(true);
    // Bought on spot, it counts against standard-spot, which has no quota here.
    expect(typeFitsQuotas(mid, quotas, undefined, true)).toBe(true);
    expect(typeFitsQuotas(mid, [...quotas, { group: 'standard-spot', maxVcpus: 16 }], undefined, true)).toBe(
      false,
    );
  });

  it('the price book lists the types that fit first, the others after, in each order', () => {
    const book = new PriceBook(testCatalog([mid]), (t) => t.name !== 'mid.x');
    expect(book.byCostAscending.map((t) => t.name)).toEqual(['small.x', 'big.x', 'mid.x']);
    expect(book.byCostDescending.map((t) => t.name)).toEqual(['big.x', 'small.x', 'mid.x']);
    // A task's price is the cheapest preferred type that hosts it, though an unpreferred one is cheaper.
    expect(book.minType({ any: [3, 20, 64] })?.name).toBe('big.x');
    expect(book.type('mid.x').name).toBe('mid.x');
    const all = new PriceBook(testCatalog([mid]));
    expect(all.byCostAscending.map((t) => t.name)).toEqual(['small.x', 'mid.x', 'big.x']);
  });
});
