import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  VISION_TOKEN,
  type FakeControllerService,
} from '../controller/api-fake-service.js';
import { CPU_SMALL, jobSpec } from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * A team token naming another team in a filter (`jobs --team`, `cancel --all --team`) is refused with the
 * controller's reason, never told that the other team has no jobs: the built CLI in a subprocess against an API
 * server in this process, where team nlp has a job not yet ended.
 */
let server: ApiServer;
let service: FakeControllerService;
let nlpJob = '';

function cli(args: readonly string[], token: string): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith('FLEETWISE_')) delete env[key];
  return runCli(args, { ...env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: token });
}

const REFUSAL = 'this token is for team vision: it sees that team\'s jobs only, not those of team "nlp"';

beforeAll(async () => {
  ensureBuiltCli();
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  nlpJob = service.submit(jobSpec('nlp-train', CPU_SMALL), 'nlp').id;
}, 240_000);

afterAll(async () => {
  await server?.close();
});

describe('a team filter naming another team (CLI subprocess)', () => {
  it('cancel --all --team is refused with the reason, and cancels nothing', async () => {
    const refused = await cli(['cancel', '--all', '--team', 'nlp', '--yes'], VISION_TOKEN);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain(`the controller answered 403: ${REFUSAL}`);
    expect(service.store.getJob(nlpJob)?.state).toBe('queued');
  });

  it('jobs --team is refused with the reason; the own team and the admin are answered', async () => {
    const refused = await cli(['jobs', '--team', 'nlp', '--json'], VISION_TOKEN);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stderr)).toMatchObject({ status: 403, reason: REFUSAL });
    const own = await cli(['jobs', '--team', 'vision', '--json'], VISION_TOKEN);
    expect(own.code, own.stderr).toBe(0);
    expect(JSON.parse(own.stdout)).toEqual([]);
    const admin = await cli(['jobs', '--team', 'nlp', '--json'], ADMIN_TOKEN);
    expect(admin.code, admin.stderr).toBe(0);
    expect((JSON.parse(admin.stdout) as { id: string }[]).map((j) => j.id)).toEqual([nlpJob]);
  });
});
