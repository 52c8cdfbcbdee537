import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EC2ServiceException } from '@aws-sdk/client-ec2';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { NO_CAPACITY } from '../../src/round/capacity-holds.js';
import { hosts } from '../../src/round/replacement.js';
import { describeWithMoto } from '../helpers/moto.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, jobSpec } from './controller-fixtures.js';

/**
 * Against moto, with EC2 answering every RunInstances with InsufficientInstanceCapacity: one walk over the fitting
 * types per capacity-error window, the jobs waiting in the queue between, however many rounds come meanwhile.
 */

const AMI = 'ami-12c6146b';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-no-capacity-moto-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The moto-backed API, every RunInstances refused for capacity (the types asked for are logged). */
function noCapacityApi(real: Ec2Api): Ec2Api & { runs: string[] } {
  const runs: string[] = [];
  return {
    runs,
    runInstances: async (input) => {
      runs.push(String(input.InstanceType));
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

const CPU_TYPES = catalog.types.filter((t) => hosts(t, [CPU_SMALL]));

/**
 * On demand, or on spot in a cluster one of whose zones has no spot pool of the types (us-east-1d): a spot launch is
 * refused once every zone the plan could buy it in on spot (us-east-1a) and then every zone on demand refused it.
 */
const CASES = [
  { market: 'on-demand', zones: ['us-east-1a', 'us-east-1b'], calls: 2 },
  { market: 'spot', zones: ['us-east-1a', 'us-east-1d'], calls: 3 },
] as const;

describeWithMoto('no capacity for any fitting type, against moto', (moto) => {
  it.each(CASES)(
    'walks the fitting types once per window ($market); the rounds between keep the jobs waiting',
    async (c) => {
      const clock = new ManualClock(Math.floor(Date.now() / 1000));
      const api = noCapacityApi(ec2ApiFromClient(createEc2Client(moto.clientOptions)));
      const store = new SqliteStateStore(join(scratch, `${c.market}.db`), {
        nowSeconds: () => clock.nowSeconds(),
        synchronous: 'normal',
      });
      const provider = new Ec2Provider(
        {
          region: 'us-east-1',
          amiId: AMI,
          placements: c.zones.map((availabilityZone) => ({ availabilityZone })),
          throttling: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
        },
        // The capacity-error cache on the test's clock.
        { api, sleep: async () => {}, nowMs: () => clock.nowSeconds() * 1000 },
      );
      const controller = new Controller({
        store,
        catalog,
        provider,
        clock,
        settings: { ...BASE_SETTINGS, clusterName: `no-capacity-${c.market}` },
        // Eva buying spot, as the EC2 controller's does.
        ...(c.market === 'spot'
          ? { spotMarket: true, schedulerRecipe: { kind: 'eva', options: { spot: true } } as const }
          : {}),
      });
      const spec = (name: string) => ({
        ...jobSpec(name, CPU_SMALL),
        ...(c.market === 'spot' ? { spot: 'preferred' as const } : {}),
      });
      const first = controller.submit(spec('first'), 'research');
      await controller.recover();
      await controller.runRound('submitted');
      // Every fitting type asked for once in each zone (and market), then the job is back in the queue.
      expect(new Set(api.runs)).toEqual(new Set(CPU_TYPES.map((t) => t.name)));
      expect(api.runs).toHaveLength(c.calls * CPU_TYPES.length);
      const walk = store.listInstances().length;
      expect(walk).toBe(CPU_TYPES.length);
      expect(store.getJob(first.id)?.state).toBe('queued');
      expect(store.getJob(first.id)?.reason).toMatch(/^no capacity: c7i\.\d*xlarge was refused/);

      // Within the window: reconciliation passes, and a round another submission asks for.
      for (let i = 0; i < 4; i += 1) {
        clock.advance(15);
        await controller.reconcile();
      }
      const second = controller.submit(spec('second'), 'research');
      const held = await controller.runRound('second submitted');
      expect(store.listInstances()).toHaveLength(walk);
      expect(api.runs).toHaveLength(c.calls * CPU_TYPES.length);
      expect(held.round).toBeUndefined(); // nothing left to plan
      expect(controller.latestWaiting().map((w) => [w.jobId, w.capName])).toEqual([
        [first.id, NO_CAPACITY],
        [second.id, NO_CAPACITY],
      ]);
      expect(store.getJob(second.id)?.state).toBe('queued');

      // The window (180 s) is over: the next round plans both jobs again, and walks the types again.
      clock.advance(300);
      await controller.runRound('period');
      expect(api.runs.length).toBeGreaterThan(c.calls * CPU_TYPES.length);
      expect(store.listInstances().length).toBeLessThanOrEqual(3 * walk);
      expect(store.getJob(first.id)?.state).toBe('queued');
      store.close();
    },
  );
});
