import type { Market } from '../../core/market.js';
import { UNAVAILABLE_OFFERING_SECONDS } from '../../core/spot.js';

/**
 * Remembers "no capacity for this type in this zone" for a few minutes, so the next launch goes straight to another
 * zone or type instead of asking EC2 again. Karpenter keeps the same cache (per type, zone and capacity type) with a
 * 3-minute TTL (industry-anchors.md, "Insufficient-capacity (ICE) handling"); 180 s is our default too. Spot and
 * on-demand capacity are separate pools: a spot refusal (or interruption) says nothing about on-demand capacity.
 */
export const DEFAULT_CAPACITY_ERROR_TTL_SECONDS = UNAVAILABLE_OFFERING_SECONDS;

export class CapacityErrorCache {
  private readonly expiresAtMs = new Map<string, number>();

  constructor(
    private readonly ttlSeconds: number = DEFAULT_CAPACITY_ERROR_TTL_SECONDS,
    private readonly nowMs: () => number = Date.now,
  ) {}

  private static key(typeName: string, zone: string, market: Market): string {
    return `${typeName}@${zone}/${market}`;
  }

  /** `sinceMs`: when the window opened (default now); an entry whose window is over already changes nothing. */
  markUnavailable(
    typeName: string,
    zone: string,
    market: Market = 'on-demand',
    sinceMs: number = this.nowMs(),
  ): void {
    const expires = sinceMs + this.ttlSeconds * 1000;
    if (expires <= this.nowMs()) return;
    const key = CapacityErrorCache.key(typeName, zone, market);
    this.expiresAtMs.set(key, Math.max(expires, this.expiresAtMs.get(key) ?? 0));
  }

  /**
   * No launch in `market` at all for a while, whatever the type and zone: the account's spot quota is used up, or
   * spot launches are not authorized (a policy without the spot resource, no spot service-linked role).
   */
  markMarketUnavailable(market: Market): void {
    this.expiresAtMs.set(CapacityErrorCache.key('*', '*', market), this.nowMs() + this.ttlSeconds * 1000);
  }

  /**
   * No launch in `zone` at all for a while, whatever the type and market: its subnet has no free address left, and a
   * full subnet is full for every type.
   */
  markZoneUnavailable(zone: string): void {
    this.expiresAtMs.set(CapacityErrorCache.zoneKey(zone), this.nowMs() + this.ttlSeconds * 1000);
  }

  isUnavailable(typeName: string, zone: string, market: Market = 'on-demand'): boolean {
    return (
      this.remembered(CapacityErrorCache.key('*', '*', market)) ||
      this.remembered(CapacityErrorCache.zoneKey(zone)) ||
      this.remembered(CapacityErrorCache.key(typeName, zone, market))
    );
  }

  private static zoneKey(zone: string): string {
    return `*@${zone}`;
  }

  private remembered(key: string): boolean {
    const expires = this.expiresAtMs.get(key);
    if (expires === undefined) return false;
    if (this.nowMs() >= expires) {
      this.expiresAtMs.delete(key);
      return false;
    }
    return true;
  }
}
