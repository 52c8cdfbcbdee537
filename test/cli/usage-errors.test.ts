import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * Bad input to the CLI, however it is bad (commander's usage errors, a flag's value, a file a flag names), exits 2
 * and names the flag: a script can tell it from a failure of the work itself (exit 1).
 */

beforeAll(() => ensureBuiltCli(['cli/main.ts']));

describe('usage errors (built CLI)', () => {
  it('exits 2 on an unknown option or a missing one, 0 on help', async () => {
    const unknown = await runCli(['simulate', '--format', 'eva', '--scheduler', 'eva', '--bogus']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown option '--bogus'/);
    const missing = await runCli(['simulate', '--format', 'eva']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/required option '--scheduler <names>' not specified/);
    expect((await runCli(['simulate', '--help'])).code).toBe(0);
  });

  it('names the flag of a bad value or file in the benchmarks', async () => {
    const repeats = await runCli(['bench', 'scheduler', '--tasks', '10', '--repeats', 'abc']);
    expect(repeats.code).toBe(2);
    expect(repeats.stderr).toMatch(/--repeats: must be a number/);
    const trace = await runCli(['bench', 'scheduler', '--tasks', '10', '--trace', '/no/such/pods.csv']);
    expect(trace.code).toBe(2);
    expect(trace.stderr).toMatch(
      /invalid input: --trace\n {2}- cannot read the Alibaba pod list \/no\/such\/pods\.csv/,
    );
  });
});

describe('bad input named by its flag, exit 2 (built CLI)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-usage-'));
  const file = join(scratch, 'a-file');
  writeFileSync(file, 'not a directory');
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('a misspelled required flag is the unknown option, with its did-you-mean', async () => {
    const typo = await runCli(['simulate', '--format', 'eva', '--schedular', 'eva']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/unknown option '--schedular'\n\(Did you mean --scheduler\?\)/);
    const help = await runCli(['simulate', '--help']);
    const flat = help.stdout.replace(/\s+/g, ' ');
    expect(flat.slice(flat.indexOf('--scheduler <names>')).split(' --')[0]).toMatch(/\(required\)$/);
  });

  it('a file given for a directory: down --state-dir, worker --work-dir, report --from', async () => {
    const down = await runCli(['down', '--state-dir', file]);
    expect([down.code, down.stderr]).toEqual([
      2,
      `fleetwise: invalid input: --state-dir\n  - ${file} is not a controller's state directory (not a directory): ` +
        'give the directory the controller was started with\n',
    ]);
    const worker = await runCli(
      ['worker', '--controller', UNREACHABLE_URL, '--instance-id', 'i-1', '--work-dir', file],
      { ...process.env, FLEETWISE_WORKER_TOKEN: 'worker-token-0123456789' },
    );
    expect(worker.code).toBe(2);
    expect(worker.stderr).toMatch(
      /^fleetwise: invalid input: --work-dir\n {2}- .* is a file, or a path through one/,
    );
    const report = await runCli(['report', '--from', join(scratch, 'missing')]);
    expect([report.code, report.stderr]).toEqual([
      2,
      `fleetwise: invalid input: --from\n  - ${join(scratch, 'missing')} does not exist\n`,
    ]);
  });
});
