import { z } from 'zod';

/**
 * The bounds of a catalog's price per hour, on-demand and spot alike: far outside any real EC2 type (the dearest,
 * u7in-32tb.224xlarge, is about $408/h): a value beyond them is a typo or a unit mix-up, and near the float limits costs
 * overflow to Infinity and reports show null.
 */
const MAX_COST_PER_HOUR = 1000;
export const MIN_COST_PER_HOUR = 0.0001;

/** $/hour of one instance. */
export const pricePerHour = z
  .number()
  .finite()
  .min(MIN_COST_PER_HOUR, `must be at least $${MIN_COST_PER_HOUR}/h (a price of 0 is no price)`)
  .max(MAX_COST_PER_HOUR, `must be at most $${MAX_COST_PER_HOUR}/h (no EC2 instance costs that much)`);

/** Whether `usd` is a price per hour a catalog can hold (a fetched price outside the bounds is none). */
export function isPricePerHour(usd: number): boolean {
  return pricePerHour.safeParse(usd).success;
}
