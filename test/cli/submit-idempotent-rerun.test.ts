import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { catalog, rig, type Rig } from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise submit --idempotency-key K` run again (a script rerun after a crash) against a real controller's API over
 * a socket, once a dependency of its files has ended unsuccessfully: the dry runs refuse the files now, yet the rerun
 * answers the jobs the first run made, while a first run with a new key still submits nothing.
 */

const ADMIN = 'admin-token-cli-submit-rerun-0123456789abcdef';

let r: Rig;
let server: ApiServer;
let dir = '';

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN });
}

function spec(name: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    [
      `name: ${name}`,
      'team: research',
      'tasks:',
      '  - image: busybox:latest',
      '    demand: { c7i: [0, 1, 2] }',
      '',
    ].join('\n'),
  );
  return file;
}

const jobCount = (): number => r.store.listJobs().length;

beforeAll(async () => {
  ensureBuiltCli();
  r = rig({}, { catalog });
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  dir = mkdtempSync(join(tmpdir(), 'fleetwise-submit-rerun-'));
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

/** Job ids from `submit --json` output, one line per job. */
const idsOf = (out: CliResult): string[] =>
  out.stdout
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { id: string }).id);

it('answers the jobs a keyed run made after their dependency failed, and submits nothing on a first run', async () => {
  const upstream = await cli(['submit', spec('upstream'), '--json']);
  expect(upstream.code, upstream.stderr).toBe(0);
  const [dependency] = idsOf(upstream);
  const files = [spec('first'), spec('second')];
  const asSubmitted = (key: string, ...more: string[]): Promise<CliResult> =>
    cli(['submit', ...files, '--depends-on', dependency ?? '', '--idempotency-key', key, ...more]);
  const made = await asSubmitted('nightly/1', '--json');
  const chain = await asSubmitted('nightly/chain', '--chain', '--json');
  expect([made.code, chain.code], made.stderr + chain.stderr).toEqual([0, 0]);
  r.controller.cancel(dependency ?? '');
  const count = jobCount();

  const rerun = await asSubmitted('nightly/1');
  expect(rerun.code, rerun.stderr).toBe(0);
  const [first, second] = idsOf(made);
  expect(rerun.stdout).toContain(
    `submitted before with this idempotency key: ${first} (first, team research)`,
  );
  expect(rerun.stdout).toContain(
    `submitted before with this idempotency key: ${second} (second, team research)`,
  );
  // A chain's later step is sent as the first run sent it: waiting for the step before it, answered the same way.
  const chainRerun = await asSubmitted('nightly/chain', '--chain', '--json');
  expect(chainRerun.code, chainRerun.stderr).toBe(0);
  expect(idsOf(chainRerun)).toEqual(idsOf(chain));
  expect(
    chainRerun.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { replayed?: boolean }).replayed),
  ).toEqual([true, true]);
  expect(jobCount()).toBe(count);

  // A new key, or a file the first run did not make (its key is new): refused as the dry run refused it, none made.
  const fresh = await asSubmitted('nightly/2');
  expect(fresh.code, fresh.stderr).toBe(2);
  expect(fresh.stderr).toContain(`dependsOn: ${dependency} ended cancelled`);
  const third = spec('third');
  const added = await cli([
    'submit',
    ...files,
    third,
    '--depends-on',
    dependency ?? '',
    '--idempotency-key',
    'nightly/1',
  ]);
  expect(added.code, added.stderr).toBe(2);
  expect(added.stderr).toContain(`${third}: `);
  expect(added.stderr).not.toContain('already submitted');
  expect(jobCount()).toBe(count);
}, 60_000);
