/**
 * `fleetwise report --from DIR` through the real CLI: a directory that is not there (a typo) or a file fails instead
 * of reading as a store with no reports, and the months stored there are listed whether or not rolling reports are.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildReportDocument,
  writeMonthlyReportFiles,
  writeReportFiles,
} from '../../src/controller/reports.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-report-from-'));

beforeAll(() => ensureBuiltCli());
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function report(generatedAtSeconds: number): ReturnType<typeof buildReportDocument> {
  return buildReportDocument({
    cluster: 'bars',
    reason: 'hourly',
    report: {
      generatedAtSeconds,
      sinceSeconds: 0,
      totalCost: 1.5,
      byJob: [],
      byTeam: [],
      byInstance: [],
      idleCost: 1.5,
      migrationOverheadCost: 0,
      costPerHourNow: 0,
    },
    instances: [],
  });
}

describe('report --from a directory', () => {
  it('fails with exit 2 (bad input), naming --from and the path, when the directory does not exist or is a file', async () => {
    const missing = join(scratch, 'no-such-bucket');
    for (const args of [[], ['--month', '2023-10']]) {
      const result = await runCli(['report', '--from', missing, ...args]);
      expect([result.code, result.stdout]).toEqual([2, '']);
      expect(result.stderr).toBe(`fleetwise: invalid input: --from\n  - ${missing} does not exist\n`);
    }
    const json = await runCli(['report', '--from', missing, '--json']);
    expect([json.code, json.stdout]).toEqual([2, '']);
    expect(JSON.parse(json.stderr)).toMatchObject({
      error: 'invalid input: --from',
      details: [`${missing} does not exist`],
    });
    const file = join(scratch, 'a-file');
    writeFileSync(file, 'not a store');
    const onFile = await runCli(['report', '--from', file]);
    expect(onFile.code).toBe(2);
    expect(onFile.stderr).toBe(
      `fleetwise: invalid input: --from\n  - ${file} is not a directory (give the controller's objectStore: a ` +
        'directory or s3://bucket/prefix)\n',
    );
    // A directory with nothing in it yet is a store with no reports.
    const empty = join(scratch, 'empty');
    mkdirSync(empty);
    const none = await runCli(['report', '--from', empty]);
    expect([none.code, none.stdout]).toEqual([0, `no reports under reports/ in ${empty}\n`]);
  });

  it('lists the stored months when there is no rolling report to list, with --since too', async () => {
    const dir = join(scratch, 'months-only');
    const store = new FsObjectStore(dir);
    await writeMonthlyReportFiles(store, report(1_698_796_800), '2023-10');
    await writeMonthlyReportFiles(store, report(1_701_388_800), '2023-11');
    const monthsOnly = await runCli(['report', '--from', dir]);
    expect([monthsOnly.code, monthsOnly.stdout]).toEqual([
      0,
      `no reports under reports/ in ${dir}\nmonths: 2023-10, 2023-11 (--month YYYY-MM prints one)\n`,
    ]);
    await writeReportFiles(store, report(1_700_000_000));
    const since = await runCli([
      'report',
      '--from',
      dir,
      '--since',
      String(Math.ceil(Date.now() / 1000) + 3600),
    ]);
    expect([since.code, since.stdout]).toEqual([
      0,
      `no reports under reports/ in ${dir} since then\nmonths: 2023-10, 2023-11 (--month YYYY-MM prints one)\n`,
    ]);
    const listed = await runCli(['report', '--from', dir]);
    expect(listed.stdout).toContain('\nmonths: 2023-10, 2023-11 (--month YYYY-MM prints one)\n');
  });
});
