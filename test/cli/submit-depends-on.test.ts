import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * `fleetwise submit --depends-on` takes one value each time (ids separated by commas, the flag repeatable), so the
 * files after it stay files; its ids are checked before anything is sent (no controller is needed to see it).
 */

const spec = join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml');
beforeAll(() => ensureBuiltCli(['cli/main.ts']));

it('keeps the file after --depends-on a file, and checks every id it was given', async () => {
  const once = await runCli(['submit', '--depends-on', 'job-3,first', spec]);
  expect(once.code).toBe(2);
  expect(once.stderr).not.toMatch(/missing required argument/);
  expect(once.stderr).toMatch(/invalid input: --depends-on\n {2}- "first": not a job id/);
  const repeated = await runCli(['submit', '--depends-on', 'job-3', '--depends-on', 'second', spec]);
  expect(repeated.code).toBe(2);
  expect(repeated.stderr).toMatch(/"second": not a job id/);
});
