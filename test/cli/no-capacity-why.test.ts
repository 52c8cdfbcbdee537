import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EC2ServiceException } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { OPENAPI_DOCUMENT } from '../../src/controller/api/openapi.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import { readNoCapacity } from '../../src/controller/no-capacity-records.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { NO_CAPACITY } from '../../src/round/capacity-holds.js';
import { hosts } from '../../src/round/replacement.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, jobSpec } from '../controller/controller-fixtures.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { describeWithMoto } from '../helpers/moto.js';

/**
 * EC2 (moto) refusing every launch for capacity, on a cluster with nothing else to plan: the round that holds the
 * jobs records no decision, and the job views say what it kept them waiting for all the same. `fleetwise why` and
 * `fleetwise job` (the built CLI in a subprocess) and their API answers name the refused types and the end of the
 * capacity-error window; the queue place of a job that walked every type no longer says it was admitted.
 */

const ADMIN = 'admin-token-no-capacity-why-0123456789ab';

/** The moto-backed API, every RunInstances refused for capacity. */
function refusingApi(real: Ec2Api): Ec2Api {
  return {
    runInstances: async () => {
      throw new EC2ServiceException({
        name: 'InsufficientInstanceCapacity',
        $fault: 'server',
        $metadata: { httpStatusCode: 500 },
        message: 'We currently do not have sufficient capacity in the Availability Zone you requested.',
      });
    },
    describeInstances: (input) => real.describeInstances(input),
    terminateInstances: (input) => real.terminateInstances(input),
    describeInstanceTypes: (input) => real.describeInstanceTypes(input),
    createPlacementGroup: (input) => real.createPlacementGroup(input),
    describePlacementGroups: (input) => real.describePlacementGroups(input),
    deletePlacementGroup: (input) => real.deletePlacementGroup(input),
  };
}

/** The catalog's types that can host a CPU_SMALL task, cheapest first (as a capacity wait names them). */
const CPU_TYPES = catalog.types
  .filter((t) => hosts(t, [CPU_SMALL]))
  .sort((a, b) => a.costPerHour - b.costPerHour)
  .map((t) => t.name);

interface LatestWaitJson {
  readonly summary: string;
  readonly cap: string;
  readonly capName?: string;
  readonly recorded: boolean;
}

interface QueueJson {
  readonly status: string;
  readonly reason: string | null;
  readonly detail: string;
}

describeWithMoto('a job held for capacity on an otherwise idle cluster', (moto) => {
  const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-no-capacity-why-'));
  let store: SqliteStateStore;
  let server: ApiServer;
  /** Walked every type in a round that planned it, then held. */
  let walked: string;
  /** Submitted while the window was open: held from its first round, never launched. */
  let held: string;
  /** What a wait names: the refused types, then when the capacity-error window ends. */
  let waitText: RegExp;

  function cli(args: readonly string[]): Promise<CliResult> {
    return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN });
  }

  async function get(path: string): Promise<Record<string, unknown>> {
    const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(response.status, path).toBe(200);
    return (await response.json()) as Record<string, unknown>;
  }

  beforeAll(async () => {
    ensureBuiltCli();
    expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    store = new SqliteStateStore(join(scratch, 'state.db'), { nowSeconds: () => clock.nowSeconds() });
    const provider = new Ec2Provider(
      {
        region: 'us-east-1',
        amiId: 'ami-12c6146b',
        placements: [{ availabilityZone: 'us-east-1a' }],
        throttling: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
      },
      // The capacity-error cache on the test's clock.
      {
        api: refusingApi(ec2ApiFromClient(createEc2Client(moto.clientOptions))),
        sleep: async () => {},
        nowMs: () => clock.nowSeconds() * 1000,
      },
    );
    const controller = new Controller({
      store,
      catalog,
      provider,
      clock,
      settings: { ...BASE_SETTINGS, clusterName: 'no-capacity-why' },
    });
    walked = controller.submit(jobSpec('walked', CPU_SMALL), 'research').id;
    await controller.recover();
    // Planned, launched on every type that fits, refused on each: back in the queue.
    const first = await controller.runRound('submitted');
    expect(first.round).toBeDefined();
    expect(store.getJob(walked)?.reason).toMatch(/^no capacity: /);
    clock.advance(30);
    held = controller.submit(jobSpec('held', CPU_SMALL), 'research').id;
    // Both held until the window ends: nothing else to plan, so no round is recorded.
    const idle = await controller.runRound('held submitted');
    expect(idle.round).toBeUndefined();
    expect(store.latestRound()?.round).toBe(first.round);
    expect(controller.latestWaiting().map((w) => [w.jobId, w.capName])).toEqual([
      [walked, NO_CAPACITY],
      [held, NO_CAPACITY],
    ]);
    const until = Math.max(...readNoCapacity(store, clock.nowSeconds()).map((o) => o.untilSeconds));
    const iso = new Date(until * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const named = CPU_TYPES.slice(0, 4).map((t) => t.replace('.', '\\.'));
    waitText = new RegExp(
      `the cloud refused every instance type that fits it \\(${named.join(', ')}.*\\) until ${iso}`,
    );
    server = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    store?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('`fleetwise why` of a job never launched says the latest round held it for capacity, with the types and the end', async () => {
    const out = await cli(['why', held]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const lines = out.stdout.split('\n');
    expect(lines[0]).toBe(`${held}: queued`);
    expect(lines[1]).toMatch(
      /^no recorded round decided about it yet; the latest round \(nothing else to plan, so not recorded\): kept waiting: in the queue for capacity: /,
    );
    expect(lines[1]).toMatch(waitText);
    expect(out.stdout).not.toContain('no scheduling decision mentions this job');
  });

  it('`fleetwise why` of a job that walked every type leads with the wait, newer than the round that placed it', async () => {
    const out = await cli(['why', walked]);
    expect(out.code).toBe(0);
    const lines = out.stdout.split('\n');
    expect(lines[1]).toMatch(/^the latest round \(nothing else to plan, so not recorded\): kept waiting: /);
    expect(lines[1]).toMatch(waitText);
    // The recorded round that placed it follows, as it was.
    expect(lines[2]).toMatch(/^round \d+ at .*: placed on /);
  });

  it('GET /v1/jobs/{id}/why and `why --json` carry the latest wait, as the OpenAPI document describes it', async () => {
    const answer = await get(`/v1/jobs/${held}/why`);
    expect(answer['records']).toEqual([]);
    const wait = answer['latestWait'] as LatestWaitJson;
    expect(wait).toMatchObject({ capName: NO_CAPACITY, recorded: false });
    expect(wait.summary).toMatch(waitText);
    expect(wait.cap).toMatch(waitText);
    const json = await cli(['why', held, '--json']);
    expect((JSON.parse(json.stdout) as { latestWait: LatestWaitJson }).latestWait).toEqual(wait);

    // Every field answered is one the document names, with the type it gives.
    const paths = OPENAPI_DOCUMENT.paths as unknown as Record<string, Record<string, unknown>>;
    for (const [path, id] of [
      ['/v1/jobs/{id}/why', held],
      ['/v1/jobs/{id}', walked],
    ] as const) {
      const operation = paths[path]?.['get'] as {
        responses: {
          '200': { content: { 'application/json': { schema: { allOf?: Record<string, unknown>[] } } } };
        };
      };
      const parts = operation.responses['200'].content['application/json'].schema.allOf ?? [];
      const documented = parts
        .map((p) => (p['properties'] as Record<string, unknown> | undefined)?.['latestWait'])
        .find((p) => p !== undefined) as { required: string[]; properties: Record<string, { type: string }> };
      expect(documented, path).toBeDefined();
      const answered = (await get(path.replace('{id}', id)))['latestWait'] as Record<string, unknown>;
      for (const name of documented.required) expect(answered, path).toHaveProperty(name);
      for (const [name, value] of Object.entries(answered))
        expect(documented.properties[name]?.type, `${path} ${name}`).toBe(
          Array.isArray(value) ? 'array' : typeof value,
        );
    }
  });

  it('`fleetwise job` gives the wait of a job never launched, and no longer says a walked job was admitted', async () => {
    const never = await cli(['job', held]);
    expect(never.code).toBe(0);
    const heldQueue = never.stdout.split('\n').find((l) => l.startsWith('queue '));
    expect(heldQueue).toMatch(/^queue {6}waiting: in the queue for capacity: /);
    expect(heldQueue).toMatch(waitText);

    const out = await cli(['job', walked]);
    expect(out.code).toBe(0);
    const queue = out.stdout.split('\n').find((l) => l.startsWith('queue '));
    expect(queue).toMatch(/^queue {6}class \S+, waiting: in the queue for capacity: /);
    expect(queue).toMatch(waitText);
    expect(out.stdout).not.toContain('admitted');

    const document = await get(`/v1/jobs/${walked}`);
    expect(document['queue']).toMatchObject({ status: 'waiting', reason: null, position: null });
    expect((document['queue'] as QueueJson).detail).toMatch(waitText);
    expect(document['latestWait']).toMatchObject({ capName: NO_CAPACITY, recorded: false });
  });

  it('the QUEUE column of `fleetwise jobs` and the listing do not say admitted for a job held for capacity', async () => {
    const listing = (await get('/v1/jobs'))['jobs'] as { id: string; queue: QueueJson | null }[];
    expect(listing.find((j) => j.id === walked)?.queue).toMatchObject({ status: 'waiting', reason: null });
    const out = await cli(['jobs']);
    expect(out.code).toBe(0);
    const row = out.stdout.split('\n').find((l) => l.startsWith(`${walked} `));
    expect(row).toBeDefined();
    expect(row).not.toContain('admitted');
    expect(row).toMatch(/ \S+ \(waiting\) /);
  });
});
