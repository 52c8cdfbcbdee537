import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';

/**
 * What a command's process loads before it does anything. Workers and controllers are started often (local mode
 * starts a worker per instance, a restarted controller starts again), and the packages below took them from 0.3 s to
 * 0.75 s (a worker) and from 0.7 s to 2 s (a controller) of CPU each at start, whether or not the run used them: the
 * charts library (for report pages), the Docker client (for the Docker executor), the AWS SDK clients (for S3 stores,
 * the Price List API, the interruption queue and EC2). Each is loaded where it is first used instead.
 *
 * A child process imports the built command modules (`dist/cli/commands/*.js`) with a resolve hook that records
 * every module it loads as an ES module, and reads `require.cache` for those loaded through `require`.
 */

const HEAVY = [
  'echarts',
  'zrender',
  'dockerode',
  '@aws-sdk/client-s3',
  '@aws-sdk/lib-storage',
  '@aws-sdk/client-sqs',
  '@aws-sdk/client-pricing',
  '@aws-sdk/client-ec2',
  // The terminal's log formatter: processes whose log goes to a file or a pipe (every local worker) never use it.
  'pino-pretty',
] as const;

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-startup-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const HOOKS = `
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.LOADED_FILE, resolved.url + '\\n');
  return resolved;
}`;

/**
 * The packages (of HEAVY, plus `zod` as the control that the hook sees anything) the modules load, then, after
 * `afterwards` (a script body run in the child with the modules imported), what that loaded on top.
 */
function loadedPackages(
  modules: readonly string[],
  afterwards = '',
): { atStart: string[]; afterwards: string[] } {
  const loadedFile = join(scratch, `loaded-${modules.join('-').replaceAll('/', '_')}.txt`);
  writeFileSync(loadedFile, '');
  const hooks = join(scratch, 'hooks.mjs');
  writeFileSync(hooks, HOOKS);
  const register = join(scratch, 'register.mjs');
  writeFileSync(
    register,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
  );
  const main = join(scratch, 'main.mjs');
  writeFileSync(
    main,
    `import { createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
const required = () => Object.keys(createRequire(import.meta.url).cache).map((p) => 'file://' + p);
const mark = (label) => appendFileSync(process.env.LOADED_FILE, label + '\\n' + required().join('\\n') + '\\n');
const modules = ${JSON.stringify(modules.map((m) => pathToFileURL(join(PROJECT_ROOT, 'dist', m)).href))};
for (const m of modules) await import(m);
mark('--- afterwards');
${afterwards}
mark('--- end');
`,
  );
  const child = spawnSync(process.execPath, ['--import', pathToFileURL(register).href, main], {
    env: { ...process.env, LOADED_FILE: loadedFile },
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(child.status, child.stderr).toBe(0);
  const lines = readFileSync(loadedFile, 'utf8').split('\n');
  const split = lines.indexOf('--- afterwards');
  const packagesIn = (part: readonly string[]): string[] =>
    [...HEAVY, 'zod'].filter((p) => part.some((url) => url.includes(`/node_modules/${p}/`)));
  const atStart = packagesIn(lines.slice(0, split));
  return {
    atStart,
    afterwards: packagesIn(lines.slice(split)).filter((p) => !atStart.includes(p)),
  };
}

describe('what a command loads at start (child process)', () => {
  beforeAll(() => ensureBuiltCli());

  it('the worker, controller and simulate commands load none of the charts library, the Docker client, the AWS SDK or the terminal log formatter', () => {
    const { atStart } = loadedPackages([
      'cli/commands/worker.js',
      'cli/commands/controller.js',
      'cli/commands/simulate.js',
    ]);
    // The control: the hook and the cache see what the modules load.
    expect(atStart).toContain('zod');
    expect(atStart.filter((p) => p !== 'zod')).toEqual([]);
  });

  it('each is loaded where it is first used: an S3 store, a Docker client, a chart', () => {
    const { afterwards } = loadedPackages(
      ['storage/open-object-store.js', 'worker/executors/docker-engine.js', 'report/chart.js'],
      `const { openObjectStore } = await import(modules[0]);
await openObjectStore('s3://fleetwise-startup-test/prefix', { region: 'us-east-1' });
(await import(modules[1])).dockerFromEnv({});
(await import(modules[2])).renderChartSvg({ id: 'c', title: 't', width: 100, height: 50, option: {} });`,
    );
    expect(afterwards).toEqual(
      expect.arrayContaining(['echarts', 'dockerode', '@aws-sdk/client-s3', '@aws-sdk/lib-storage']),
    );
  });
});
