import { z } from 'zod';
import type { NoCapacityOffering } from '../core/model.js';
import type { StateStore } from './state-store.js';

/**
 * The instance types the cloud refused for want of capacity in every zone the provider may launch in, per market,
 * and until when its capacity-error cache keeps them out (the provider's `unavailableOfferingSeconds` from the
 * refusal). Kept in the state store, so the round reads them with the rest of its snapshot (snapshot.ts) and a
 * restarted controller still knows them; the round keeps waiting the jobs no type with capacity can host
 * (round/capacity-holds.ts) instead of planning, round after round, the launches the cloud just refused.
 */

const KEY = 'controller.noCapacity';

const recordsSchema = z.array(
  z.object({
    typeName: z.string(),
    market: z.enum(['on-demand', 'spot']),
    untilSeconds: z.number(),
  }),
);

/** The offerings still out of capacity at `nowSeconds` (none when the stored value is unreadable). */
export function readNoCapacity(store: StateStore, nowSeconds: number): NoCapacityOffering[] {
  const parsed = recordsSchema.safeParse(store.getValue(KEY));
  return parsed.success ? parsed.data.filter((r) => r.untilSeconds > nowSeconds) : [];
}

/** When the stored windows end, ended ones too (a round at the first end after the last round plans again). */
export function noCapacityWindowEnds(store: StateStore): number[] {
  const parsed = recordsSchema.safeParse(store.getValue(KEY));
  return parsed.success ? parsed.data.map((r) => r.untilSeconds) : [];
}

/**
 * Add refusals to the stored ones: an offering refused again keeps the later end, and the ended ones are dropped, so
 * the value stays as small as the cloud's shortage.
 */
export function recordNoCapacity(
  store: StateStore,
  offerings: readonly NoCapacityOffering[],
  nowSeconds: number,
): void {
  if (offerings.length === 0) return;
  const byKey = new Map<string, NoCapacityOffering>();
  for (const o of [...readNoCapacity(store, nowSeconds), ...offerings]) {
    const key = `${o.typeName}/${o.market}`;
    const known = byKey.get(key);
    if (known === undefined || known.untilSeconds < o.untilSeconds) byKey.set(key, o);
  }
  store.setValue(
    KEY,
    [...byKey.values()].map((o) => ({
      typeName: o.typeName,
      market: o.market,
      untilSeconds: o.untilSeconds,
    })),
  );
}
