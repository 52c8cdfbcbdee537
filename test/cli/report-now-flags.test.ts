import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ADMIN_TOKEN, fakeWithTeams, type FakeControllerService } from '../controller/api-fake-service.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise report --now` has the controller write the whole history's report: a period (--month, --since,
 * --until) or a store to read (--from) beside it contradicts it, and is refused as bad input (exit 2) naming the
 * flags, before the controller is asked for anything. The CLI runs as users run it, in a subprocess, against an API
 * server on a real socket.
 */
let server: ApiServer;
let service: FakeControllerService;
let storeDir = '';

function cli(args: readonly string[]): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    FLEETWISE_SERVER: server.url,
    FLEETWISE_TOKEN: ADMIN_TOKEN,
  };
  return runCli(args, env);
}

beforeAll(async () => {
  ensureBuiltCli();
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  storeDir = mkdtempSync(join(tmpdir(), 'fleetwise-report-now-'));
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (storeDir !== '') rmSync(storeDir, { recursive: true, force: true });
});

describe('report --now with flags it cannot honour', () => {
  it('refuses a period beside it, naming the flags, and writes nothing', async () => {
    for (const [args, named] of [
      [['--month', '2026-11'], '--month'],
      [['--since', '7d'], '--since'],
      [['--until', '2026-11-01T00:00:00Z'], '--until'],
      [['--since', '2026-10-01T00:00:00Z', '--until', '2026-11-01T00:00:00Z'], '--since and --until'],
    ] as const) {
      const refused = await cli(['report', '--now', ...args]);
      const what = args.join(' ');
      expect(refused.code, what).toBe(2);
      expect(refused.stdout, what).toBe('');
      expect(refused.stderr, what).toBe(
        "fleetwise: invalid input: --now\n  - writes the whole history's report, not a period: " +
          `leave out ${named}\n`,
      );
    }
    expect(service.reportsWritten).toBe(0);
  });

  it('refuses --from beside it, rather than listing the stored reports', async () => {
    const refused = await cli(['report', '--from', storeDir, '--now']);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      'fleetwise: invalid input: --now\n  - asks the controller to write a report: leave out --from\n',
    );
    // As JSON too, for scripts.
    const json = await cli(['report', '--from', storeDir, '--now', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: 'invalid input: --now',
      details: ['asks the controller to write a report: leave out --from'],
    });
    expect(service.reportsWritten).toBe(0);
  });

  it('alone, has the controller write its report', async () => {
    const written = await cli(['report', '--now']);
    expect(written.stderr).toBe('');
    expect(written.code).toBe(0);
    expect(written.stdout).toBe('wrote memory://reports/1.json\n');
    expect(service.reportsWritten).toBe(1);
  });
});
