import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { registerCluster } from '../../src/cli/commands/cluster.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { OPENAPI_DOCUMENT } from '../../src/controller/api/openapi.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, jobSpec } from '../controller/controller-fixtures.js';

/**
 * An instance whose launch EC2 (moto) refuses, as `fleetwise cluster` shows it: a line under its row, the error in
 * --json and in /v1/cluster as the OpenAPI document describes it; a team token reads it without EC2's message. The
 * commands run in-process against the controller's API on a socket.
 */

const ADMIN = 'admin-token-launch-error-0123456789abcdef';
const TEAM = 'research-token-launch-error-0123456789ab';
const MISSING_GROUP = 'sg-0fedcba9876543210';

interface LaunchErrorJson {
  readonly message?: string;
  readonly code?: string;
  readonly attempts: number;
  readonly atSeconds: number;
  readonly nextAttemptAtSeconds: number;
  readonly permanent: boolean;
}

interface ClusterJson {
  readonly instances: readonly { readonly id: string; readonly launchError?: LaunchErrorJson }[];
}

describeWithMoto('a refused launch in the cluster view', (moto) => {
  const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-launch-error-view-'));
  let store: SqliteStateStore;
  let server: ApiServer;

  /** `fleetwise cluster …` as a user runs it, against the API's socket, capturing what it prints. */
  async function cluster(args: readonly string[], token: string): Promise<string> {
    const program = new Command('fleetwise').exitOverride();
    registerCluster(program);
    let stdout = '';
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stdout += String(chunk);
      return true;
    });
    try {
      await program.parseAsync([
        'node',
        'fleetwise',
        'cluster',
        ...args,
        '--server',
        server.url,
        '--token',
        token,
      ]);
    } finally {
      spy.mockRestore();
    }
    return stdout;
  }

  beforeAll(async () => {
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    store = new SqliteStateStore(join(scratch, 'state.db'), { nowSeconds: () => clock.nowSeconds() });
    store.addTeamToken('research', TEAM, 'test');
    const provider = new Ec2Provider(
      {
        region: 'us-east-1',
        amiId: 'ami-12c6146b',
        placements: [{ availabilityZone: 'us-east-1a' }],
        securityGroupIds: [MISSING_GROUP],
        throttling: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
      },
      { api: ec2ApiFromClient(createEc2Client(moto.clientOptions)), sleep: async () => {} },
    );
    const controller = new Controller({
      store,
      catalog,
      provider,
      clock,
      settings: { ...BASE_SETTINGS, clusterName: 'launch-error-view' },
    });
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.recover();
    await controller.runRound('submitted');
    server = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    store?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('`fleetwise cluster` prints the refusal under the instance it keeps from launching', async () => {
    const lines = (await cluster([], ADMIN)).split('\n');
    const row = lines.findIndex((l) => /^inst-1\s+-\s+c7i\.xlarge\s+requested\s/.test(l));
    expect(row, lines.join('\n')).toBeGreaterThan(0);
    expect(lines[row + 1]).toMatch(
      /^ {2}launch failed once \(InvalidGroup\.NotFound: refused until its cause is fixed\), last at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ, next try in [45]m\d\ds: /,
    );
    expect(lines[row + 1]).toContain(`The security group '${MISSING_GROUP}' does not exist`);
  });

  it('`fleetwise cluster --json` and /v1/cluster carry it as documented; a team reads it without the message', async () => {
    const admin = JSON.parse(await cluster(['--json'], ADMIN)) as ClusterJson;
    const error = admin.instances.find((i) => i.id === 'inst-1')?.launchError;
    expect(error).toMatchObject({ code: 'InvalidGroup.NotFound', permanent: true, attempts: 1 });
    expect(error?.message).toContain(MISSING_GROUP);
    expect((error?.nextAttemptAtSeconds ?? 0) - (error?.atSeconds ?? 0)).toBe(300);

    const team = JSON.parse(await cluster(['--json'], TEAM)) as ClusterJson;
    const { message: _message, ...withoutMessage } = error as LaunchErrorJson;
    expect(team.instances.find((i) => i.id === 'inst-1')?.launchError).toEqual(withoutMessage);

    // Every field the API answers is one the document names, with the type it gives.
    const response = await fetch(`${server.url}/v1/cluster`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const answered = ((await response.json()) as ClusterJson).instances[0]?.launchError as LaunchErrorJson;
    const cluster_ = OPENAPI_DOCUMENT.components.schemas['Cluster'] as {
      properties: { instances: { items: { allOf: { properties?: Record<string, unknown> }[] } } };
    };
    const documented = cluster_.properties.instances.items.allOf.find((p) => p.properties?.['launchError'])
      ?.properties?.['launchError'] as {
      required: string[];
      properties: Record<string, { type: string }>;
    };
    expect(Object.keys(answered).every((k) => k in documented.properties)).toBe(true);
    for (const name of documented.required) expect(answered).toHaveProperty(name);
    for (const [name, value] of Object.entries(answered))
      expect(documented.properties[name]?.type, name).toBe(
        Number.isInteger(value) && documented.properties[name]?.type === 'integer' ? 'integer' : typeof value,
      );
  });
});
