import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { earlierPeaks } from '../../src/bench/earlier-peaks.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetwise-peaks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function report(name: string, body: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof body === 'string' ? body : JSON.stringify(body));
  return file;
}

const COMMON = ['--format', 'alibaba', '--jobs', '1500'];
const EARLIER = { seeds: [4, 5, 6], common: COMMON, uncappedPeakBySeed: [700.5, 722.25, null], runs: {} };

describe("an earlier report's uncapped peaks", () => {
  it('gives each seed asked for its peak, in the order asked', async () => {
    await expect(earlierPeaks(report('ok.json', EARLIER), [5, 4], COMMON)).resolves.toEqual([722.25, 700.5]);
  });

  it('refuses, naming the flag and why, what is not the same run', async () => {
    const ok = report('ok2.json', EARLIER);
    await expect(earlierPeaks(ok, [4], ['--format', 'alibaba'])).rejects.toThrow(
      /--peaks-from[\s\S]*ran --common "--format alibaba --jobs 1500", not "--format alibaba"/,
    );
    await expect(earlierPeaks(ok, [7], COMMON)).rejects.toThrow(/has no uncapped peak for seed 7/);
    await expect(earlierPeaks(ok, [6], COMMON)).rejects.toThrow(/has no uncapped peak for seed 6/);
    await expect(earlierPeaks(join(dir, 'missing.json'), [4], COMMON)).rejects.toThrow(
      /cannot read .*missing\.json/,
    );
    await expect(earlierPeaks(report('text.json', 'seed,peak\n'), [4], COMMON)).rejects.toThrow(
      /is not JSON/,
    );
    await expect(
      earlierPeaks(report('bad.json', { ...EARLIER, uncappedPeakBySeed: [-1, 2, 3] }), [4], COMMON),
    ).rejects.toThrow(/uncappedPeakBySeed\.0: /);
  });
});
