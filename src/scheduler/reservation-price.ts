import { compareText } from '../core/compare.js';
import type { Catalog, InstanceType } from '../core/catalog.js';
import { demandOn, fits, type FamilyDemand, type Resources } from '../core/resources.js';

/**
 * Reservation price (Eva §4.2): the $/hour of the cheapest instance type, over all families, that can host a
 * task alone. `PriceBook` caches it per distinct demand, since traces repeat a few dozen demand vectors.
 */
export class PriceBook {
  /** Types by ascending cost (ties by name), the order for "cheapest that fits" (preferred types first). */
  readonly byCostAscending: readonly InstanceType[];
  /** Types by descending cost (ties by name), the order of Full Reconfiguration (Algorithm 1, line 3; preferred first). */
  readonly byCostDescending: readonly InstanceType[];
  private readonly typesByName: ReadonlyMap<string, InstanceType>;
  private readonly minTypeCache = new Map<string, InstanceType | null>();
  private readonly shareCache = new Map<string, number>();

  constructor(
    readonly catalog: Catalog,
    /**
     * The types to buy before any other (default: all): both orders list them first, the others after, so a task goes
     * to another type only where none of these can host it (a type too big for its quota group, Eva's caps).
     */
    preferred: (type: InstanceType) => boolean = () => true,
  ) {
    const ascending = [...catalog.types].sort(
      (a, b) => a.costPerHour - b.costPerHour || compareText(a.name, b.name),
    );
    const first = ascending.filter(preferred);
    const last = ascending.filter((t) => !preferred(t));
    this.byCostAscending = [...first, ...last];
    this.byCostDescending = [...[...first].reverse(), ...[...last].reverse()];
    this.typesByName = new Map(catalog.types.map((t) => [t.name, t]));
  }

  type(name: string): InstanceType {
    const t = this.typesByName.get(name);
    if (t === undefined) throw new Error(`unknown instance type ${name}`);
    return t;
  }

  /** The cheapest type that hosts `demand` alone, or undefined if none can. */
  minType(demand: FamilyDemand): InstanceType | undefined {
    const sig = demandSignature(demand);
    let t = this.minTypeCache.get(sig);
    if (t === undefined) {
      t = this.byCostAscending.find((it) => canHost(it, demand)) ?? null;
      this.minTypeCache.set(sig, t);
    }
    return t ?? undefined;
  }

  /** The cheapest type that hosts every one of `demands` together, or undefined if none can. */
  minTypeTogether(demands: readonly FamilyDemand[]): InstanceType | undefined {
    return this.byCostAscending.find((it) => {
      const sum = sumOn(demands, it.family);
      return sum !== undefined && fits(sum, it.capacity);
    });
  }

  /** Reservation price in $/hour; throws for a demand no type can host (validate specs before planning). */
  reservationPrice(demand: FamilyDemand): number {
    const t = this.minType(demand);
    if (t === undefined) throw new Error(`no instance type can host demand ${demandSignature(demand)}`);
    return t.costPerHour;
  }

  /**
   * Dominant-share price in $/hour: over the types that can host the demand, the least price × (the largest share of
   * one capacity dimension the demand takes). On the bundled catalog, where price is linear in size within a family,
   * this is what the task costs on a perfectly packed instance of its cheapest family, e.g. [1 GPU, 12 vCPU, 48 GiB]
   * takes 12/64 of a p3.16xlarge's vCPUs: $4.59/h, against the $12.24/h p3.8xlarge it needs alone.
   */
  dominantSharePrice(demand: FamilyDemand): number {
    const sig = demandSignature(demand);
    let price = this.shareCache.get(sig);
    if (price === undefined) {
      price = Number.POSITIVE_INFINITY;
      for (const t of this.byCostAscending) {
        const d = demandOn(demand, t.family);
        if (d === undefined || !fits(d, t.capacity)) continue;
        let share = 0;
        for (let i = 0; i < 3; i++) {
          const c = t.capacity[i] as number;
          if (c > 0) share = Math.max(share, (d[i] as number) / c);
        }
        price = Math.min(price, share * t.costPerHour);
      }
      this.shareCache.set(sig, price);
    }
    if (!Number.isFinite(price)) throw new Error(`no instance type can host demand ${sig}`);
    return price;
  }

  /**
   * Packed reservation price (fleetwise, beyond Eva §4.2): what a task costs in a fleet that packs, i.e. its
   * dominant-share price grossed up by the packing efficiency the fleet can expect (0 < efficiency ≤ 1), and never
   * more than its standalone reservation price. See EvaOptions.reservationPrice for why.
   */
  packedReservationPrice(demand: FamilyDemand, efficiency: number): number {
    return Math.min(this.reservationPrice(demand), this.dominantSharePrice(demand) / efficiency);
  }

  /** The cheapest type on which the summed per-family demands of a set fit (the downsizing step). */
  cheapestHosting(demands: readonly FamilyDemand[]): InstanceType | undefined {
    return this.byCostAscending.find((it) => {
      const total = sumOn(demands, it.family);
      return total !== undefined && fits(total, it.capacity);
    });
  }
}

export function canHost(type: InstanceType, demand: FamilyDemand): boolean {
  const d = demandOn(demand, type.family);
  return d !== undefined && fits(d, type.capacity);
}

/** Σ demands on one family, or undefined if some task cannot run on it. */
export function sumOn(demands: readonly FamilyDemand[], family: string): Resources | undefined {
  let g = 0;
  let c = 0;
  let m = 0;
  for (const demand of demands) {
    const d = demandOn(demand, family);
    if (d === undefined) return undefined;
    g += d[0];
    c += d[1];
    m += d[2];
  }
  return [g, c, m];
}

const signatures = new WeakMap<FamilyDemand, string>();

/** A canonical string of a demand (order of families does not matter); cached per demand object. */
export function demandSignature(demand: FamilyDemand): string {
  let sig = signatures.get(demand);
  if (sig === undefined) {
    sig = computeSignature(demand);
    signatures.set(demand, sig);
  }
  return sig;
}

function computeSignature(demand: FamilyDemand): string {
  return Object.keys(demand)
    .sort()
    .map((k) => `${k}:${(demand[k] as Resources).join(',')}`)
    .join(';');
}

/**
 * Multi-task adjustment (Eva §4.4): one straggler slows the whole job, so a task of an n-task job at rate r
 * costs the job n·(1−r) of its throughput: r' = max(0, 1 − (1 − r)·n).
 */
export function multiTaskRate(rate: number, jobTaskCount: number): number {
  return jobTaskCount <= 1 ? rate : Math.max(0, 1 - (1 - rate) * jobTaskCount);
}
