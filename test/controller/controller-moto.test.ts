import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { EC2ServiceException, RunInstancesCommand, type RunInstancesCommandInput } from '@aws-sdk/client-ec2';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { TAG_CLUSTER, TAG_INSTANCE_KEY, TAG_LAUNCH_TOKEN, TAG_PLAN } from '../../src/cloud/provider.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import type { ControllerSettings } from '../../src/controller/settings.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import type { TaskControl } from '../../src/controller/seams.js';
import { listReports } from '../../src/controller/reports.js';
import { LATEST_REPORT_KEY } from '../../src/protocol/object-keys.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { createS3Client, S3ObjectStore } from '../../src/storage/s3-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, jobSpec, liveRecords } from './controller-fixtures.js';

const AMI = 'ami-12c6146b';
const ZONES = ['us-east-1a', 'us-east-1b', 'us-east-1c'];
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-controller-moto-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** An error as the SDK raises it for an EC2 error response. */
function ec2Error(code: string): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: 'client',
    $metadata: { httpStatusCode: code === 'RequestLimitExceeded' ? 503 : 400 },
    message: `${code} (injected by the test)`,
  });
}

/** The moto-backed EC2 API with a log of calls and a hook in front of RunInstances (the provider seam). */
function seam(
  real: Ec2Api,
  beforeRun?: (input: RunInstancesCommandInput) => void,
): Ec2Api & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    runInstances: async (input) => {
      calls.push(`RunInstances ${String(input.InstanceType)} ${input.Placement?.AvailabilityZone ?? ''}`);
      beforeRun?.(input);
      return real.runInstances(input);
    },
    describeInstances: async (input) => {
      calls.push('DescribeInstances');
      return real.describeInstances(input);
    },
    terminateInstances: async (input) => {
      calls.push('TerminateInstances');
      return real.terminateInstances(input);
    },
    describeInstanceTypes: async (input) => {
      calls.push('DescribeInstanceTypes');
      return real.describeInstanceTypes(input);
    },
    createPlacementGroup: (input: Parameters<Ec2Api['createPlacementGroup']>[0]) =>
      real.createPlacementGroup(input),
    describePlacementGroups: (input: Parameters<Ec2Api['describePlacementGroups']>[0]) =>
      real.describePlacementGroups(input),
    deletePlacementGroup: (input: Parameters<Ec2Api['deletePlacementGroup']>[0]) =>
      real.deletePlacementGroup(input),
  };
}

describeWithMoto(
  'controller against moto',
  (moto) => {
    let counter = 0;

    function setup(
      overrides: Partial<ControllerSettings> = {},
      options: {
        beforeRun?: (input: RunInstancesCommandInput) => void;
        tasks?: TaskControl;
        /** The object store: this bucket through this client, else a directory. */
        s3?: { readonly client: S3Client; readonly bucket: string };
        dbPath?: string;
        clock?: ManualClock;
      } = {},
    ) {
      counter += 1;
      const cluster = `moto-${counter}`;
      const clock = options.clock ?? new ManualClock();
      const api = seam(ec2ApiFromClient(createEc2Client(moto.clientOptions)), options.beforeRun);
      const provider = new Ec2Provider(
        {
          region: 'us-east-1',
          amiId: AMI,
          placements: ZONES.map((availabilityZone) => ({ availabilityZone })),
          throttling: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
        },
        { api, sleep: async () => {} },
      );
      const dbPath = options.dbPath ?? join(scratch, `${cluster}.db`);
      const store = new SqliteStateStore(dbPath, {
        nowSeconds: () => clock.nowSeconds(),
        synchronous: 'normal',
      });
      const objectStore =
        options.s3 === undefined
          ? new FsObjectStore(join(scratch, `${cluster}-objects`))
          : new S3ObjectStore(options.s3.client, options.s3.bucket, '');
      const controller = new Controller({
        store,
        catalog,
        provider,
        clock,
        objectStore,
        ...(options.tasks === undefined ? {} : { tasks: options.tasks }),
        settings: { ...BASE_SETTINGS, clusterName: cluster, ...overrides },
      });
      return { cluster, clock, api, provider, store, controller, dbPath };
    }

    it('runs the example jobs on tagged catalog instances, survives a restart, and cleans up after cancel', async () => {
      const s3 = createS3Client(moto.clientOptions);
      await s3.send(new CreateBucketCommand({ Bucket: 'fleetwise-controller-test' }));
      const first = setup({}, { s3: { client: s3, bucket: 'fleetwise-controller-test' } });
      const specs = ['gpt2.yaml', 'graphsage.yaml', 'openfoam.yaml'].map((f) =>
        parseJobSpec(readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', f), 'utf8'), f, catalog),
      );
      const jobs = specs.map((s) => first.controller.submit(s, s.team));
      await first.controller.recover();
      await first.controller.runRound('submitted');
      const instances = await first.provider.list(first.cluster);
      // GPT-2 on a p3.8xlarge (4 GPUs), GraphSAGE on an r7i.2xlarge (56 GiB), OpenFOAM on a c7i.2xlarge.
      expect(instances.map((i) => i.typeName).sort()).toEqual(['c7i.2xlarge', 'p3.8xlarge', 'r7i.2xlarge']);
      for (const inst of instances) {
        expect(catalog.types.some((t) => t.name === inst.typeName)).toBe(true);
        const record = first.store.findInstanceByCloudId(inst.instanceId);
        expect(inst.tags).toMatchObject({
          [TAG_CLUSTER]: first.cluster,
          [TAG_PLAN]: 'round-1',
          [TAG_INSTANCE_KEY]: record?.id,
          [TAG_LAUNCH_TOKEN]: record?.launchToken,
        });
        expect(inst.state).toBe('running');
      }
      expect(first.store.listJobs().map((j) => j.state)).toEqual(['running', 'running', 'running']);

      // Restart from the database alone: every job known, no instance launched or lost.
      first.clock.advance(1800);
      first.store.close();
      const second = setup(
        {},
        { s3: { client: s3, bucket: 'fleetwise-controller-test' }, dbPath: first.dbPath, clock: first.clock },
      );
      const restarted = new Controller({
        store: second.store,
        catalog,
        provider: first.provider,
        clock: first.clock,
        objectStore: await openObjectStore('s3://fleetwise-controller-test', { s3Client: s3 }),
        settings: { ...BASE_SETTINGS, clusterName: first.cluster },
      });
      await restarted.recover();
      await restarted.runRound('after restart');
      expect(second.store.listJobs().map((j) => [j.id, j.state])).toEqual(jobs.map((j) => [j.id, 'running']));
      expect((await first.provider.list(first.cluster)).map((i) => i.instanceId).sort()).toEqual(
        instances.map((i) => i.instanceId).sort(),
      );

      first.clock.advance(1800);
      for (const job of jobs) restarted.cancel(job.id);
      await restarted.runRound('cancelled');
      first.clock.advance(5);
      await restarted.runRound('period');
      expect(await first.provider.list(first.cluster)).toEqual([]);
      expect(liveRecords(second.store)).toEqual([]);

      // A cost report in the bucket: one hour of $12.24 + $0.5292 + $0.357.
      await restarted.writeCostReport('test');
      const reports = await listReports(
        await openObjectStore('s3://fleetwise-controller-test', { s3Client: s3 }),
      );
      const latest = reports[reports.length - 1]?.document;
      expect(latest?.totalCost).toBeCloseTo(12.24 + 0.5292 + 0.357, 2);
      expect(latest?.byTeam.map((t) => t.id)).toEqual(['nlp', 'graphs', 'cfd']);
      const store = await openObjectStore('s3://fleetwise-controller-test', { s3Client: s3 });
      expect(await store.exists(LATEST_REPORT_KEY)).toBe(true);
      expect(await store.exists(reports[0]?.key.replace(/\.json$/, '.html') ?? '')).toBe(true);
      second.store.close();
    });

    it('makes no EC2 call in dry-run', async () => {
      const rigged = setup({ dryRun: true });
      rigged.controller.submit(jobSpec('small', CPU_SMALL), 'research');
      await rigged.controller.recover();
      const round = await rigged.controller.runRound();
      await rigged.controller.reconcile();
      expect(round.notApplied).toBe('dry run');
      expect(round.actions.filter((a) => a.kind === 'launch-instance')).toHaveLength(1);
      expect(rigged.api.calls).toEqual([]);
      rigged.store.close();
    });

    it('falls back to the next-cheapest fitting type when every zone refuses capacity, and retries throttled launches', async () => {
      let throttled = 0;
      const rigged = setup(
        {},
        {
          beforeRun: (input) => {
            if (input.InstanceType === 'c7i.xlarge') throw ec2Error('InsufficientInstanceCapacity');
            if (input.InstanceType === 'r7i.xlarge' && throttled < 2) {
              throttled += 1;
              throw ec2Error('RequestLimitExceeded');
            }
          },
        },
      );
      const job = rigged.controller.submit(jobSpec('either', { c7i: [0, 4, 8], r7i: [0, 4, 8] }), 'research');
      await rigged.controller.runRound();
      // Every zone refused c7i.xlarge; r7i.xlarge ($0.2646) is next: throttled twice, then launched.
      expect(rigged.api.calls.filter((c) => c.startsWith('RunInstances'))).toEqual([
        'RunInstances c7i.xlarge us-east-1a',
        'RunInstances c7i.xlarge us-east-1b',
        'RunInstances c7i.xlarge us-east-1c',
        'RunInstances r7i.xlarge us-east-1a',
        'RunInstances r7i.xlarge us-east-1a',
        'RunInstances r7i.xlarge us-east-1a',
      ]);
      const live = await rigged.provider.list(rigged.cluster);
      expect(live.map((i) => i.typeName)).toEqual(['r7i.xlarge']);
      expect(rigged.store.getTask(`${job.id}.0`)?.state).toBe('running');
      expect(rigged.provider.isCapacityConstrained('c7i.xlarge')).toBe(true);
      rigged.store.close();
    });

    it('keeps a throttled launch pending and launches it once, later', async () => {
      let throttle = true;
      const rigged = setup(
        {},
        {
          beforeRun: () => {
            if (throttle) throw ec2Error('RequestLimitExceeded');
          },
        },
      );
      rigged.controller.submit(jobSpec('small', CPU_SMALL), 'research');
      await rigged.controller.runRound();
      expect(await rigged.provider.list(rigged.cluster)).toEqual([]);
      expect(rigged.store.listIntents({ states: ['pending'], kind: 'launch' })).toHaveLength(1);
      throttle = false;
      rigged.clock.advance(10);
      await rigged.controller.reconcile();
      await rigged.controller.reconcile();
      expect((await rigged.provider.list(rigged.cluster)).map((i) => i.typeName)).toEqual(['c7i.xlarge']);
      rigged.store.close();
    });

    it('adopts an orphan of the cluster and terminates it once the plan does not need it', async () => {
      const rigged = setup({ orphanPolicy: 'adopt' });
      const ec2 = createEc2Client(moto.clientOptions);
      const out = await ec2.send(
        new RunInstancesCommand({
          ImageId: AMI,
          InstanceType: 'c7i.xlarge',
          MinCount: 1,
          MaxCount: 1,
          TagSpecifications: [
            { ResourceType: 'instance', Tags: [{ Key: TAG_CLUSTER, Value: rigged.cluster }] },
          ],
        }),
      );
      const orphan = out.Instances?.[0]?.InstanceId as string;
      await rigged.controller.recover();
      const adopted = rigged.store.findInstanceByCloudId(orphan);
      expect(adopted).toMatchObject({ state: 'running', typeName: 'c7i.xlarge' });
      // A job that fits it runs there: no launch.
      const job = rigged.controller.submit(jobSpec('small', CPU_SMALL), 'research');
      await rigged.controller.runRound();
      expect(rigged.api.calls.filter((c) => c.startsWith('RunInstances'))).toEqual([]);
      expect(rigged.store.getTask(`${job.id}.0`)?.instanceId).toBe(adopted?.id);
      rigged.controller.cancel(job.id);
      await rigged.controller.runRound();
      expect(await rigged.provider.list(rigged.cluster)).toEqual([]);
      expect(rigged.store.findInstanceByCloudId(orphan)?.state).toBe('terminated');
      rigged.store.close();
    });

    it('replaces an instance whose worker never registers and backs off before the next launch', async () => {
      const never: TaskControl = {
        name: 'never-registers',
        workerRegistered: () => false,
        start: async () => {},
        stop: async () => 'stopped',
        status: async () => 'running',
      };
      const rigged = setup(
        { registrationTimeoutSeconds: 300, registrationBackoffBaseSeconds: 120 },
        { tasks: never },
      );
      rigged.controller.submit(jobSpec('small', CPU_SMALL), 'research');
      await rigged.controller.runRound();
      const first = (await rigged.provider.list(rigged.cluster))[0]?.instanceId;
      rigged.clock.advance(301);
      await rigged.controller.runRound('timeout');
      // Replaced: the first instance is gone, the replacement waits for the backoff.
      expect(await rigged.provider.list(rigged.cluster)).toEqual([]);
      expect(rigged.store.findInstanceByCloudId(first as string)?.state).toBe('terminated');
      expect(rigged.store.listIntents({ states: ['pending'], kind: 'launch' })).toHaveLength(1);
      rigged.clock.advance(60);
      await rigged.controller.reconcile();
      expect(await rigged.provider.list(rigged.cluster)).toEqual([]);
      rigged.clock.advance(61);
      await rigged.controller.reconcile();
      expect(await rigged.provider.list(rigged.cluster)).toHaveLength(1);
      rigged.store.close();
    });
  },
  { resetBeforeEach: false },
);
