import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, describe, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { TAG_LAUNCH_TOKEN } from '../../src/cloud/provider.js';
import { readLocalInstances } from '../../src/cloud/local/instance-file.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { jobArchiveKeys, latestBackupKey } from '../../src/protocol/object-keys.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { createS3Client } from '../../src/storage/s3-store.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { CLI } from '../helpers/built-cli.js';
import {
  CONTROLLER_START_TIMEOUT_MS,
  killLocalLeftovers,
  pidAlive,
  startLocalController,
  until,
  type LocalInstanceRecord,
  type StartedController,
} from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';
import { describeWithMoto } from '../helpers/moto.js';

/**
 * The loss of the controller's machine, end to end with real processes: jobs are submitted, a backup is taken, more
 * jobs are submitted (one even finishes), then the controller is SIGKILLed and its state directory deleted (in local
 * mode its workers die with the machine). `fleetwise controller --restore-from` on a fresh state directory brings
 * back every accepted job with its id (those after the backup from the job archive), runs none that had finished,
 * and leaves no instance behind. Once with local workers and a directory object store, once on moto_server with EC2
 * instances that outlive the controller and an S3 object store.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-restore-rt-'));
const stateDirs: string[] = [];
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of stateDirs) killLocalLeftovers(dir);
  await new Promise((r) => setTimeout(r, 100));
  rmSync(scratch, { recursive: true, force: true });
});

/** Backups only at each start (and a planned stop) during the test: it decides what a backup holds. */
const CONFIG = ['backupSeconds: 3600', 'vanishGraceSeconds: 1'];

async function latestSeq(objects: ObjectStore, cluster: string): Promise<number> {
  if (!(await objects.exists(latestBackupKey(cluster)))) return 0;
  return (JSON.parse((await objects.getBuffer(latestBackupKey(cluster))).toString('utf8')) as { seq: number })
    .seq;
}

async function logRuns(objects: ObjectStore, jobId: string): Promise<number> {
  let runs = 0;
  for await (const info of objects.list(`logs/${jobId}/`)) if (info.key.endsWith('.log')) runs += 1;
  return runs;
}

interface JobView {
  readonly id: string;
  readonly name: string;
  readonly state: string;
}

async function jobs(ctl: { api: StartedController['api'] }): Promise<JobView[]> {
  const answer = await ctl.api('GET', '/v1/jobs');
  return (answer.json as { jobs: JobView[] }).jobs;
}

async function submit(ctl: StartedController, name: string, command: readonly string[]): Promise<string> {
  const answer = await ctl.api('POST', '/v1/jobs', {
    name,
    team: 'rt',
    tasks: [{ name: 'main', command, demand: { c7i: [0, 1, 1] } }],
  });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

async function jobState(ctl: StartedController, id: string, states: readonly string[]): Promise<true> {
  return until(
    `${id} ${states.join(' or ')}`,
    async () => (states.includes((await jobs(ctl)).find((j) => j.id === id)?.state ?? '') ? true : undefined),
    40_000,
    () => ctl.diagnostics(),
  );
}

describe('restore from a backup in local mode, with a directory object store', () => {
  it('brings back every accepted job, runs none again that had finished, and leaves no worker behind', async () => {
    const stateDir = join(scratch, 'local-state');
    const objectsDir = join(scratch, 'local-objects');
    stateDirs.push(stateDir);
    const objects = await openObjectStore(objectsDir);
    const options = { config: CONFIG, args: ['--cluster', 'rt', '--object-store', objectsDir] };

    // The long jobs run until the test lets them end, after the restore: a job of a given length (3 s, then 10 s)
    // could end before the box was lost on a slow host, and the restore then rightly reported it ended.
    const gate = join(scratch, 'long-jobs-may-end');
    const longJob = ['sh', '-c', `while [ ! -e '${gate}' ]; do sleep 0.2; done`];

    // Before the backup: one long job, one that finishes.
    const first = await startLocalController(stateDir, options);
    children.push(first.process);
    const long = await submit(first, 'long-before', longJob);
    const quick = await submit(first, 'quick-before', ['true']);
    await jobState(first, quick, ['succeeded']);
    first.process.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    // The backup at the next start holds both; then two more jobs, one of which finishes before the loss.
    const seqBefore = await latestSeq(objects, 'rt');
    const second = await startLocalController(stateDir, options);
    children.push(second.process);
    await until('the start backup', async () =>
      (await latestSeq(objects, 'rt')) > seqBefore ? true : undefined,
    );
    const quickAfter = await submit(second, 'quick-after', ['true']);
    const longAfter = await submit(second, 'long-after', longJob);
    await jobState(second, quickAfter, ['succeeded']);
    // Its end is stored in the background, moments after: a job that ended in the very last moments before the loss
    // (its end record not yet stored) would run again.
    await until('the end of the finished job archived', async () =>
      (await objects.exists(jobArchiveKeys('rt', quickAfter).end)) ? true : undefined,
    );
    await jobState(second, longAfter, ['running']);
    const accepted = await jobs(second);
    expect(accepted.map((j) => j.id)).toEqual([long, quick, quickAfter, longAfter]);

    // The machine is lost: the controller killed, its workers with it, its disk gone.
    second.process.kill('SIGKILL');
    await second.exited;
    killLocalLeftovers(stateDir);
    const oldWorkers = second.instances().flatMap((i) => (i.pid === undefined ? [] : [i.pid]));
    rmSync(stateDir, { recursive: true, force: true });

    const restored = await startLocalController(stateDir, {
      ...options,
      args: [...options.args, '--restore-from', objectsDir],
    });
    children.push(restored.process);
    expect(restored.stdout()).toMatch(
      new RegExp(
        `restored the state from ${objectsDir} backups/rt/state-\\d+\\.db\\.gz .*2 job\\(s\\) accepted after it ` +
          `submitted again \\(${quickAfter}, ${longAfter}\\), 1 ended as they did after it \\(${quickAfter}\\)`,
      ),
    );
    // Every accepted job is there, with its id and name; each one ends, and the finished ones ran once.
    expect((await jobs(restored)).map((j) => [j.id, j.name])).toEqual(accepted.map((j) => [j.id, j.name]));
    writeFileSync(gate, '');
    for (const id of [long, quick, quickAfter, longAfter]) await jobState(restored, id, ['succeeded']);
    expect(await logRuns(objects, quick)).toBe(1);
    expect(await logRuns(objects, quickAfter)).toBe(1);

    // No instance left: every worker the new box started is terminated once idle, and none of the old box runs.
    await until(
      'every instance terminated',
      async () => {
        const cluster = (await restored.api('GET', '/v1/cluster')).json as { instances: unknown[] };
        const live = restored.instances().filter((i: LocalInstanceRecord) => i.state !== 'terminated');
        return cluster.instances.length === 0 && live.length === 0 ? true : undefined;
      },
      40_000,
      () => restored.diagnostics(),
    );
    for (const pid of [
      ...oldWorkers,
      ...restored.instances().flatMap((i) => (i.pid === undefined ? [] : [i.pid])),
    ])
      await until(`worker ${pid} to exit`, () => (pidAlive(pid) ? undefined : true));
    restored.process.kill('SIGTERM');
    expect(await restored.exited).toBe(0);

    // One launch per instance record: no launch token used twice, every cloud instance known to the state.
    const launched = readLocalInstances(join(stateDir, 'local-instances.json'));
    const tokens = launched.map((i) => i.tags[TAG_LAUNCH_TOKEN]);
    expect(new Set(tokens).size).toBe(tokens.length);
    const state = new SqliteStateStore(join(stateDir, 'state.db'));
    const cloudIds = new Set(
      state.listInstances().flatMap((i) => (i.cloudId === undefined ? [] : [i.cloudId])),
    );
    state.close();
    for (const i of launched) expect(cloudIds.has(i.instanceId)).toBe(true);
  }, 120_000);
});

describeWithMoto(
  'restore from a backup on moto_server: EC2 instances outlive the controller, S3 holds the backups',
  (moto) => {
    const AMI = 'ami-12c6146b';
    const BUCKET = 'fleetwise-restore';
    const ADMIN = 'restore-round-trip-admin-token-0123';

    interface Started {
      readonly child: ChildProcess;
      readonly exited: Promise<number | null>;
      readonly api: StartedController['api'];
      output(): string;
    }

    async function startAws(stateDir: string, extra: readonly string[] = []): Promise<Started> {
      if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first (npm test does)`);
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const config = join(scratch, 'aws.yaml');
      writeFileSync(config, [...CONFIG, ''].join('\n'));
      const child = spawn(
        process.execPath,
        [
          CLI,
          'controller',
          '--config',
          config,
          '--provider',
          'aws',
          '--cluster',
          'rt-aws',
          '--state-dir',
          stateDir,
          '--object-store',
          `s3://${BUCKET}/fleet`,
          '--ami',
          AMI,
          '--round-seconds',
          '1',
          '--poll-seconds',
          '1',
          '--listen',
          `127.0.0.1:${port}`,
          ...extra,
        ],
        { env: { ...moto.childEnv, FLEETWISE_ADMIN_TOKEN: ADMIN }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      children.push(child);
      let out = '';
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const api: StartedController['api'] = async (method, path, body) => {
        const response = await fetch(`${url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${ADMIN}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        const text = await response.text();
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        return { status: response.status, json, text };
      };
      await until(
        'the controller API',
        () => (out.includes('API http://') ? true : undefined),
        CONTROLLER_START_TIMEOUT_MS,
        () => out,
      );
      return { child, exited, api, output: () => out };
    }

    it('adopts the instance launched after the backup, launches nothing twice, and cleans up after a cancel', async () => {
      await createS3Client(moto.clientOptions).send(new CreateBucketCommand({ Bucket: BUCKET }));
      const objects = await openObjectStore(`s3://${BUCKET}/fleet`, {
        s3Client: createS3Client(moto.clientOptions),
      });
      const ec2 = new Ec2Provider(
        { region: 'us-east-1', amiId: AMI, placements: [{ availabilityZone: 'us-east-1a' }] },
        { api: ec2ApiFromClient(createEc2Client(moto.clientOptions)) },
      );
      const stateDir = join(scratch, 'aws-state');
      // Each job fills a c7i.xlarge, so the second one needs an instance of its own.
      const spec = (name: string): Record<string, unknown> => ({
        name,
        team: 'rt',
        tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
      });
      const running = (ctl: Started, id: string): Promise<true> =>
        until(
          `${id} running`,
          async () =>
            ((await ctl.api('GET', `/v1/jobs/${id}`)).json as { state?: string }).state === 'running'
              ? true
              : undefined,
          40_000,
          () => ctl.output(),
        );

      const first = await startAws(stateDir);
      const one = ((await first.api('POST', '/v1/jobs', spec('one'))).json as { id: string }).id;
      await running(first, one);
      // A planned stop leaves EC2 instances running; the next start's backup holds job one and its instance.
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      const seqBefore = await latestSeq(objects, 'rt-aws');
      const second = await startAws(stateDir);
      await until('the start backup', async () =>
        (await latestSeq(objects, 'rt-aws')) > seqBefore ? true : undefined,
      );
      const two = ((await second.api('POST', '/v1/jobs', spec('two'))).json as { id: string }).id;
      await running(second, two);
      const before = await ec2.list('rt-aws');
      expect(before).toHaveLength(2);

      second.child.kill('SIGKILL');
      await second.exited;
      rmSync(stateDir, { recursive: true, force: true });

      const restored = await startAws(stateDir, ['--restore-from', `s3://${BUCKET}/fleet`]);
      expect(restored.output()).toMatch(/1 job\(s\) accepted after it submitted again \(job-2\)/);
      await running(restored, one);
      await running(restored, two);
      // Both instances known again (the one launched after the backup found by its cluster tag and adopted: its
      // launch token carries the store id the backup had), none launched.
      expect(restored.output()).toMatch(/orphan instance i-[0-9a-f]+ adopted/);
      const cluster = (await restored.api('GET', '/v1/cluster')).json as {
        instances: { cloudId?: string }[];
      };
      expect(cluster.instances.map((i) => i.cloudId).sort()).toEqual(before.map((i) => i.instanceId).sort());
      expect((await ec2.list('rt-aws', { includeTerminated: true })).map((i) => i.instanceId).sort()).toEqual(
        before.map((i) => i.instanceId).sort(),
      );

      for (const id of [one, two])
        expect((await restored.api('POST', `/v1/jobs/${id}/cancel`)).status).toBe(200);
      await until(
        'every instance terminated',
        async () => ((await ec2.list('rt-aws')).length === 0 ? true : undefined),
        40_000,
        () => restored.output(),
      );
      expect(await ec2.list('rt-aws', { includeTerminated: true })).toHaveLength(2);
      restored.child.kill('SIGTERM');
      expect(await restored.exited).toBe(0);
      // Three controller starts, each allowed CONTROLLER_START_TIMEOUT_MS on a starved host.
    }, 300_000);
  },
  { resetBeforeEach: false },
);
