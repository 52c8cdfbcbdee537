import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { TAG_LAUNCH_TOKEN } from '../../src/cloud/provider.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { awsControllerArgs, describeWithMoto } from '../helpers/moto.js';
import { CPU_SMALL, jobSpec, liveRecords } from './controller-fixtures.js';

/**
 * A real SIGKILL of `node dist/cli/main.js controller` (the test script builds dist first): once at the worst moment
 * (RunInstances returned, its result not yet recorded: FLEETWISE_CRASH_AT makes the process kill itself there) and
 * once from outside, as the acceptance check does. Restarted from its state directory, the controller finds the
 * instance by its launch token, launches no second one, and still cleans up. Killed again and again (a crash loop), the
 * controllers together still replace an instance whose worker never registers.
 */

const MAIN = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const AMI = 'ami-12c6146b';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-sigkill-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

function start(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): { child: ChildProcess; exit: Promise<Exit>; stderr: () => string } {
  const child = spawn(process.execPath, [MAIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  child.stdout?.resume();
  const exit = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, stderr })),
  );
  return { child, exit, stderr: () => stderr };
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describeWithMoto(
  'controller process killed with SIGKILL',
  (moto) => {
    it('restarts without a duplicate launch or a lost job, then terminates everything after a cancel', async () => {
      if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first (npm test does)`);
      const cluster = 'sigkill-test';
      const stateDir = join(scratch, 'state');
      const dbPath = join(stateDir, 'state.db');
      const provider = new Ec2Provider(
        { region: 'us-east-1', amiId: AMI, placements: [{ availabilityZone: 'us-east-1a' }] },
        { api: ec2ApiFromClient(createEc2Client(moto.clientOptions)) },
      );
      const args = awsControllerArgs(AMI, cluster, stateDir, join(scratch, 'objects'));
      const env: NodeJS.ProcessEnv = { ...moto.childEnv };
      delete env.FLEETWISE_ADMIN_TOKEN;

      // 1. Killed by itself right after RunInstances, before recording the instance id.
      const first = start(args, { ...env, FLEETWISE_CRASH_AT: 'launch:after-call' });
      // Once it has recovered, its database exists with the current schema.
      await until('the controller to start', () => {
        if (first.child.exitCode !== null) throw new Error(`the controller exited: ${first.stderr()}`);
        return first.stderr().includes('recovered state') ? true : undefined;
      });
      const job = await until('a store to submit to', () => {
        try {
          const store = new SqliteStateStore(dbPath);
          const submitted = store.submitJob(jobSpec('small', CPU_SMALL));
          store.close();
          return submitted;
        } catch {
          return undefined;
        }
      });
      const crashed = await first.exit;
      expect(crashed.signal, crashed.stderr).toBe('SIGKILL');
      // The generated admin token is readable by the owner only.
      expect(statSync(join(stateDir, 'admin-token')).mode & 0o777).toBe(0o600);
      const launched = await provider.list(cluster);
      expect(launched).toHaveLength(1);
      let store = new SqliteStateStore(dbPath);
      const record = store.getInstance('inst-1');
      expect(record?.cloudId).toBeUndefined();
      expect(launched[0]?.tags[TAG_LAUNCH_TOKEN]).toBe(record?.launchToken);
      expect(store.listIntents({ states: ['pending'], kind: 'launch' })).toHaveLength(1);
      store.close();

      // 2. Restarted: the instance is found by its token and the job runs on it.
      const second = start(args, env);
      store = new SqliteStateStore(dbPath);
      const reader = store;
      await until('the job running on the launched instance', () =>
        reader.getInstance('inst-1')?.cloudId === launched[0]?.instanceId &&
        reader.getJob(job.id)?.state === 'running'
          ? true
          : undefined,
      );
      // 3. Killed from outside and restarted again: still one instance, still the same job.
      second.child.kill('SIGKILL');
      expect((await second.exit).signal).toBe('SIGKILL');
      const roundsBefore = reader.latestRound()?.round ?? 0;
      const third = start(args, env);
      await until('two rounds after the restart', () =>
        (reader.latestRound()?.round ?? 0) >= roundsBefore + 2 ? true : undefined,
      );
      expect(reader.listJobs().map((j) => [j.id, j.state])).toEqual([[job.id, 'running']]);
      expect((await provider.list(cluster, { includeTerminated: true })).map((i) => i.instanceId)).toEqual([
        launched[0]?.instanceId,
      ]);

      // 4. The job ends by a write from another process; the controller stops its task and terminates the instance.
      reader.setJobState(job.id, 'cancelled', 'test');
      await until('every instance terminated', async () =>
        (await provider.list(cluster)).length === 0 && liveRecords(reader).length === 0 ? true : undefined,
      );
      third.child.kill('SIGTERM');
      const stopped = await third.exit;
      expect(stopped.code, stopped.stderr).toBe(0);
      reader.close();
    });

    it('a controller killed again and again, each time sooner than the registration timeout, still replaces an instance whose worker never registers', async () => {
      if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first (npm test does)`);
      const timeoutSeconds = 6;
      const stateDir = join(scratch, 'crash-loop-state');
      const dbPath = join(stateDir, 'state.db');
      // With a worker bootstrap (its controller URL is never called: moto boots nothing; port 2, not one of fetch's bad
      // ports, which the controller refuses), the controller waits for each instance's worker to register, and none
      // ever does.
      const args = [
        ...awsControllerArgs(AMI, 'crash-loop-test', stateDir, join(scratch, 'crash-loop-objects')),
        '--listen',
        '127.0.0.1:0',
        '--worker-controller-url',
        'http://127.0.0.1:2',
        '--registration-timeout-seconds',
        String(timeoutSeconds),
      ];
      const env: NodeJS.ProcessEnv = { ...moto.childEnv };
      delete env.FLEETWISE_ADMIN_TOKEN;
      const reader = { store: undefined as SqliteStateStore | undefined };
      const replacements = (): number =>
        reader.store?.listEvents({ kind: 'instance.registration-timeout' }).length ?? 0;
      /** Seconds from each controller's recovery pass (where it starts counting) to its death. */
      const lives: number[] = [];
      try {
        // Each controller is killed half the timeout after its recovery pass.
        while (replacements() === 0 && lives.length < 12) {
          const life = start(args, env);
          await until('the controller to recover', () => {
            if (life.child.exitCode !== null) throw new Error(`the controller exited: ${life.stderr()}`);
            return life.stderr().includes('recovered state') ? true : undefined;
          });
          const recoveredMs = performance.now();
          if (lives.length === 0) {
            reader.store = new SqliteStateStore(dbPath);
            reader.store.submitJob(jobSpec('small', CPU_SMALL));
          }
          await new Promise((r) => setTimeout(r, (timeoutSeconds / 2) * 1000));
          life.child.kill('SIGKILL');
          const killed = await life.exit;
          lives.push((performance.now() - recoveredMs) / 1000);
          expect(killed.signal, killed.stderr).toBe('SIGKILL');
        }
        // Replaced once (its replacement waits for the 60 s launch backoff), though no controller lived the timeout
        // (with a second to spare for its recovery pass, logged just after it began counting): their lives summed.
        expect(replacements()).toBe(1);
        expect(lives.length).toBeGreaterThanOrEqual(2);
        for (const seconds of lives) expect(seconds).toBeLessThan(timeoutSeconds - 1);
        expect(reader.store?.getInstance('inst-1')?.state).not.toBe('running');
      } finally {
        reader.store?.close();
      }
    }, 120_000);
  },
  { resetBeforeEach: false },
);
