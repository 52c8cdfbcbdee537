/**
 * How an instance is bought: on demand at the list price, or as EC2 Spot capacity at the spot price, which AWS may
 * reclaim with a two-minute notice.
 */
export type Market = 'on-demand' | 'spot';

export const MARKETS: readonly Market[] = ['on-demand', 'spot'];

/** An instance with no market recorded was bought on demand (every instance before spot support). */
export function marketOf(instance: { readonly market?: Market | undefined }): Market {
  return instance.market ?? 'on-demand';
}
