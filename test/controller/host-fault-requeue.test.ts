import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { jobSummary } from '../../src/controller/api/views.js';
import { ManualClock } from '../../src/controller/clock.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import {
  HOST_FAULT_EVENT,
  MAX_HOST_FAULT_REQUEUES,
} from '../../src/controller/reconcile/effects/host-faults.js';
import type { InstanceRecord, JobRecord, StateStore, TaskRecord } from '../../src/controller/state-store.js';
import { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';
import type { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { launchSecretFor } from '../../src/protocol/launch-secret.js';
import { checkpointKeys } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { uploadCheckpoint } from '../../src/worker/checkpoints.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { SavedCredential } from '../../src/worker/saved-credential.js';
import {
  BASE_SETTINGS,
  catalog,
  CPU_SMALL,
  FakeCloud,
  rig,
  workerTaskControlFor,
  type Rig,
} from './controller-fixtures.js';

/**
 * A task whose start fails because of its worker's host, not its job (the worker reports `hostFault`: here restoring
 * its checkpoint on a full disk), uses none of its job's attempts: the job is queued again as it was, the instance is
 * drained so the next round places it elsewhere, and the job's owner hears why. Bounded: a job whose checkpoint fits
 * no worker's disk fails once it was placed again MAX_HOST_FAULT_REQUEUES times, and a controller restarted meanwhile
 * keeps the count. A failure of the job's own still fails it.
 *
 * Real workers (WorkerAgent, the process executor) talk to the controller over its HTTP worker protocol; the cloud is
 * the controller tests' fake. A 1 MiB tmpfs is the workers' full disk (tests run as root, as the restore-disk tests
 * do): a 1.5 MiB checkpoint cannot be restored there, with ENOSPC as on a real full disk.
 */

const KEY = 'host-fault-cluster-key-0123456789';
const ADMIN = 'host-fault-admin-token-0123456789';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-host-fault-'));
const objects = join(scratch, 'objects');
const small = join(scratch, 'small');
const roomy = join(scratch, 'roomy');
const servers: ApiServer[] = [];

beforeAll(() => {
  mkdirSync(small);
  mkdirSync(roomy);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'fleetwise-host-fault-disk', small]);
});
afterAll(async () => {
  for (const s of servers) await s.close();
  execFileSync('umount', [small]);
  rmSync(scratch, { recursive: true, force: true });
});

/** A controller process over `store`: its worker protocol served over HTTP, workers proving their instance. */
interface ControllerProcess {
  readonly r: Rig;
  readonly workers: WorkerTaskControl;
  readonly url: string;
}

async function controllerOver(
  store: StateStore,
  clock: ManualClock,
  cloud: FakeCloud,
  coStart = false,
): Promise<ControllerProcess> {
  const clusterName = BASE_SETTINGS.clusterName;
  const workers = workerTaskControlFor(store, clock, {
    objectStoreLocation: objects,
    coStart,
    registrar: new WorkerRegistrar({
      store,
      clusterName,
      clusterKey: KEY,
      describeInstance: async (cloudId) =>
        (await cloud.list(clusterName)).find((i) => i.instanceId === cloudId),
      launchCredential: { kind: 'launch-secret' },
    }),
  });
  const r = rig({}, { store, clock, cloud, tasks: workers, workers });
  const server = await startApiServer(r.controller, {
    listen: '127.0.0.1:0',
    adminToken: ADMIN,
    catalog,
    workers,
  });
  servers.push(server);
  return { r, workers, url: server.url };
}

/** The worker of `inst`, its work directory on `disk`, registered with its launch secret. */
async function workerOn(p: ControllerProcess, inst: InstanceRecord, disk: string): Promise<WorkerAgent> {
  const workDir = join(disk, inst.id);
  const cloudId = inst.cloudId as string;
  const agent = new WorkerAgent({
    connection: new ControllerClient(p.url),
    credentials: {
      launch: launchSecretCredential(launchSecretFor(KEY, inst.launchToken)),
      saved: new SavedCredential(workDir, cloudId),
    },
    executor: new ProcessExecutor({ stateDir: join(scratch, 'executors', inst.id) }),
    openStore: (location) => new FsObjectStore(location),
    cloudInstanceId: cloudId,
    workDir,
  });
  await agent.register();
  return agent;
}

function spec(name: string, command: string[], replicas = 1): JobSpec {
  return validateJobSpec(
    {
      name,
      team: 'research',
      tasks: [{ name: 'main', image: 'busybox:latest', command, demand: CPU_SMALL, replicas }],
    },
    name,
    catalog,
  );
}

/** Give each task of `job` a stored checkpoint with 1.5 MiB of weights, recorded as its latest. */
async function bigCheckpoints(store: StateStore, job: JobRecord): Promise<void> {
  const objectStore = new FsObjectStore(objects);
  for (const task of store.listTasks({ jobId: job.id })) {
    const src = join(scratch, 'checkpoints', task.id);
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, 'weights.bin'), randomBytes(1536 * 1024));
    const ref = { jobId: job.id, taskId: task.id };
    await uploadCheckpoint(objectStore, ref, src, 1);
    store.recordCheckpoint(task.id, checkpointKeys(ref, 1).manifest);
  }
}

/** The instances the job's pending starts go to, once a round placed it and the cloud runs them. */
async function placed(p: ControllerProcess, job: JobRecord): Promise<InstanceRecord[]> {
  await p.r.controller.runRound('test');
  await p.r.controller.reconcile();
  const taskIds = new Set(p.r.store.listTasks({ jobId: job.id }).map((t) => t.id));
  const targets = new Set<string>();
  for (const i of p.r.store.listIntents({ states: ['pending'], kind: 'start-task' }))
    if (i.kind === 'start-task' && taskIds.has(i.payload.taskId)) targets.add(i.payload.instanceId);
  // Placed again where its worker already runs: started there at once.
  for (const t of p.r.store.listTasks({ jobId: job.id }))
    if (t.instanceId !== undefined && (t.state === 'starting' || t.state === 'running'))
      targets.add(t.instanceId);
  const instances = [...targets].map((id) => p.r.store.getInstance(id) as InstanceRecord);
  expect(instances.length).toBeGreaterThan(0);
  for (const inst of instances) expect(inst.state).toBe('running');
  return instances;
}

/**
 * Why the instance was drained while it ran (its `instance.state` event), if it was; and it is not schedulable
 * since (draining, or terminated once empty).
 */
function drainOf(store: StateStore, instanceId: string): string | undefined {
  const drain = store
    .listEvents({ instanceId, kind: 'instance.state' })
    .map((e) => e.data as { from?: string; to?: string; reason?: string })
    .find((d) => d.from === 'running' && d.to === 'draining');
  if (drain === undefined) return undefined;
  expect(['draining', 'terminating', 'terminated']).toContain(store.getInstance(instanceId)?.state);
  return drain.reason;
}

function taskOf(store: StateStore, taskId: string): TaskRecord {
  const task = store.getTask(taskId);
  if (task === undefined) throw new Error(`no task ${taskId}`);
  return task;
}

/** The task's worker reported it failed (the controller knows why). */
function failed(p: ControllerProcess, taskId: string): boolean {
  return p.workers.failureReason(taskOf(p.r.store, taskId)) !== undefined;
}

/** Heartbeats of `agents` (each waiting for what its answer started) until `done` holds; then a reconcile pass. */
async function beatUntil(
  p: ControllerProcess,
  agents: readonly WorkerAgent[],
  what: string,
  done: () => boolean,
): Promise<void> {
  for (let i = 0; ; i++) {
    for (const agent of agents) {
      await agent.tick();
      await agent.settle();
    }
    if (done()) break;
    if (i > 200) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  await p.r.controller.reconcile();
}

describe('a task that cannot start because of its worker host', () => {
  it('queues its job again without using an attempt, the instance kept for a full disk; past the bound the job fails, a restart keeping the count', async () => {
    const clock = new ManualClock();
    const cloud = new FakeCloud();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    let p = await controllerOver(store, clock, cloud);
    const job = p.r.controller.submit(spec('restores', ['sh', '-c', 'sleep 30']), 'research');
    expect(job.spec.retryStrategy).toBeUndefined();
    await bigCheckpoints(store, job);
    const taskId = `${job.id}.0`;
    const agents = new Map<string, WorkerAgent>();

    for (let requeue = 1; requeue <= MAX_HOST_FAULT_REQUEUES + 1; requeue++) {
      if (requeue === 3) {
        // A new controller process over the same store: nothing it knew in memory, the count in the store.
        p = await controllerOver(store, clock, cloud);
        await p.r.controller.recover();
        agents.clear(); // workers of the new controller (its own URL), over the same work directories
      }
      const [inst] = await placed(p, store.getJob(job.id) as JobRecord);
      if (inst === undefined) throw new Error('not placed');
      // A full disk leaves the instance in service: the job may be placed there again.
      const agent = agents.get(inst.id) ?? (await workerOn(p, inst, small));
      agents.set(inst.id, agent);
      await p.r.controller.reconcile(); // its worker registered: the task starts there
      expect(store.getTask(taskId)).toMatchObject({ state: 'running', instanceId: inst.id });
      await beatUntil(p, [agent], 'the failed start to be reported', () => failed(p, taskId));
      expect(p.workers.failureReason(taskOf(store, taskId))).toMatch(/this worker's disk failed \(ENOSPC/);
      expect(p.workers.hostFault(taskOf(store, taskId))).toBe('space');
      const after = store.getJob(job.id) as JobRecord;
      if (requeue > MAX_HOST_FAULT_REQUEUES) {
        // Past the bound: an ordinary failure, and the job has no retryStrategy (its one attempt is the fourth run).
        expect(after).toMatchObject({ state: 'failed', attempts: MAX_HOST_FAULT_REQUEUES + 1 });
        expect(jobSummary(after, 1, store)).toMatchObject({
          attempts: MAX_HOST_FAULT_REQUEUES + 1,
          maxAttempts: MAX_HOST_FAULT_REQUEUES + 1,
        });
        expect(after.reason).toMatch(
          new RegExp(
            `^task ${taskId} failed: could not start: restoring checkpoint 1 of ${taskId}: this worker's disk ` +
              `failed \\(ENOSPC.*\\(its instance ${inst.id}'s host was at fault, and the job was already placed ` +
              `again ${MAX_HOST_FAULT_REQUEUES} times for host faults`,
            's',
          ),
        );
        expect(store.listEvents({ jobId: job.id, kind: HOST_FAULT_EVENT })).toHaveLength(
          MAX_HOST_FAULT_REQUEUES,
        );
        break;
      }
      // Queued again for a new run, which its retryStrategy does not count: the job view says one more run than the
      // one attempt it has. The failed run is recorded as the host's; its task is to be placed anew.
      expect(after).toMatchObject({ state: 'queued', attempts: requeue + 1 });
      expect(jobSummary(after, 1, store)).toMatchObject({ attempts: requeue + 1, maxAttempts: requeue + 1 });
      expect(after.attemptFailures?.at(-1)).toMatchObject({ attempt: requeue, taskId });
      expect(after.attemptFailures?.at(-1)?.reason).toMatch(
        new RegExp(`^host fault on ${inst.id}: could not start`),
      );
      expect(store.getTask(taskId)?.state).toBe('pending');
      // Short of space for this job's checkpoint only: the instance stays in service.
      expect(drainOf(store, inst.id)).toBeUndefined();
      expect(store.getInstance(inst.id)?.state).toBe('running');
      // The event and the job's warning name the instance and why.
      const events = store.listEvents({ jobId: job.id, kind: HOST_FAULT_EVENT });
      expect(events).toHaveLength(requeue);
      expect(events.at(-1)).toMatchObject({
        taskId,
        instanceId: inst.id,
        data: { requeue, attempt: requeue + 1, fault: 'space' },
      });
      expect(events.at(-1)?.message).toMatch(
        new RegExp(
          `^task ${taskId} could not start on ${inst.id} because of the instance's host, not the job: could not ` +
            `start: restoring checkpoint 1 of ${taskId}: this worker's disk failed \\(ENOSPC.*; queued again ` +
            `without using an attempt \\(run ${requeue + 1}, host fault ${requeue} of at most ` +
            `${MAX_HOST_FAULT_REQUEUES}\\), ${inst.id} kept \\(short of space for this job\\)$`,
          's',
        ),
      );
      const warnings = jobSummary(after, 1, store).warnings;
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        new RegExp(
          `^host fault: task ${taskId} could not start on ${inst.id} \\(could not start: restoring checkpoint .*ENOSPC.*\\); ` +
            `queued again without using an attempt \\(host fault ${requeue} of at most ` +
            `${MAX_HOST_FAULT_REQUEUES}\\), ${inst.id} kept \\(short of space for this job\\)$`,
          's',
        ),
      );
      clock.advance(5);
    }
  });

  it('queues a co-started job again when one of its held tasks cannot be prepared on its host', async () => {
    const clock = new ManualClock();
    const cloud = new FakeCloud();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const p = await controllerOver(store, clock, cloud, true);
    const job = p.r.controller.submit(spec('gang', ['sh', '-c', 'sleep 30'], 2), 'research');
    await bigCheckpoints(store, job);
    const instances = await placed(p, job);
    // The tasks are prepared and held (co-start), each on a worker with a full disk.
    const agents = await Promise.all(instances.map((inst) => workerOn(p, inst, small)));
    await p.r.controller.reconcile();
    await beatUntil(p, agents, 'a held task to fail', () =>
      store.listTasks({ jobId: job.id }).some((t) => failed(p, t.id)),
    );
    expect(store.getJob(job.id)).toMatchObject({ state: 'queued', attempts: 2 });
    const events = store.listEvents({ jobId: job.id, kind: HOST_FAULT_EVENT });
    expect(events).toHaveLength(1);
    const faulted = events[0]?.instanceId as string;
    expect(instances.map((i) => i.id)).toContain(faulted);
    expect(drainOf(store, faulted)).toBeUndefined();
    // Every task goes back to be placed anew, its held start over.
    expect(store.listTasks({ jobId: job.id }).map((t) => t.state)).toEqual(['pending', 'pending']);
    expect(store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
  });

  it('still fails a job with no retryStrategy on a failure of its own, its instance kept', async () => {
    const clock = new ManualClock();
    const cloud = new FakeCloud();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const p = await controllerOver(store, clock, cloud);
    const job = p.r.controller.submit(spec('exits', ['sh', '-c', 'exit 3']), 'research');
    const [inst] = await placed(p, job);
    if (inst === undefined) throw new Error('not placed');
    const agent = await workerOn(p, inst, roomy);
    await p.r.controller.reconcile();
    const taskId = `${job.id}.0`;
    await beatUntil(p, [agent], 'the exit to be reported', () => failed(p, taskId));
    // Reported as the job's failure, not its host's.
    expect(p.workers.hostFault(taskOf(p.r.store, taskId))).toBeUndefined();
    expect(store.getJob(job.id)).toMatchObject({
      state: 'failed',
      attempts: 1,
      reason: `task ${taskId} failed: exit code 3`,
    });
    expect(store.getInstance(inst.id)?.state).toBe('running');
    expect(drainOf(store, inst.id)).toBeUndefined();
    expect(store.listEvents({ jobId: job.id, kind: HOST_FAULT_EVENT })).toEqual([]);
  });
});

describe('a host that can start nothing', () => {
  /** A job started on a fresh instance whose worker then reports its start failed: the host broken. */
  async function brokenStart(earlierHostFaults: number) {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const workers = workerTaskControlFor(store, clock, { objectStoreLocation: objects });
    const r = rig({}, { store, clock, tasks: workers, workers });
    const job = r.controller.submit(spec('broken-host', ['sh', '-c', 'sleep 30']), 'research');
    await r.controller.runRound('test');
    await r.controller.reconcile();
    const token = 'worker-token-host-fault-0123456789abcdef';
    for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token);
    await r.controller.reconcile();
    const task = taskOf(store, `${job.id}.0`);
    expect(task.state).toBe('running');
    const instanceId = task.instanceId as string;
    for (let i = 0; i < earlierHostFaults; i++)
      store.appendEvent({
        kind: HOST_FAULT_EVENT,
        jobId: job.id,
        message: `an earlier host fault (${i + 1})`,
      });
    // What the worker's heartbeat says of a start its engine refused (src/worker/host-fault.ts: `broken`).
    workers.heartbeat(token, {
      tasks: [
        {
          taskId: task.id,
          state: 'failed',
          attempt: 1,
          hostFault: 'broken',
          reason: 'could not start: connect ENOENT /var/run/docker.sock',
        },
      ],
    });
    await r.controller.reconcile();
    return { store, job, task, instanceId };
  }

  it('is drained when its worker reports it broken (a failing disk, an engine down), the job queued again', async () => {
    const { store, job, task, instanceId } = await brokenStart(0);
    expect(store.getJob(job.id)).toMatchObject({ state: 'queued', attempts: 2 });
    expect(drainOf(store, instanceId)).toBe(
      `host fault: task ${task.id} could not start there: could not start: connect ENOENT /var/run/docker.sock`,
    );
    expect(store.listEvents({ jobId: job.id, kind: HOST_FAULT_EVENT })[0]).toMatchObject({
      instanceId,
      data: { requeue: 1, fault: 'broken' },
    });
  });

  it('is drained too once the job has used its host-fault runs, though the job then fails', async () => {
    const { store, job, task, instanceId } = await brokenStart(MAX_HOST_FAULT_REQUEUES);
    expect(store.getJob(job.id)?.state).toBe('failed');
    expect(drainOf(store, instanceId)).toBe(
      `host fault: task ${task.id} could not start there: could not start: connect ENOENT /var/run/docker.sock`,
    );
  });
});
