import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ValidationError } from '../core/validation.js';

/**
 * Each seed's uncapped peak $/h taken from an earlier `bench arms --cap-share` report (its arms.json) instead of
 * running the `--common` flags alone again: the caps of a batch of arms then match the earlier batch's exactly, and a
 * 16-seed capped comparison skips its 16 reference runs. The earlier report must have run the same `--common` flags
 * (word for word) on every seed asked for.
 */
const earlierReport = z.object({
  seeds: z.array(z.number().int()),
  common: z.array(z.string()),
  uncappedPeakBySeed: z.array(z.number().positive().nullable()),
});

const SOURCE = '--peaks-from';

export async function earlierPeaks(
  file: string,
  seeds: readonly number[],
  common: readonly string[],
): Promise<number[]> {
  return earlierPeaksOf(file, await readEarlierReport(file), seeds, common);
}

/** The earlier report `file` as JSON, read once for every question asked of it (earlierPeaksOf, arm-catalogs.ts). */
export async function readEarlierReport(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new ValidationError(SOURCE, [`cannot read ${file}: ${e instanceof Error ? e.message : String(e)}`]);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ValidationError(SOURCE, [`${file} is not JSON (an arms.json written by bench arms --out)`]);
  }
}

/** Each seed's uncapped peak in `report` (the JSON of `file`), checked as `earlierPeaks` says. */
export function earlierPeaksOf(
  file: string,
  report: unknown,
  seeds: readonly number[],
  common: readonly string[],
): number[] {
  const parsed = earlierReport.safeParse(report);
  if (!parsed.success)
    throw new ValidationError(
      SOURCE,
      parsed.error.issues.map((i) => `${file}: ${i.path.join('.') || 'the report'}: ${i.message}`),
    );
  const earlier = parsed.data;
  if (earlier.common.join('\u0000') !== common.join('\u0000'))
    throw new ValidationError(SOURCE, [
      `${file} ran --common "${earlier.common.join(' ')}", not "${common.join(' ')}": its peaks are another run's`,
    ]);
  return seeds.map((seed) => {
    const peak = earlier.uncappedPeakBySeed[earlier.seeds.indexOf(seed)];
    if (peak === undefined || peak === null)
      throw new ValidationError(SOURCE, [`${file} has no uncapped peak for seed ${seed}`]);
    return peak;
  });
}
