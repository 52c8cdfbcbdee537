import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';

/**
 * `npx fleetwise …` in the checkout runs the package's `prepare` as an exec: with a build there, it must not rebuild
 * dist/ under a controller running from it.
 */
it('prepare run by npx (an exec) leaves an existing build alone', () => {
  ensureBuiltCli();
  const main = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
  const before = statSync(main).mtimeMs;
  const run = spawnSync(process.execPath, [join(PROJECT_ROOT, 'scripts', 'prepare.mjs')], {
    env: { ...process.env, npm_command: 'exec' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  expect(run.status).toBe(0);
  expect(run.stdout).toBe('');
  expect(statSync(main).mtimeMs).toBe(before);
});
