import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ADMIN_TOKEN, fakeWithTeams, type FakeControllerService } from '../controller/api-fake-service.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * `fleetwise token list` shows one row per token even for a label with a line break or tab, as an older controller
 * stored (the API now refuses them): the built CLI in a subprocess against an API server in this process.
 */
let server: ApiServer;
let service: FakeControllerService;

beforeAll(async () => {
  ensureBuiltCli();
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
}, 240_000);

afterAll(async () => {
  await server?.close();
});

describe('fleetwise token list (CLI subprocess)', () => {
  it('writes a stored label with a line break or tab on its own row, the break shown as \\x0a', async () => {
    const forged = service.store.addTeamToken(
      'forge',
      'forge-token-0123456789abcdef',
      'ci\n000000000000  admin  fake\tcol',
    );
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const key of Object.keys(env)) if (key.startsWith('FLEETWISE_')) delete env[key];
    const listed = await runCli(['token', 'list', '--team', 'forge'], {
      ...env,
      FLEETWISE_SERVER: server.url,
      FLEETWISE_TOKEN: ADMIN_TOKEN,
    });
    expect(listed.code, listed.stderr).toBe(0);
    const rows = listed.stdout.trimEnd().split('\n');
    expect(rows).toHaveLength(2); // the header and the one token
    expect(rows[1]).toContain(forged.hashPrefix);
    expect(rows[1]).toContain('ci\\x0a000000000000  admin  fake\\x09col');
  });
});
