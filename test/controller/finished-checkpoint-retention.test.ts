import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import {
  CHECKPOINTS_DELETED_EVENT,
  FINISHED_CHECKPOINTS_PROGRESS_KEY,
  FinishedCheckpointRetention,
} from '../../src/controller/finished-checkpoint-retention.js';
import type { ControllerLogger } from '../../src/controller/seams.js';
import { settingsFromConfig } from '../../src/controller/settings.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobState, StateStore } from '../../src/controller/state-store.js';
import { ValidationError } from '../../src/core/validation.js';
import { checkpointKeys, jobCheckpointsPrefix, taskExitKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { createS3Client, S3ObjectStore } from '../../src/storage/s3-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { startS3FaultProxy, type S3FaultProxy } from '../helpers/s3-fault-proxy.js';
import { CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

const DAY = 86_400;
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-finished-checkpoints-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let opened = 0;
const stateStores: StateStore[] = [];
afterEach(() => {
  for (const store of stateStores.splice(0)) store.close();
});

interface LogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly message: string;
  readonly data: Record<string, unknown> | undefined;
}

/** Keeps what the retention logs, to read its figures back. */
class RecordingLogger implements ControllerLogger {
  readonly lines: LogLine[] = [];
  info(message: string, data?: Record<string, unknown>): void {
    this.lines.push({ level: 'info', message, data });
  }
  warn(message: string, data?: Record<string, unknown>): void {
    this.lines.push({ level: 'warn', message, data });
  }
  error(message: string, data?: Record<string, unknown>): void {
    this.lines.push({ level: 'error', message, data });
  }
  passes(): (Record<string, unknown> | undefined)[] {
    return this.lines.filter((l) => l.level === 'info').map((l) => l.data);
  }
}

/** An object store, and a way to make it fail on one job's checkpoints (as a disk or S3 failing there would). */
interface FaultyObjects {
  readonly store: ObjectStore;
  breakJob(jobId: string): void;
  healJob(jobId: string): void;
}

/** A task's two checkpoints and its exit record: five objects. */
async function putCheckpoints(objects: ObjectStore, jobId: string): Promise<void> {
  const ref = { jobId, taskId: `${jobId}.0` };
  for (const seq of [1, 2]) {
    const keys = checkpointKeys(ref, seq);
    await objects.put(keys.data, Buffer.from(`data ${seq}`));
    await objects.put(keys.manifest, Buffer.from('{}'));
  }
  await objects.put(taskExitKey(ref, 1), Buffer.from('{"exitCode":0}'));
}

async function keysOf(objects: ObjectStore, jobId: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of objects.list(jobCheckpointsPrefix(jobId))) keys.push(o.key);
  return keys;
}

function submit(store: StateStore): string {
  return store.submitJob(jobSpec('train', CPU_SMALL)).id;
}

function end(store: StateStore, id: string, state: JobState): void {
  if (state === 'succeeded') {
    store.setJobState(id, 'starting');
    store.setJobState(id, 'running');
  }
  store.setJobState(id, state);
}

function records(store: StateStore, jobId?: string): { jobId: string | undefined; objects: unknown }[] {
  return store
    .listEvents({ kind: CHECKPOINTS_DELETED_EVENT, jobId })
    .map((e) => ({ jobId: e.jobId, objects: (e.data as { objects: unknown }).objects }));
}

/** What every object store must do with a finished job's checkpoints. */
function retentionContract(open: () => Promise<FaultyObjects>): void {
  async function setup(options: { days?: number; jobsPerPass?: number } = {}) {
    const clock = new ManualClock();
    const dir = join(scratch, `state-${++opened}`);
    mkdirSync(dir);
    const store = new SqliteStateStore(join(dir, 'state.db'), { nowSeconds: () => clock.nowSeconds() });
    stateStores.push(store);
    const objects = await open();
    const log = new RecordingLogger();
    /** A retention as a (re)started controller builds it. */
    const make = (): FinishedCheckpointRetention =>
      new FinishedCheckpointRetention({
        store,
        clock,
        log,
        objectStore: objects.store,
        settings: { finishedCheckpointDays: options.days, dryRun: false },
        jobsPerPass: options.jobsPerPass,
      });
    return { clock, store, objects, log, make };
  }

  async function pass(retention: FinishedCheckpointRetention): Promise<void> {
    retention.afterRound();
    await retention.settle();
  }

  it('deletes the checkpoints of jobs that ended over 30 days ago, in every final state, and only theirs', async () => {
    const { clock, store, objects, log, make } = await setup();
    const ids = Array.from({ length: 10 }, () => submit(store));
    expect(ids[0]).toBe('job-1');
    expect(ids[9]).toBe('job-10');
    end(store, 'job-1', 'cancelled');
    end(store, 'job-4', 'failed');
    end(store, 'job-5', 'unsuccessful');
    end(store, 'job-6', 'succeeded');
    // Live: running, and retried after a failed attempt (queued again, not finished).
    store.setJobState('job-2', 'starting');
    store.setJobState('job-2', 'running');
    store.setJobState('job-3', 'starting');
    store.setJobState('job-3', 'running');
    store.retryJob('job-3', { taskId: 'job-3.0', exitCode: 1, reason: 'exit 1' }, 'retrying');
    expect(store.getJob('job-3')?.state).toBe('queued');
    clock.advance(2 * DAY);
    // job-10 shares job-1's name as a prefix, and ended two days later.
    end(store, 'job-10', 'succeeded');
    for (const id of ['job-1', 'job-2', 'job-3', 'job-4', 'job-5', 'job-6', 'job-10'])
      await putCheckpoints(objects.store, id);
    clock.advance(29 * DAY + 60);

    const retention = make();
    await pass(retention);
    for (const id of ['job-1', 'job-4', 'job-5', 'job-6'])
      expect(await keysOf(objects.store, id)).toEqual([]);
    for (const id of ['job-2', 'job-3', 'job-10']) expect(await keysOf(objects.store, id)).toHaveLength(5);
    expect(records(store)).toEqual(
      ['job-1', 'job-4', 'job-5', 'job-6'].map((jobId) => ({ jobId, objects: 5 })),
    );
    expect(log.passes()).toEqual([{ jobs: 4, objects: 20, failed: 0, olderThanDays: 30 }]);

    // Two days on, job-10 too has been over for 30 days; the live jobs keep theirs.
    clock.advance(2 * DAY);
    await pass(retention);
    expect(await keysOf(objects.store, 'job-10')).toEqual([]);
    for (const id of ['job-2', 'job-3']) expect(await keysOf(objects.store, id)).toHaveLength(5);
    expect(records(store, 'job-10')).toEqual([{ jobId: 'job-10', objects: 5 }]);
    expect(log.passes().at(-1)).toMatchObject({ jobs: 1, objects: 5 });
  });

  it('keeps every checkpoint with finishedCheckpointDays 0', async () => {
    const { clock, store, objects, log, make } = await setup({ days: 0 });
    end(store, submit(store), 'cancelled');
    await putCheckpoints(objects.store, 'job-1');
    clock.advance(400 * DAY);
    await pass(make());
    expect(await keysOf(objects.store, 'job-1')).toHaveLength(5);
    expect(records(store)).toEqual([]);
    expect(store.getValue(FINISHED_CHECKPOINTS_PROGRESS_KEY)).toBeUndefined();
    expect(log.lines).toEqual([]);
  });

  it('never lists a job it recorded again: not in the next pass, nor after a restart that lost its place', async () => {
    const { clock, store, objects, log, make } = await setup();
    end(store, submit(store), 'failed');
    await putCheckpoints(objects.store, 'job-1');
    clock.advance(31 * DAY);
    await pass(make());
    expect(await keysOf(objects.store, 'job-1')).toEqual([]);
    expect(records(store)).toEqual([{ jobId: 'job-1', objects: 5 }]);
    // An object put there since (by hand, say): a pass that listed the prefix again would delete it.
    const stray = checkpointKeys({ jobId: 'job-1', taskId: 'job-1.0' }, 9).data;
    await objects.store.put(stray, Buffer.from('stray'));

    clock.advance(3600);
    const restarted = make();
    await pass(restarted);
    expect(await keysOf(objects.store, 'job-1')).toEqual([stray]);
    clock.advance(3600);
    store.deleteValue(FINISHED_CHECKPOINTS_PROGRESS_KEY);
    await pass(make());
    expect(await keysOf(objects.store, 'job-1')).toEqual([stray]);
    expect(records(store)).toEqual([{ jobId: 'job-1', objects: 5 }]);
    expect(log.passes().map((p) => p?.['jobs'])).toEqual([1, 0, 0]);
  });

  it('leaves a job the store fails on unrecorded, clears the others, and clears it the next pass', async () => {
    const { clock, store, objects, log, make } = await setup();
    for (let i = 0; i < 3; i += 1) end(store, submit(store), 'cancelled');
    for (const id of ['job-1', 'job-2', 'job-3']) await putCheckpoints(objects.store, id);
    objects.breakJob('job-2');
    clock.advance(31 * DAY);
    const retention = make();
    await pass(retention);
    expect(await keysOf(objects.store, 'job-1')).toEqual([]);
    expect(await keysOf(objects.store, 'job-3')).toEqual([]);
    expect(records(store).map((r) => r.jobId)).toEqual(['job-1', 'job-3']);
    const warned = log.lines.filter((l) => l.level === 'warn');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.data).toMatchObject({ job: 'job-2' });
    expect(log.passes()).toEqual([{ jobs: 2, objects: 10, failed: 1, olderThanDays: 30 }]);

    objects.healJob('job-2');
    expect(await keysOf(objects.store, 'job-2')).toHaveLength(5);
    clock.advance(3600);
    await pass(retention);
    expect(await keysOf(objects.store, 'job-2')).toEqual([]);
    expect(records(store, 'job-2')).toEqual([{ jobId: 'job-2', objects: 5 }]);
    expect(log.passes().at(-1)).toMatchObject({ jobs: 1, objects: 5, failed: 0 });
  });

  it('ends a pass after three jobs failing in a row, and the next pass takes them and the rest', async () => {
    const { clock, store, objects, log, make } = await setup();
    for (let i = 0; i < 5; i += 1) end(store, submit(store), 'cancelled');
    for (let i = 1; i <= 5; i += 1) await putCheckpoints(objects.store, `job-${i}`);
    for (const id of ['job-1', 'job-2', 'job-3']) objects.breakJob(id);
    clock.advance(31 * DAY);
    const retention = make();
    await pass(retention);
    expect(log.lines.filter((l) => l.level === 'warn').map((l) => l.data?.['job'])).toEqual([
      'job-1',
      'job-2',
      'job-3',
    ]);
    // job-4 and job-5 were not tried.
    for (const id of ['job-4', 'job-5']) expect(await keysOf(objects.store, id)).toHaveLength(5);
    expect(records(store)).toEqual([]);
    expect(log.passes()).toEqual([{ jobs: 0, objects: 0, failed: 3, olderThanDays: 30 }]);

    for (const id of ['job-1', 'job-2', 'job-3']) objects.healJob(id);
    clock.advance(3600);
    await pass(retention);
    expect(records(store).map((r) => r.jobId)).toEqual(['job-1', 'job-2', 'job-3', 'job-4', 'job-5']);
    for (let i = 1; i <= 5; i += 1) expect(await keysOf(objects.store, `job-${i}`)).toEqual([]);
  });

  it('clears a bounded number of jobs a pass, one pass at a time, the next at once while more are due', async () => {
    const { clock, store, objects, log, make } = await setup({ jobsPerPass: 2 });
    for (let i = 0; i < 5; i += 1) end(store, submit(store), 'cancelled');
    for (let i = 1; i <= 5; i += 1) await putCheckpoints(objects.store, `job-${i}`);
    clock.advance(31 * DAY);
    const retention = make();
    retention.afterRound();
    // Due again at once (more are left), but the first pass is still under way: not started twice.
    retention.afterRound();
    await retention.settle();
    expect(records(store).map((r) => r.jobId)).toEqual(['job-1', 'job-2']);
    expect(log.passes()).toHaveLength(1);
    expect(await keysOf(objects.store, 'job-3')).toHaveLength(5);
    await pass(retention);
    await pass(retention);
    expect(records(store).map((r) => r.jobId)).toEqual(['job-1', 'job-2', 'job-3', 'job-4', 'job-5']);
    for (let i = 1; i <= 5; i += 1) expect(await keysOf(objects.store, `job-${i}`)).toEqual([]);
    // Nothing left over: the next pass is an hour away.
    await pass(retention);
    expect(log.passes().map((p) => p?.['jobs'])).toEqual([2, 2, 1]);
  });
}

describe('finished job checkpoints in a filesystem store', () => {
  retentionContract(() => {
    const n = ++opened;
    const root = join(scratch, `objects-${n}`);
    const aside = join(scratch, `aside-${n}`);
    mkdirSync(aside);
    const dirOf = (jobId: string): string => join(root, 'checkpoints', jobId);
    return Promise.resolve({
      store: new FsObjectStore(root),
      // The job's directory replaced by a link to itself: reading it fails (ELOOP), as a failing disk would.
      breakJob: (jobId) => {
        renameSync(dirOf(jobId), join(aside, jobId));
        symlinkSync(jobId, dirOf(jobId));
      },
      healJob: (jobId) => {
        unlinkSync(dirOf(jobId));
        renameSync(join(aside, jobId), dirOf(jobId));
      },
    });
  });
});

const BUCKET = 'fleetwise-finished-checkpoints';

describeWithMoto(
  'finished job checkpoints in S3',
  (moto) => {
    let proxy: S3FaultProxy;
    let client: S3Client;
    beforeAll(async () => {
      proxy = await startS3FaultProxy(moto.endpoint);
      client = createS3Client({ ...moto.clientOptions, endpoint: proxy.url });
      await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
    });
    afterAll(async () => {
      client.destroy();
      await proxy.close();
    });
    retentionContract(() => {
      proxy.failingPaths.clear();
      return Promise.resolve({
        // Each test in its own prefix of the bucket.
        store: new S3ObjectStore(client, BUCKET, `cluster-${++opened}/`, { listPageSize: 3 }),
        breakJob: (jobId) => proxy.failingPaths.add(jobCheckpointsPrefix(jobId)),
        healJob: (jobId) => proxy.failingPaths.delete(jobCheckpointsPrefix(jobId)),
      });
    });
  },
  { resetBeforeEach: false },
);

describe('finished job checkpoints in the controller', () => {
  /** The controller's config from a file with these lines (local provider). */
  function configFrom(lines: string): ReturnType<typeof loadControllerConfig> {
    const path = join(scratch, 'fleetwise.yaml');
    writeFileSync(path, `provider: local\ncluster: t\nregion: us-east-1\n${lines}`);
    return loadControllerConfig({ flags: { config: path, stateDir: 'state' }, cwd: scratch, env: {} });
  }

  it('is configured by finishedCheckpointDays: 30 days unless it says, 0 keeps them, never negative', () => {
    expect(settingsFromConfig(configFrom('')).finishedCheckpointDays).toBe(30);
    expect(settingsFromConfig(configFrom('finishedCheckpointDays: 0\n')).finishedCheckpointDays).toBe(0);
    expect(settingsFromConfig(configFrom('finishedCheckpointDays: 7\n')).finishedCheckpointDays).toBe(7);
    let problems: readonly string[] = [];
    try {
      configFrom('finishedCheckpointDays: -1\n');
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      problems = e.problems;
    }
    expect(problems).toEqual(['finishedCheckpointDays (line 4): must be ≥ 0']);
  });

  it('deletes them after a round, beside the loop, and a stop waits for the pass; a dry run deletes nothing', async () => {
    for (const dryRun of [false, true]) {
      const objectStore = new FsObjectStore(join(scratch, `controller-objects-${++opened}`));
      const r = rig({ dryRun }, { objectStore });
      const job = r.store.submitJob(jobSpec('train', CPU_SMALL)).id;
      r.store.setJobState(job, 'cancelled');
      await putCheckpoints(objectStore, job);
      r.clock.advance(31 * DAY);
      await r.controller.runRound('test');
      await r.controller.stop();
      expect(await keysOf(objectStore, job)).toHaveLength(dryRun ? 5 : 0);
      expect(records(r.store, job)).toEqual(dryRun ? [] : [{ jobId: job, objects: 5 }]);
    }
  });
});
