import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { catalog, rig } from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * `fleetwise submit` given a directory (`submit examples/jobs/`) says it is one and how to name the files in it, not
 * the EISDIR of a read; and `submit --help` names every field `--json` prints, as a real controller's API over a
 * socket answers them. The built CLI in a subprocess.
 */

const ADMIN = 'admin-token-cli-submit-json-help-0123456789abcdef';

let server: ApiServer;
const dir = mkdtempSync(join(tmpdir(), 'fleetwise-submit-json-help-'));

beforeAll(async () => {
  ensureBuiltCli();
  server = await startApiServer(rig({}, { catalog }).controller, {
    listen: '127.0.0.1:0',
    adminToken: ADMIN,
    catalog,
  });
}, 240_000);

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN });
}

describe('submit given a directory', () => {
  // No controller listens here: the directory is refused while the files are read, before anything is sent.
  const env = { ...process.env, FLEETWISE_SERVER: UNREACHABLE_URL, FLEETWISE_TOKEN: 'unused' };

  it('says it is a directory and shows the spec files to give instead, in text and under --json', async () => {
    const text = await runCli(['submit', 'examples/jobs/'], env);
    expect(text.code).toBe(2);
    expect(text.stderr).toBe(
      'fleetwise: invalid input: examples/jobs/\n' +
        '  - is a directory: give spec files (e.g. examples/jobs/*.yaml)\n',
    );
    const json = await runCli(['submit', '--json', 'examples/jobs'], env);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: 'invalid input: examples/jobs',
      details: ['is a directory: give spec files (e.g. examples/jobs/*.yaml)'],
    });
    expect(`${text.stdout}${json.stdout}`).toBe('');
  });
});

describe('submit --help', () => {
  it('names every field submit --json prints, for a job, the jobs of an array and a rerun', async () => {
    const file = join(dir, 'one.yaml');
    writeFileSync(
      file,
      [
        'name: one',
        'team: research',
        'tasks:',
        '  - image: busybox:latest',
        '    demand: { c7i: [0, 1, 2] }',
        '',
      ].join('\n'),
    );
    const printed = new Set<string>();
    const collect = (result: CliResult): void => {
      expect(result.code, result.stderr).toBe(0);
      for (const line of result.stdout.trim().split('\n'))
        for (const key of Object.keys(JSON.parse(line) as object)) printed.add(key);
    };
    collect(await cli(['submit', '--json', file]));
    collect(await cli(['submit', '--json', '--array', '2', file]));
    collect(await cli(['submit', '--json', '--idempotency-key', 'help-rerun', file]));
    collect(await cli(['submit', '--json', '--idempotency-key', 'help-rerun', file]));
    expect([...printed].sort()).toEqual(
      ['array', 'id', 'name', 'replayed', 'state', 'team', 'waitingFor', 'warnings'].sort(),
    );
    const help = await runCli(['submit', '--help']);
    expect(help.code).toBe(0);
    // Commander wraps the description: read it as one line.
    const described = help.stdout.replace(/\s+/g, ' ');
    for (const key of printed) expect(described, key).toContain(`"${key}"`);
  });
});
