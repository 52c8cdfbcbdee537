import { resolve } from 'node:path';
import { z } from 'zod';
import { BUNDLED_CATALOG_PATH } from '../cloud/catalog-file.js';
import type { PriceOverrides } from '../core/catalog.js';
import { ValidationError } from '../core/validation.js';
import type { RunRequest } from '../sim/run-request.js';

/**
 * Which instance catalog each `bench arms` run takes. An arm may run another catalog than the baseline (`--catalog`,
 * or a `--config` or `--queue-config` naming one), and then its costs differ by the catalog's prices as well as by
 * its flags: the reports name the catalogs, and `--cap-share` caps each arm at the share of the uncapped peak measured
 * on its own catalog, at the prices its runs take.
 */

/** The catalog file a run takes, absolute (the bundled one's too), so two spellings of one file compare equal. */
export function runCatalog(request: Pick<RunRequest, 'catalogPath'>): string {
  return resolve(request.catalogPath ?? BUNDLED_CATALOG_PATH);
}

/** A catalog as the reports name it: its path, or `the bundled catalog`; null is an arm this build cannot read. */
export function catalogName(path: string | null): string {
  if (path === null) return 'unknown (another build’s flags, which this build cannot read)';
  return path === resolve(BUNDLED_CATALOG_PATH) ? 'the bundled catalog' : path;
}

/** Between a catalog and the price overrides laid over it, in the key of a reference run's peaks. */
const PRICED = ' with price overrides ';

/** Price overrides as text, their fields and types in one order, so that two files of the same prices match. */
function pricesText(overrides: PriceOverrides | undefined): string {
  return JSON.stringify(overrides ?? {}, (_, value: unknown) =>
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value,
  );
}

/**
 * The key of the uncapped reference an arm is capped by (`uncappedPeakByCatalog`): its catalog, with the price
 * overrides its runs lay over it (its own `--price-overrides`, or a `--config`'s or `--queue-config`'s) when they are
 * not the ones the `--common` flags alone take. The reference then runs at the arm's prices, as it runs on the arm's
 * catalog: a peak at list prices would cap an arm on a 28% Savings Plan at 1.39 times the share of its own.
 */
export function referenceKey(
  catalog: string,
  overrides: PriceOverrides | undefined,
  commonOverrides: PriceOverrides | undefined,
): string {
  const own = pricesText(overrides);
  return own === pricesText(commonOverrides) ? catalog : `${catalog}${PRICED}${own}`;
}

/** Whether a reference key carries price overrides of an arm's own (`referenceKey`). */
export function isPricedKey(key: string): boolean {
  return key.includes(PRICED);
}

/** A reference key as the messages name it: its catalog as `catalogName` does, and the price overrides it carries. */
export function referenceName(key: string): string {
  const at = key.indexOf(PRICED);
  return at < 0 ? catalogName(key) : `${catalogName(key.slice(0, at))}${key.slice(at)}`;
}

/** What of an earlier report says which catalogs its peaks were measured on (absent from reports written before). */
const earlierCatalogs = z.object({
  seeds: z.array(z.number().int()),
  referenceCatalog: z.string().nullable().optional(),
  uncappedPeakByCatalog: z.record(z.string(), z.array(z.number().positive().nullable())).optional(),
});

const SOURCE = '--peaks-from';

/**
 * Each seed's uncapped peak from an earlier report (`--peaks-from`), per reference in `needed` (reference key → the
 * arms capped by it; `referenceCatalog`, the one the `--common` flags alone run, among them), refused for a catalog, or
 * prices, the report did not measure them on: a peak at other prices would cap the arm at another share of its own.
 * `referencePeaks` are the report's `uncappedPeakBySeed` (earlier-peaks.ts has checked its `--common` and seeds). A
 * report written before reports recorded catalogs is taken as measured on the bundled catalog or on the `--catalog`
 * its `--common` names, which every build ran for those flags alike (a `--config` naming a catalog did not).
 */
export async function earlierPeaksByCatalog(
  file: string,
  /** The report's JSON (earlier-peaks.ts readEarlierReport). */
  report: unknown,
  seeds: readonly number[],
  referencePeaks: readonly number[],
  common: readonly string[],
  needed: ReadonlyMap<string, readonly string[]>,
  referenceCatalog: string,
): Promise<Map<string, number[]>> {
  const parsed = earlierCatalogs.safeParse(report);
  if (!parsed.success)
    throw new ValidationError(
      SOURCE,
      parsed.error.issues.map((i) => `${file}: ${i.path.join('.') || 'the report'}: ${i.message}`),
    );
  const earlier = parsed.data;
  const peaks = new Map<string, number[]>();
  for (const [catalog, bySeed] of Object.entries(earlier.uncappedPeakByCatalog ?? {})) {
    const ofSeeds = seeds.map((seed) => bySeed[earlier.seeds.indexOf(seed)]);
    if (ofSeeds.every((p): p is number => p !== undefined && p !== null)) peaks.set(catalog, ofSeeds);
  }
  const recorded =
    typeof earlier.referenceCatalog === 'string'
      ? earlier.referenceCatalog
      : earlier.referenceCatalog === undefined &&
          (referenceCatalog === runCatalog({}) ||
            common.some((a) => a === '--catalog' || a.startsWith('--catalog=')))
        ? referenceCatalog
        : undefined;
  if (recorded !== undefined) peaks.set(recorded, [...referencePeaks]);
  for (const [catalog, arms] of needed) {
    if (peaks.has(catalog)) continue;
    const rerun = 'leave out --peaks-from to run the uncapped references again';
    if (catalog === referenceCatalog)
      throw new ValidationError(SOURCE, [
        recorded === undefined
          ? `${file} does not say which catalog its peaks were measured on, and --common runs ` +
            `${catalogName(catalog)}: ${rerun}`
          : `${file} measured its peaks on ${catalogName(recorded)}, but --common now runs ${catalogName(catalog)}: ${rerun}`,
      ]);
    const priced = isPricedKey(catalog);
    throw new ValidationError(SOURCE, [
      `${file} has no uncapped peaks on ${referenceName(catalog)}, the catalog${priced ? ' and prices' : ''} ` +
        `arm${arms.length === 1 ? '' : 's'} ${arms.join(', ')} run${arms.length === 1 ? 's' : ''}: ${rerun} ` +
        (priced
          ? '(each arm is capped at the share of the uncapped peak on its own catalog at its own prices)'
          : '(each arm is capped at the share of its own catalog’s uncapped peak)'),
    ]);
  }
  return peaks;
}
