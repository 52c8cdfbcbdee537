import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GONE_GRACE_MS,
  goneGraceWithin,
  LocalProvider,
  type LocalInstance,
  type WorkerSpawner,
} from '../../src/cloud/local/local-provider.js';
import { WORKER_EXIT_FILE } from '../../src/protocol/worker-exit.js';
import { LocalInstanceFile } from '../../src/cloud/local/instance-file.js';
import { TAG_CLUSTER, TAG_LAUNCH_TOKEN } from '../../src/cloud/provider.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { table3Catalog } from '../helpers/catalogs.js';
import { cloudProviderContract } from './provider-contract.js';
import { killProcessGroups } from '../helpers/processes-under.js';
import { fakeProcessWorkerSpawner } from '../helpers/fake-worker-spawner.js';

/**
 * The local provider with the real process spawner: its "worker" is a stand-in script (the spawner runs
 * `node <main> worker … --instance-id <id> …`, and the stand-in just stays alive), so launch, list, terminate and a
 * provider restart are checked against real processes without a controller.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-local-provider-'));
const FAKE_WORKER = join(tmp, 'fake-worker.mjs');
const spawned: number[] = [];

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A killed child not yet reaped is a zombie: dead for our purposes.
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/\) Z /.test(stat);
}

async function waitDead(pid: number, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/** Counts spawns (a second process for the same token would show here) around the real spawner. */
class CountingSpawner implements WorkerSpawner {
  spawns = 0;
  /** The next spawn fails before starting anything, as a controller SIGKILLed right after recording the launch. */
  failNextSpawn = false;
  constructor(private readonly inner: WorkerSpawner) {}
  spawn(instance: LocalInstance): number | undefined {
    if (this.failNextSpawn) {
      this.failNextSpawn = false;
      throw new Error('killed before the spawn');
    }
    this.spawns++;
    const pid = this.inner.spawn(instance);
    if (pid !== undefined) spawned.push(pid);
    return pid;
  }
  /** The next kill fails before killing anything, as a controller SIGKILLed mid-terminate would leave it. */
  failNextKill = false;
  kill(instance: LocalInstance): Promise<void> {
    if (this.failNextKill) {
      this.failNextKill = false;
      return Promise.reject(new Error('killed mid-terminate'));
    }
    return this.inner.kill(instance);
  }
}

function provider(dir: string, goneGraceMs?: number): { provider: LocalProvider; spawner: CountingSpawner } {
  const spawner = new CountingSpawner(fakeProcessWorkerSpawner(FAKE_WORKER));
  return {
    provider: new LocalProvider({
      stateFile: join(dir, 'local-instances.json'),
      instancesDir: join(dir, 'instances'),
      catalog: table3Catalog(),
      spawner,
      ...(goneGraceMs === undefined ? {} : { goneGraceMs }),
    }),
    spawner,
  };
}

const request = (token: string, clusterName = 'alpha') => ({
  typeName: 'c.x',
  idempotencyToken: token,
  clusterName,
  planId: 'plan-1',
  instanceKey: `slot-${token}`,
});

function pidOf(p: LocalProvider, instanceId: string): number {
  const pid = p.instances().find((i) => i.instanceId === instanceId)?.pid;
  if (pid === undefined) throw new Error(`no pid recorded for ${instanceId}`);
  return pid;
}

describe('local provider (real worker processes)', () => {
  beforeAll(() => {
    writeFileSync(FAKE_WORKER, 'setInterval(() => {}, 1000);\n');
  });

  // Inside this describe, so that afterAll stops the workers the contract's launches spawn.
  describe('the CloudProvider contract', () => {
    let runs = 0;
    cloudProviderContract({
      open: () => {
        const dir = join(tmp, `contract-${++runs}`);
        return { provider: provider(dir).provider, reopen: () => provider(dir).provider };
      },
      typeNames: ['c.x', 'd.x'],
      zones: ['local'],
      unknownInstanceId: 'local-000000000000',
    });
  });
  afterAll(() => {
    killProcessGroups(spawned);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('launches once per idempotency token: the same token answers the same instance and spawns no second worker', async () => {
    const { provider: p, spawner } = provider(join(tmp, 'idem'));
    const first = await p.launch(request('tok-1'));
    expect(first.reusedExisting).toBe(false);
    expect(first.instanceIds).toHaveLength(1);
    expect(first.instanceIds[0]).toMatch(/^local-[0-9a-f]{12}$/);
    const again = await p.launch(request('tok-1'));
    expect(again).toEqual({
      instanceIds: first.instanceIds,
      availabilityZone: 'local',
      reusedExisting: true,
    });
    expect(spawner.spawns).toBe(1);
    expect(p.instances()).toHaveLength(1);
    expect(alive(pidOf(p, first.instanceIds[0] as string))).toBe(true);
    // The same token in another cluster is another launch.
    const other = await p.launch(request('tok-1', 'beta'));
    expect(other.reusedExisting).toBe(false);
    expect(other.instanceIds).not.toEqual(first.instanceIds);
    expect(spawner.spawns).toBe(2);
    // An unknown type is refused before anything is recorded or spawned.
    await expect(p.launch({ ...request('tok-2'), typeName: 'zz.huge' })).rejects.toThrow(
      /not in the catalog/,
    );
    expect(spawner.spawns).toBe(2);
  });

  it('keeps the market a launch asked for, as EC2 would: spot answered and listed as spot, after a retry too', async () => {
    const { provider: p } = provider(join(tmp, 'market'));
    const spot = await p.launch({ ...request('spot-1'), market: 'spot' });
    expect(spot.market).toBe('spot');
    expect((await p.launch({ ...request('spot-1'), market: 'spot' })).market).toBe('spot');
    const onDemand = await p.launch(request('od-1'));
    expect(onDemand.market).toBeUndefined();
    const listed = new Map((await p.list('alpha')).map((i) => [i.instanceId, i.market]));
    expect(listed.get(spot.instanceIds[0] as string)).toBe('spot');
    expect(listed.get(onDemand.instanceIds[0] as string)).toBe('on-demand');
  });

  it('lists by cluster tag, terminated instances only on request', async () => {
    const { provider: p } = provider(join(tmp, 'list'));
    const a1 = (await p.launch(request('a-1', 'alpha'))).instanceIds[0] as string;
    const a2 = (await p.launch(request('a-2', 'alpha'))).instanceIds[0] as string;
    const b1 = (await p.launch(request('b-1', 'beta'))).instanceIds[0] as string;
    const alpha = await p.list('alpha');
    expect(alpha.map((i) => i.instanceId).sort()).toEqual([a1, a2].sort());
    expect(alpha.every((i) => i.tags[TAG_CLUSTER] === 'alpha' && i.state === 'running')).toBe(true);
    expect(alpha.find((i) => i.instanceId === a1)?.tags[TAG_LAUNCH_TOKEN]).toBe('a-1');
    expect((await p.list('beta')).map((i) => i.instanceId)).toEqual([b1]);
    expect(await p.list('gamma')).toEqual([]);
    await p.terminate([a2]);
    expect((await p.list('alpha')).map((i) => i.instanceId)).toEqual([a1]);
    const all = await p.list('alpha', { includeTerminated: true });
    expect(all.find((i) => i.instanceId === a2)?.state).toBe('terminated');
  });

  it('terminate kills the worker process and the tasks it started, and is idempotent', async () => {
    const { provider: p } = provider(join(tmp, 'terminate'));
    const id = (await p.launch(request('t-1'))).instanceIds[0] as string;
    const pid = pidOf(p, id);
    expect(alive(pid)).toBe(true);
    // A task this instance's worker started (the agent keeps tasks/<id>/agent.json): terminate must stop it too.
    const dir = p.instances()[0]?.dir as string;
    const executor = new ProcessExecutor({ stateDir: join(dir, 'executor') });
    await executor.start({
      taskId: 'job-1.0',
      jobId: 'job-1',
      command: ['sleep', '60'],
      env: {},
      vcpus: 1,
      memoryGiB: 0,
      gpus: 0,
      shmSizeGiB: 0,
      checkpointDir: join(dir, 'tasks', 'job-1.0', 'checkpoint'),
      progressFile: join(dir, 'tasks', 'job-1.0', 'progress'),
      restoring: false,
    });
    mkdirSync(join(dir, 'tasks', 'job-1.0'), { recursive: true });
    writeFileSync(join(dir, 'tasks', 'job-1.0', 'agent.json'), '{}');
    const taskPid = (
      JSON.parse(readFileSync(join(dir, 'executor', 'job-1.0', 'pid.json'), 'utf8')) as { pid: number }
    ).pid;
    expect(alive(taskPid)).toBe(true);

    await p.terminate([id]);
    expect(await waitDead(pid)).toBe(true);
    expect(await waitDead(taskPid)).toBe(true);
    expect(await executor.list()).toEqual([]);
    expect(p.instances()[0]?.state).toBe('terminated');
    const terminatedAt = p.instances()[0]?.terminatedAtMs;
    expect(terminatedAt).toBeGreaterThan(0);
    await p.terminate([id]); // again: no error, the first termination time is kept
    expect(p.instances()[0]?.terminatedAtMs).toBe(terminatedAt);
  });

  it('a terminate cut short after recording the instance terminated kills its worker when retried', async () => {
    const dir = join(tmp, 'terminate-crash');
    const { provider: p, spawner } = provider(dir);
    const id = (await p.launch(request('c-1'))).instanceIds[0] as string;
    const pid = pidOf(p, id);
    // The controller dies between recording the termination and killing anything (the first kill never happens).
    spawner.failNextKill = true;
    await expect(p.terminate([id])).rejects.toThrow(/killed mid-terminate/);
    expect(p.instances()[0]?.state).toBe('terminated');
    expect(alive(pid)).toBe(true);
    // A restarted controller carries out its pending terminate again: the worker is killed this time.
    await provider(dir).provider.terminate([id]);
    expect(await waitDead(pid)).toBe(true);
  });

  it('a launch cut short between spawning the worker and recording its pid: terminate finds the worker and kills it', async () => {
    const dir = join(tmp, 'launch-crash');
    const { provider: p } = provider(dir);
    const id = (await p.launch(request('p-1'))).instanceIds[0] as string;
    const pid = pidOf(p, id);
    // The record as the crash leaves it: written before the spawn, the pid never added.
    const record = p.instances()[0] as LocalInstance;
    const { pid: _dropped, ...withoutPid } = record;
    new LocalInstanceFile(join(dir, 'local-instances.json')).write([withoutPid]);
    const restarted = provider(dir).provider;
    expect(restarted.instances()[0]?.pid).toBeUndefined();
    await restarted.terminate([id]);
    expect(await waitDead(pid)).toBe(true);
  });

  it('an instance recorded before a crash that kept its worker from being spawned gets one at the next start, or when its launch is re-sent', async () => {
    const dir = join(tmp, 'spawn-crash');
    const { provider: p, spawner } = provider(dir);
    // The controller dies between recording each launch and spawning its worker.
    spawner.failNextSpawn = true;
    await expect(p.launch(request('s-1'))).rejects.toThrow(/killed before the spawn/);
    spawner.failNextSpawn = true;
    await expect(p.launch(request('s-2'))).rejects.toThrow(/killed before the spawn/);
    const [first, second] = p.instances().map((i) => i.instanceId) as [string, string];
    expect(p.instances().map((i) => i.pid)).toEqual([undefined, undefined]);

    // The restarted controller starts the first one's worker before its recovery adopts the instance by its token.
    const { provider: restarted, spawner: again } = provider(dir);
    expect(restarted.startUnstartedWorkers('beta')).toEqual([]);
    expect(restarted.startUnstartedWorkers('alpha')).toEqual([first, second]);
    expect(again.spawns).toBe(2);
    for (const id of [first, second]) {
      const pid = pidOf(restarted, id);
      expect(alive(pid)).toBe(true);
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toContain(id);
    }
    // Once started, never again: a second look and a re-sent launch find the worker running.
    expect(restarted.startUnstartedWorkers('alpha')).toEqual([]);
    expect(await restarted.launch(request('s-1'))).toMatchObject({
      instanceIds: [first],
      reusedExisting: true,
    });
    expect(again.spawns).toBe(2);

    // A launch re-sent with the token of a record without a worker starts it too.
    again.failNextSpawn = true;
    await expect(restarted.launch(request('s-3'))).rejects.toThrow(/killed before the spawn/);
    const third = restarted.instances().find((i) => i.tags[TAG_LAUNCH_TOKEN] === 's-3')?.instanceId;
    expect(await restarted.launch(request('s-3'))).toMatchObject({
      instanceIds: [third],
      reusedExisting: true,
    });
    expect(again.spawns).toBe(3);
    expect(alive(pidOf(restarted, third as string))).toBe(true);

    // Spawned, but its pid never recorded: the running worker is found and recorded, not started twice.
    const firstPid = pidOf(restarted, first);
    const { pid: _dropped, ...withoutPid } = restarted
      .instances()
      .find((i) => i.instanceId === first) as LocalInstance;
    new LocalInstanceFile(join(dir, 'local-instances.json')).write([withoutPid]);
    const once = provider(dir);
    expect(once.provider.startUnstartedWorkers('alpha')).toEqual([]);
    expect(once.spawner.spawns).toBe(0);
    expect(pidOf(once.provider, first)).toBe(firstPid);
  });

  it('lists an instance whose worker died as ended: when the worker recorded its exit, else when first seen gone once its grace ran out; its tasks stopped', async () => {
    const graceMs = 400;
    const { provider: p } = provider(join(tmp, 'dead-worker'), graceMs);
    const killed = (await p.launch(request('d-1'))).instanceIds[0] as string;
    const gaveUp = (await p.launch(request('d-2'))).instanceIds[0] as string;
    const live = (await p.launch(request('d-3'))).instanceIds[0] as string;
    const dirOf = (id: string): string => p.instances().find((i) => i.instanceId === id)?.dir as string;
    // A task the killed worker left running (process-executor tasks are process groups of their own).
    const executor = new ProcessExecutor({ stateDir: join(dirOf(killed), 'executor') });
    await executor.start({
      taskId: 'job-9.0',
      jobId: 'job-9',
      command: ['sleep', '60'],
      env: {},
      vcpus: 1,
      memoryGiB: 0,
      gpus: 0,
      shmSizeGiB: 0,
      checkpointDir: join(dirOf(killed), 'tasks', 'job-9.0', 'checkpoint'),
      progressFile: join(dirOf(killed), 'tasks', 'job-9.0', 'progress'),
      restoring: false,
    });
    writeFileSync(join(dirOf(killed), 'tasks', 'job-9.0', 'agent.json'), '{}');
    const taskPid = (
      JSON.parse(readFileSync(join(dirOf(killed), 'executor', 'job-9.0', 'pid.json'), 'utf8')) as {
        pid: number;
      }
    ).pid;
    // One worker killed outright; one that recorded its exit as a worker giving up does, then exited.
    const exitedAtMs = Date.now();
    writeFileSync(join(dirOf(gaveUp), WORKER_EXIT_FILE), JSON.stringify({ exitedAtMs, reason: 'gave-up' }));
    // One left empty by a power loss dates nothing, and fails nothing: the killed worker's instance ends when seen gone.
    writeFileSync(join(dirOf(killed), WORKER_EXIT_FILE), '');
    // A live worker with an exit record (an earlier worker's, say) is not taken for dead.
    writeFileSync(join(dirOf(live), WORKER_EXIT_FILE), JSON.stringify({ exitedAtMs, reason: 'gave-up' }));
    for (const id of [killed, gaveUp]) {
      killProcessGroups([pidOf(p, id)]);
      expect(await waitDead(pidOf(p, id))).toBe(true);
    }
    await new Promise((r) => setTimeout(r, 50));
    const lookedMs = Date.now();
    // The worker that gave up ends at once; the one that died without a word is given its grace to come back.
    expect((await p.list('alpha')).map((i) => i.instanceId).sort()).toEqual([killed, live].sort());
    const firstSeenMs = Date.now();
    await new Promise((r) => setTimeout(r, graceMs + 50));
    expect((await p.list('alpha')).map((i) => i.instanceId)).toEqual([live]);
    const listed = new Map(
      (await p.list('alpha', { includeTerminated: true })).map((i) => [i.instanceId, i]),
    );
    expect(listed.get(gaveUp)?.state).toBe('terminated');
    expect(listed.get(gaveUp)?.endedAt?.getTime()).toBe(exitedAtMs);
    expect(listed.get(killed)?.state).toBe('terminated');
    // Ended when first seen gone, not when its grace ran out.
    expect(listed.get(killed)?.endedAt?.getTime()).toBeGreaterThanOrEqual(lookedMs);
    expect(listed.get(killed)?.endedAt?.getTime()).toBeLessThanOrEqual(firstSeenMs);
    // Ended by its worker's death, not by EC2: a local spot instance is never taken for a reclaimed one.
    expect(listed.get(killed)?.endedBySpotInterruption).toBe(false);
    expect(listed.get(live)?.state).toBe('running');
    expect(alive(pidOf(p, live))).toBe(true);
    // Closed as a terminate closes it: nothing of the instance runs on unbilled.
    expect(await waitDead(taskPid)).toBe(true);
    // Seen by another provider object on the same file (a restarted controller) the same way.
    const reopened = new Map(
      (await provider(join(tmp, 'dead-worker')).provider.list('alpha', { includeTerminated: true })).map(
        (i) => [i.instanceId, i.endedAt?.getTime()],
      ),
    );
    expect(reopened.get(gaveUp)).toBe(exitedAtMs);
  });

  it('keeps an instance whose worker, dead without a word, is started again within its grace, recording its new pid', async () => {
    const { provider: p, spawner } = provider(join(tmp, 'restarted-worker'), 60_000);
    const id = (await p.launch(request('r-1'))).instanceIds[0] as string;
    const first = pidOf(p, id);
    killProcessGroups([first]);
    expect(await waitDead(first)).toBe(true);
    expect((await p.list('alpha')).map((i) => i.instanceId)).toEqual([id]);
    // Started again by hand (its saved credential would register it), as a supervisor restarts a worker on EC2.
    const again = spawner.spawn(p.instances().find((i) => i.instanceId === id) as LocalInstance) as number;
    expect((await p.list('alpha')).map((i) => i.instanceId)).toEqual([id]);
    expect(pidOf(p, id)).toBe(again);
    await p.terminate([id]);
    expect(await waitDead(again)).toBe(true);
  });

  it('state survives a provider restart: a new provider object finds the instances and their tokens', async () => {
    const dir = join(tmp, 'restart');
    const { provider: before } = provider(dir);
    const id = (await before.launch(request('r-1'))).instanceIds[0] as string;
    const gone = (await before.launch(request('r-2'))).instanceIds[0] as string;
    await before.terminate([gone]);
    const pid = pidOf(before, id);

    const { provider: after, spawner } = provider(dir); // a restarted controller
    expect((await after.list('alpha')).map((i) => i.instanceId)).toEqual([id]);
    expect((await after.list('alpha', { includeTerminated: true })).map((i) => i.instanceId).sort()).toEqual(
      [id, gone].sort(),
    );
    expect(pidOf(after, id)).toBe(pid);
    expect(alive(pid)).toBe(true); // the worker outlived the provider object
    const retried = await after.launch(request('r-1'));
    expect(retried).toMatchObject({ instanceIds: [id], reusedExisting: true });
    expect(spawner.spawns).toBe(0);
    await after.terminate([id]);
    expect(await waitDead(pid)).toBe(true);
    // A corrupt state file is an error naming the file, never an empty cluster.
    writeFileSync(join(dir, 'local-instances.json'), '{"version": 1, "instances": [{"instanceId": 3}]}');
    await expect(provider(dir).provider.list('alpha')).rejects.toThrow(/local-instances\.json/);
    await expect(provider(dir).provider.launch(request('r-3'))).rejects.toThrow(/instances\.0\.instanceId/);
  });
});

describe('goneGraceWithin', () => {
  it('keeps the whole grace at the local defaults and shrinks it to end inside a shorter heartbeat timeout', () => {
    // 10 s timeout, 1 s heartbeats, 2 s poll: 10 − 1 − 2 × 2 − 1 = 4 s left, over the 3 s grace.
    expect(goneGraceWithin({ heartbeatSeconds: 1, heartbeatTimeoutSeconds: 10, pollSeconds: 2 })).toBe(
      GONE_GRACE_MS,
    );
    // 7 s: 1 s left, the grace shrinks to it.
    expect(goneGraceWithin({ heartbeatSeconds: 1, heartbeatTimeoutSeconds: 7, pollSeconds: 2 })).toBe(1_000);
    // 5 s: nothing left, no grace: the first poll that sees the worker gone closes its instance.
    expect(goneGraceWithin({ heartbeatSeconds: 1, heartbeatTimeoutSeconds: 5, pollSeconds: 2 })).toBe(0);
    // EC2-like timing (60 s timeout, 15 s heartbeats and polls): the whole grace.
    expect(goneGraceWithin({ heartbeatSeconds: 15, heartbeatTimeoutSeconds: 60, pollSeconds: 15 })).toBe(
      GONE_GRACE_MS,
    );
  });
});
