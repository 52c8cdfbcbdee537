import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { launchedOnSpot } from '../../src/controller/instance-market.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { awsControllerArgs, describeWithMoto } from '../helpers/moto.js';
import { catalog } from './controller-fixtures.js';

/**
 * `fleetwise controller --provider aws` as a user runs it, on the bundled catalog (which sells spot): its Eva buys a
 * job that allows spot on spot at the pool's price, and keeps a `spot: never` job on demand.
 */

const MAIN = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const AMI = 'ami-12c6146b';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-controller-cli-spot-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function spec(name: string, spot: 'never' | 'preferred') {
  return validateJobSpec(
    {
      name,
      team: 'research',
      tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 2, 4] } }],
      expectedDurationSeconds: 36_000,
      spot,
    },
    name,
    catalog,
  );
}

describeWithMoto('the controller process buys spot', (moto) => {
  /** `fleetwise controller --provider aws` on its own state directory, with `extra` flags; stopped by `stop`. */
  async function startController(name: string, extra: readonly string[] = []) {
    const stateDir = join(scratch, name);
    const env: NodeJS.ProcessEnv = { ...moto.childEnv };
    delete env.FLEETWISE_ADMIN_TOKEN;
    const child: ChildProcess = spawn(
      process.execPath,
      [MAIN, ...awsControllerArgs(AMI, name, stateDir, join(scratch, `${name}-objects`)), ...extra],
      { env, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await until('the controller to start', () => {
      if (child.exitCode !== null) throw new Error(`the controller exited: ${stderr}`);
      return stderr.includes('recovered state') ? true : undefined;
    });
    const store = new SqliteStateStore(join(stateDir, 'state.db'));
    const provider = new Ec2Provider(
      { region: 'us-east-1', amiId: AMI, placements: [{ availabilityZone: 'us-east-1a' }] },
      { api: ec2ApiFromClient(createEc2Client(moto.clientOptions)) },
    );
    const stop = async () => {
      store.close();
      child.kill('SIGTERM');
      await exited;
    };
    return { store, provider, stop };
  }

  it('launches a job that prefers spot on spot and a spot: never job on demand', async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first (npm test does)`);
    const cluster = 'cli-spot';
    const { store, provider, stop } = await startController(cluster);
    try {
      const spotJob = store.submitJob(spec('on-spot', 'preferred'));
      const onDemandJob = store.submitJob(spec('never-spot', 'never'));
      const hostOf = (jobId: string) => store.listTasks({ jobId })[0]?.instanceId;
      const launched = await until('both jobs placed on launched instances', async () => {
        const a = hostOf(spotJob.id);
        const b = hostOf(onDemandJob.id);
        const ids = [a, b].map((id) => (id === undefined ? undefined : store.getInstance(id)?.cloudId));
        if (ids.some((id) => id === undefined) || a === b) return undefined;
        const listed = await provider.list(cluster);
        return ids.map((id) => listed.find((i) => i.instanceId === id));
      });
      const [onSpot, onDemand] = launched;
      // EC2 itself says how each was bought (DescribeInstances' InstanceLifecycle).
      expect(onSpot?.market).toBe('spot');
      expect(onDemand?.market ?? 'on-demand').toBe('on-demand');
      const spotRecord = store.getInstance(hostOf(spotJob.id) as string);
      const pool = catalog.spot?.offerings.find(
        (o) => o.typeName === spotRecord?.typeName && o.zone === spotRecord?.availabilityZone,
      );
      expect(pool).toBeDefined();
    } finally {
      await stop();
    }
  });

  it('admits jobs that may go on spot against the spot quota, not the on-demand one', async () => {
    // 2 on-demand standard vCPUs hold one job; 8 spot ones hold all three, as EC2 counts spot apart.
    const config = join(scratch, 'quota.yaml');
    writeFileSync(
      config,
      'caps:\n  quotas:\n    - { group: standard, maxVcpus: 2 }\n    - { group: standard-spot, maxVcpus: 8 }\n',
    );
    const { store, stop } = await startController('cli-spot-quota', ['--config', config]);
    try {
      const jobs = [1, 2, 3].map((i) => store.submitJob(spec(`quota-${i}`, 'preferred')));
      await until('all three jobs placed', () =>
        jobs.every((j) => store.listTasks({ jobId: j.id })[0]?.instanceId !== undefined) ? true : undefined,
      );
      const hosts = jobs.map((j) => store.listTasks({ jobId: j.id })[0]?.instanceId as string);
      expect(hosts.every((id) => launchedOnSpot(store, id))).toBe(true);
    } finally {
      await stop();
    }
  });
});
