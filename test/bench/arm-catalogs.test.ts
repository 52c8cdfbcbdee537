import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { earlierPeaksByCatalog, runCatalog } from '../../src/bench/arm-catalogs.js';
import { readEarlierReport } from '../../src/bench/earlier-peaks.js';
import { BUNDLED_CATALOG_PATH } from '../../src/cloud/catalog-file.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-arm-catalogs-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const DEARER = '/catalogs/dearer.json';
const COMMON = ['--format', 'synthetic', '--jobs', '14', '--scheduler', 'eva'];
/** Seeds 4 and 5 of an earlier report that ran seeds 5, 4 and 6: its reference peaks, in this run's seed order. */
const SEEDS = [4, 5];
const REFERENCE_PEAKS = [40, 50];

/** An earlier arms.json: seeds 5, 4, 6, with `fields` (a report written before catalogs were recorded has none). */
function report(name: string, fields: object): string {
  const path = join(scratch, name);
  writeFileSync(path, JSON.stringify({ seeds: [5, 4, 6], common: COMMON, ...fields }));
  return path;
}

/** `file`'s peaks per catalog for SEEDS, the reference peaks REFERENCE_PEAKS, as bench arms asks for them. */
async function peaksOf(
  file: string,
  common: readonly string[],
  needed: ReadonlyMap<string, readonly string[]>,
  referenceCatalog: string,
): Promise<Map<string, number[]>> {
  return earlierPeaksByCatalog(
    file,
    await readEarlierReport(file),
    SEEDS,
    REFERENCE_PEAKS,
    common,
    needed,
    referenceCatalog,
  );
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (e) {
    return (e as { problems?: string[] }).problems?.join('\n') ?? String(e);
  }
  throw new Error('expected a refusal');
}

describe('an earlier report’s peaks (--peaks-from)', () => {
  const bundled = runCatalog({});

  it('are taken per catalog it measured them on, seed by seed', async () => {
    const file = report('recorded.json', {
      referenceCatalog: bundled,
      uncappedPeakBySeed: [50, 40, 60],
      uncappedPeakByCatalog: { [bundled]: [50, 40, 60], [DEARER]: [100, 80, 120] },
    });
    const needed = new Map([
      [bundled, ['a']],
      [DEARER, ['b']],
    ]);
    const peaks = await peaksOf(file, COMMON, needed, bundled);
    expect(peaks.get(bundled)).toEqual([40, 50]);
    expect(peaks.get(DEARER)).toEqual([80, 100]);
  });

  it('are refused for a catalog it did not measure on every seed, naming the arms that run it', async () => {
    const file = report('partial.json', {
      referenceCatalog: bundled,
      uncappedPeakBySeed: [50, 40, 60],
      uncappedPeakByCatalog: { [bundled]: [50, 40, 60], [DEARER]: [100, null, 120] },
    });
    const needed = new Map([
      [bundled, ['a']],
      [DEARER, ['b', 'c']],
    ]);
    expect(await refusal(peaksOf(file, COMMON, needed, bundled))).toBe(
      `${file} has no uncapped peaks on ${DEARER}, the catalog arms b, c run: leave out --peaks-from to run the ` +
        'uncapped references again (each arm is capped at the share of its own catalog’s uncapped peak)',
    );
  });

  it('are refused for --common flags that now run another catalog than the reference did', async () => {
    const file = report('moved.json', { referenceCatalog: bundled, uncappedPeakBySeed: [50, 40, 60] });
    const needed = new Map([[DEARER, ['a', 'b']]]);
    expect(await refusal(peaksOf(file, COMMON, needed, DEARER))).toBe(
      `${file} measured its peaks on the bundled catalog, but --common now runs ${DEARER}: leave out ` +
        '--peaks-from to run the uncapped references again',
    );
  });

  it('from a report that does not record its catalog, only where its --common flags ran one catalog in every build', async () => {
    const file = report('unrecorded.json', { uncappedPeakBySeed: [50, 40, 60] });
    // The bundled catalog, or the one --catalog names: what every build ran for those flags.
    const onBundled = new Map([[bundled, ['a', 'b']]]);
    expect((await peaksOf(file, COMMON, onBundled, bundled)).get(bundled)).toEqual([40, 50]);
    const flagged = [...COMMON, '--catalog', DEARER];
    const onDearer = new Map([[DEARER, ['a', 'b']]]);
    expect((await peaksOf(file, flagged, onDearer, DEARER)).get(DEARER)).toEqual([40, 50]);
    // Another catalog by a --config: an earlier build ran these flags on the bundled catalog.
    const configured = [...COMMON, '--config', 'fleetwise.yaml'];
    expect(await refusal(peaksOf(file, configured, onDearer, DEARER))).toBe(
      `${file} does not say which catalog its peaks were measured on, and --common runs ${DEARER}: leave out ` +
        '--peaks-from to run the uncapped references again',
    );
  });

  it('name a catalog by its absolute path, the bundled one when none is given', () => {
    expect(runCatalog({})).toBe(BUNDLED_CATALOG_PATH);
    expect(runCatalog({ catalogPath: 'instance-catalogs/aws-us-east-1.json' })).toBe(
      join(process.cwd(), 'instance-catalogs/aws-us-east-1.json'),
    );
  });
});
