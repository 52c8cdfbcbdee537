import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

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
