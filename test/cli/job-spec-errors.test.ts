import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  VISION_TOKEN,
  type FakeControllerService,
} from '../controller/api-fake-service.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * Job-spec mistakes people make, as `fleetwise submit` reports them (the CLI in a subprocess, against an API server
 * over a real socket): durations written with a unit, memory written in MiB, a flat spec without `tasks`.
 */

let server: ApiServer;
let service: FakeControllerService;
let dir = '';

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: VISION_TOKEN });
}

function specFile(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

beforeAll(async () => {
  ensureBuiltCli();
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  dir = mkdtempSync(join(tmpdir(), 'fleetwise-spec-errors-'));
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('fleetwise submit: job-spec errors that say what to write', () => {
  it('accepts durations such as 30m and 1h30m in …Seconds fields and stores seconds', async () => {
    const file = specFile(
      'durations.yaml',
      [
        'name: durations',
        'team: vision',
        'expectedDurationSeconds: 30m',
        'noMoveSeconds: 1h30m',
        'checkpoint: { timeoutSeconds: 90s, everySeconds: 600 }',
        'tasks:',
        '  - image: python:3.12-slim',
        '    demand: { any: [0, 1, 2] }',
        '',
      ].join('\n'),
    );
    const result = await cli(['submit', file, '--json']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const { id } = JSON.parse(result.stdout) as { id: string };
    const job = service.store.getJob(id);
    expect(job?.spec).toMatchObject({
      expectedDurationSeconds: 1800,
      noMoveSeconds: 5400,
      checkpoint: { timeoutSeconds: 90, everySeconds: 600 },
    });
  });

  it('says how to write a duration it cannot read', async () => {
    const file = specFile(
      'bad-duration.yaml',
      [
        'name: bad-duration',
        'team: vision',
        'expectedDurationSeconds: 30 minutes',
        'tasks:',
        '  - image: python:3.12-slim',
        '    demand: { any: [0, 1, 2] }',
        '',
      ].join('\n'),
    );
    const result = await cli(['submit', file]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'expectedDurationSeconds: expected seconds or a duration such as 90s, 30m, 2h, 1d or 1h30m, got "30 minutes" (line 3)',
    );
  });

  it('hints that memory is in GiB when a value looks like MiB', async () => {
    const file = specFile(
      'mib.yaml',
      [
        'name: mib',
        'team: vision',
        'tasks:',
        '  - image: python:3.12-slim',
        '    demand: { any: [0, 1, 16384] }',
        '',
      ].join('\n'),
    );
    const result = await cli(['submit', file]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /tasks\.0\.demand: no instance type .*; memory is in GiB: 16384 looks like MiB, which would be 16 GiB \(line 5\)/,
    );
  });

  it('points task fields of a flat spec at tasks[]', async () => {
    const file = specFile(
      'flat.yaml',
      [
        'name: flat',
        'team: vision',
        'image: python:3.12-slim',
        'demand: { any: [0, 1, 2] }',
        'workload: flat',
        '',
      ].join('\n'),
    );
    const result = await cli(['submit', file]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("tasks: required: the job's list of tasks, e.g. tasks: [{image: …");
    expect(result.stderr).toContain('image: a field of a task: put it under tasks[] (line 3)');
    expect(result.stderr).toContain('demand: a field of a task: put it under tasks[] (line 4)');
    // `workload` is a job field too: not reported.
    expect(result.stderr).not.toContain('workload:');
  });
});
