import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RunInstancesCommand } from '@aws-sdk/client-ec2';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { TAG_CLUSTER, TAG_LAUNCH_TOKEN } from '../../src/cloud/provider.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import {
  FAULT_POINTS,
  InjectedCrash,
  type FaultInjector,
  type FaultPoint,
} from '../../src/controller/faults.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import {
  BASE_SETTINGS,
  catalog,
  CPU_SMALL,
  CrashAt,
  jobSpec,
  liveRecords,
  MEM_BIG,
} from './controller-fixtures.js';

/**
 * Restart recovery ("killing it at any line … loses no job, launches no duplicate instance
 * and leaves no instance unaccounted for"): a crash is injected at every fault point between an intent and its
 * effect, the controller is rebuilt from the SQLite file alone, and the cloud (moto) and the store must agree.
 */

const AMI = 'ami-12c6146b';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-recovery-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Counts RunInstances calls: the strongest "no duplicate launch" check. */
function countingApi(real: Ec2Api): Ec2Api & { runs: number } {
  const api = {
    runs: 0,
    runInstances: (input: Parameters<Ec2Api['runInstances']>[0]) => {
      api.runs += 1;
      return real.runInstances(input);
    },
    describeInstances: (input: Parameters<Ec2Api['describeInstances']>[0]) => real.describeInstances(input),
    terminateInstances: (input: Parameters<Ec2Api['terminateInstances']>[0]) =>
      real.terminateInstances(input),
    describeInstanceTypes: (input: Parameters<Ec2Api['describeInstanceTypes']>[0]) =>
      real.describeInstanceTypes(input),
    createPlacementGroup: (input: Parameters<Ec2Api['createPlacementGroup']>[0]) =>
      real.createPlacementGroup(input),
    describePlacementGroups: (input: Parameters<Ec2Api['describePlacementGroups']>[0]) =>
      real.describePlacementGroups(input),
    deletePlacementGroup: (input: Parameters<Ec2Api['deletePlacementGroup']>[0]) =>
      real.deletePlacementGroup(input),
  };
  return api;
}

describeWithMoto(
  'controller restart recovery against moto',
  (moto) => {
    let counter = 0;

    function build(cluster: string, dbPath: string, clock: ManualClock, api: Ec2Api, faults?: FaultInjector) {
      const store = new SqliteStateStore(dbPath, {
        nowSeconds: () => clock.nowSeconds(),
        synchronous: 'normal',
      });
      const provider = new Ec2Provider(
        {
          region: 'us-east-1',
          amiId: AMI,
          placements: [{ availabilityZone: 'us-east-1a' }, { availabilityZone: 'us-east-1b' }],
          throttling: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
        },
        { api, sleep: async () => {} },
      );
      const controller = new Controller({
        store,
        catalog,
        provider,
        clock,
        settings: { ...BASE_SETTINGS, clusterName: cluster, vanishGraceSeconds: 30 },
        faults,
      });
      return { store, provider, controller };
    }

    for (const point of FAULT_POINTS) {
      it(`recovers from a crash at ${point}`, async () => {
        counter += 1;
        const cluster = `recover-${counter}`;
        const dbPath = join(scratch, `${cluster}.db`);
        const clock = new ManualClock();
        const ec2 = createEc2Client(moto.clientOptions);
        const api = countingApi(ec2ApiFromClient(ec2));
        let orphans = 0;
        if (point === 'orphan:recorded') {
          // An instance of this cluster that no record knows: the sync adopts it.
          await ec2.send(
            new RunInstancesCommand({
              ImageId: AMI,
              InstanceType: 'c7i.large',
              MinCount: 1,
              MaxCount: 1,
              TagSpecifications: [{ ResourceType: 'instance', Tags: [{ Key: TAG_CLUSTER, Value: cluster }] }],
            }),
          );
          orphans = 1;
        }
        const crash = new CrashAt(point as FaultPoint);
        let live = build(cluster, dbPath, clock, api, crash);
        const small = live.controller.submit(jobSpec('small', CPU_SMALL), 'research');
        const big = live.controller.submit(jobSpec('big', MEM_BIG), 'graphs');
        // The script: plan and launch, let tasks start, cancel one job, plan again (stop, drop, terminate).
        const steps: (() => Promise<unknown>)[] = [
          () => live.controller.recover(),
          () => live.controller.runRound('submitted'),
          () => live.controller.reconcile(),
          async () => live.controller.cancel(small.id),
          () => live.controller.runRound('cancelled'),
          () => live.controller.reconcile(),
        ];
        let crashedAt: number | undefined;
        for (let i = 0; i < steps.length; i++) {
          try {
            await (steps[i] as () => Promise<unknown>)();
          } catch (e) {
            if (!(e instanceof InjectedCrash)) throw e;
            crashedAt = i;
            break;
          }
          clock.advance(5);
        }
        expect(crash.fired, `the scenario reaches ${point}`).toBe(true);
        // "Restart": a new controller, a new provider (empty caches), the same database file.
        live.store.close();
        live = build(cluster, dbPath, clock, api);
        for (let i = 0; i < steps.length; i++) {
          if (i > 0 && i <= (crashedAt ?? 0)) continue; // recover first, then the steps not yet done
          await (steps[i] as () => Promise<unknown>)();
          clock.advance(5);
        }
        await live.controller.runRound('after restart');

        // No job lost; the cancelled one ended, the other runs on an instance EC2 has.
        const jobs = live.store.listJobs();
        expect(jobs.map((j) => [j.id, j.state])).toEqual([
          [small.id, 'cancelled'],
          [big.id, 'running'],
        ]);
        const inEc2 = await live.provider.list(cluster);
        const everLaunched = await live.provider.list(cluster, { includeTerminated: true });
        const records = liveRecords(live.store);
        // Every live EC2 instance has exactly one live record, and the other way round.
        expect(inEc2.map((i) => i.instanceId).sort()).toEqual(records.map((r) => r.cloudId).sort());
        const bigTask = live.store.getTask(`${big.id}.0`);
        const host = live.store.getInstance(bigTask?.instanceId as string);
        expect(bigTask?.state).toBe('running');
        expect(inEc2.some((i) => i.instanceId === host?.cloudId && i.typeName === 'r7i.2xlarge')).toBe(true);
        // No duplicate launch: one instance per launch token, and no more RunInstances than instances.
        const tokens = everLaunched.map((i) => i.tags[TAG_LAUNCH_TOKEN]).filter((t) => t !== undefined);
        expect(new Set(tokens).size).toBe(tokens.length);
        expect(api.runs).toBe(everLaunched.length - orphans);
        // Each launched instance belongs to the record that asked for it: none had to be picked up as an orphan.
        const all = live.store.listInstances();
        const adopted = all.filter((r) => r.launchToken.startsWith('adopted-'));
        expect(adopted).toHaveLength(orphans);
        expect(all.filter((r) => r.cloudId !== undefined && !adopted.includes(r))).toHaveLength(
          everLaunched.length - orphans,
        );
        expect(live.store.listIntents({ states: ['pending'] })).toEqual([]);

        // And the rest converges: cancel everything, all instances terminate within two rounds.
        live.controller.cancel(big.id);
        await live.controller.runRound('cancel all');
        clock.advance(5);
        await live.controller.runRound('period');
        expect(await live.provider.list(cluster)).toEqual([]);
        expect(liveRecords(live.store)).toEqual([]);
        live.store.close();
      });
    }
  },
  { resetBeforeEach: false },
);
