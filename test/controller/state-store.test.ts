import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { sqlDatabasesForFile } from '../helpers/postgres.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import {
  LATEST_SCHEMA_VERSION,
  MIGRATIONS,
  MIGRATIONS_TABLE_SQL,
} from '../../src/controller/state/sqlite-schema.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import {
  IllegalTransitionError,
  SchemaVersionError,
  StateStoreError,
  StateStoreFaultError,
  UnknownRecordError,
  type JobRecord,
  type JobState,
  type JsonValue,
  type RoundInput,
  type StateStore,
} from '../../src/controller/state-store.js';

const catalog = loadCatalogFile();
const spec = (file: string): JobSpec =>
  parseJobSpec(readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', file), 'utf8'), file, catalog);
const RESNET = spec('resnet.yaml');
const DDP = spec('resnet-ddp.yaml'); // two gang tasks
const FOAM = spec('openfoam.yaml');

// A scratch directory and one PostgreSQL server (Debian's) for the file; each store gets a file or schema of its own.
const databases = sqlDatabasesForFile('state');
const freshDbPath = (): string => databases.sqlitePath();
const freshPostgresUrl = (): string => databases.postgresUrl();

function round(n: number): RoundInput {
  return {
    configuration: {
      instances: [{ id: 'inst-1', typeName: 'p3.2xlarge', isNew: false, taskIds: [`job-${n}.0`] }],
    },
    decision: {
      scheduler: 'eva',
      nowSeconds: n,
      candidates: [],
      chosen: 'partial',
      reason: `round ${n}`,
      waiting: [],
      pinned: [],
    },
  };
}

type Factory = (nowSeconds: () => number) => StateStore;
const implementations: readonly (readonly [string, Factory])[] = [
  ['MemoryStateStore', (nowSeconds) => new MemoryStateStore({ nowSeconds, storeId: 'test' })],
  ['SqliteStateStore', (nowSeconds) => new SqliteStateStore(freshDbPath(), { nowSeconds })],
  ['PostgresStateStore', (nowSeconds) => new PostgresStateStore(freshPostgresUrl(), { nowSeconds })],
];

describe.each(implementations)('%s (StateStore contract)', (_name, make) => {
  let clock = 1000;
  let store: StateStore;
  beforeEach(() => {
    clock = 1000;
    store?.close();
    store = make(() => clock);
  });

  describe('jobs and tasks', () => {
    it('submits a job as queued with one pending task per expanded task, and logs it', () => {
      const job = store.submitJob(DDP);
      expect(job).toMatchObject({
        id: 'job-1',
        name: 'resnet18-ddp',
        team: 'vision',
        state: 'queued',
        submittedAtSeconds: 1000,
        completedIterations: 0,
        totalIterations: 5050,
        migrations: 0,
      });
      expect(job.spec).toEqual(DDP);
      expect(
        store.listTasks({ jobId: job.id }).map((t) => [t.id, t.index, t.name, t.workloadKey, t.state]),
      ).toEqual([
        ['job-1.0', 0, 'worker-0', 'resnet18-ddp', 'pending'],
        ['job-1.1', 1, 'worker-1', 'resnet18-ddp', 'pending'],
      ]);
      expect(store.listEvents({ jobId: job.id })).toEqual([
        expect.objectContaining({
          kind: 'job.submitted',
          atSeconds: 1000,
          data: { name: 'resnet18-ddp', team: 'vision', tasks: 2 },
        }),
      ]);
      expect(store.submitJob(RESNET).id).toBe('job-2');
    });

    it('lists jobs in submission order, filtered by state and team', () => {
      const a = store.submitJob(RESNET);
      const b = store.submitJob(FOAM);
      const c = store.submitJob(DDP);
      store.setJobState(b.id, 'starting');
      expect(store.listJobs().map((j) => j.id)).toEqual([a.id, b.id, c.id]);
      expect(store.listJobs({ states: ['queued'] }).map((j) => j.id)).toEqual([a.id, c.id]);
      expect(store.listJobs({ team: 'cfd' }).map((j) => j.id)).toEqual([b.id]);
      expect(store.listJobs({ states: [] })).toEqual([]);
      expect(store.getJob('job-99')).toBeUndefined();
    });

    it('submits a job again with the id and submission time it kept; later ids never reuse it', () => {
      store.submitJob(RESNET); // job-1
      clock = 2000;
      const kept = store.submitJob(DDP, { id: 'job-5', submittedAtSeconds: 1500 });
      expect(kept).toMatchObject({
        id: 'job-5',
        state: 'queued',
        submittedAtSeconds: 1500,
        updatedAtSeconds: 2000,
      });
      expect(store.listTasks({ jobId: 'job-5' }).map((t) => t.id)).toEqual(['job-5.0', 'job-5.1']);
      const lower = store.submitJob(FOAM, { id: 'job-3', submittedAtSeconds: 1200 });
      expect(lower.id).toBe('job-3');
      // Listed in id order, as they were first submitted, and the next new job comes after the highest kept id.
      expect(store.submitJob(RESNET).id).toBe('job-6');
      expect(store.listJobs().map((j) => j.id)).toEqual(['job-1', 'job-3', 'job-5', 'job-6']);
      expect(() => store.submitJob(RESNET, { id: 'job-5', submittedAtSeconds: 1 })).toThrow(/exists already/);
      expect(() => store.submitJob(RESNET, { id: 'inst-2', submittedAtSeconds: 1 })).toThrow(/not a job id/);
      expect(() => store.submitJob(RESNET, { id: 'job-07', submittedAtSeconds: 1 })).toThrow(/not a job id/);
      expect(store.listJobs()).toHaveLength(4);
    });

    it('reserves ids no job here has: later submissions get higher ones, and a reservation never moves back', () => {
      store.submitJob(RESNET); // job-1
      store.reserveJobIds(4);
      expect(store.submitJob(RESNET).id).toBe('job-5');
      store.reserveJobIds(2);
      expect(store.submitJob(RESNET).id).toBe('job-6');
      expect(store.getJob('job-4')).toBeUndefined();
    });

    it('reserves ids on an empty store too', () => {
      store.reserveJobIds(3);
      expect(store.submitJob(RESNET).id).toBe('job-4');
    });

    it('counts jobs and tasks per state as listing them would', () => {
      const a = store.submitJob(DDP);
      store.submitJob(RESNET);
      store.setJobState(a.id, 'starting');
      const counts = store.countByState?.();
      expect(counts?.jobs).toMatchObject({ queued: 1, starting: 1, running: 0, succeeded: 0 });
      expect(counts?.tasks).toMatchObject({ pending: 3, running: 0 });
      for (const [state, n] of Object.entries(counts?.jobs ?? {}))
        expect(store.listJobs({ states: [state as JobState] })).toHaveLength(n);
    });

    it('hands out specs that cannot be changed through a record', () => {
      const job = store.submitJob(RESNET);
      const read = store.getJob(job.id) as JobRecord;
      expect(() => {
        (read.spec as { name: string }).name = 'changed';
      }).toThrow(TypeError);
      expect(store.getJob(job.id)?.spec.name).toBe(RESNET.name);
    });

    it('walks the job lifecycle: timestamps, migration count, final states are final', () => {
      // A move is counted when it begins (countMigration, as its first task stops), not by the change of state.
      const { id } = store.submitJob(RESNET);
      clock = 1010;
      store.setJobState(id, 'starting');
      clock = 1200;
      expect(store.setJobState(id, 'running').startedAtSeconds).toBe(1200);
      clock = 2000;
      expect(store.setJobState(id, 'migrating', 'cheaper plan').migrations).toBe(0);
      expect(store.countMigration(id)).toMatchObject({
        state: 'migrating',
        migrations: 1,
        updatedAtSeconds: 2000,
      });
      store.setJobState(id, 'starting');
      clock = 2100;
      const resumed = store.setJobState(id, 'running');
      expect(resumed.startedAtSeconds).toBe(1200);
      expect(resumed.reason).toBeUndefined();
      store.setJobState(id, 'migrating');
      store.countMigration(id);
      store.setJobState(id, 'running');
      clock = 5000;
      const done = store.setJobState(id, 'succeeded');
      expect(done).toMatchObject({
        state: 'succeeded',
        migrations: 2,
        finishedAtSeconds: 5000,
        updatedAtSeconds: 5000,
      });
      expect(() => store.setJobState(id, 'running')).toThrow(IllegalTransitionError);
      expect(() => store.setJobState(id, 'running')).toThrow(`job ${id} cannot go from succeeded to running`);
      expect(store.getJob(id)?.state).toBe('succeeded');
      const states = store.listEvents({ jobId: id, kind: 'job.state' }).map((e) => e.data);
      expect(states[2]).toEqual({ from: 'running', to: 'migrating', reason: 'cheaper plan' });
      expect(states).toHaveLength(8);
    });

    it('retries a job: keeps each failed attempt, counts attempts, queues it and logs job.retry', () => {
      const { id } = store.submitJob(DDP);
      expect(store.getJob(id)?.attempts).toBe(1);
      expect(store.getJob(id)?.attemptFailures).toBeUndefined();
      store.setJobState(id, 'starting');
      store.setJobState(id, 'running');
      clock = 1100;
      const second = store.retryJob(
        id,
        { taskId: `${id}.1`, exitCode: 137, reason: 'exit code 137' },
        'attempt 1 failed; retrying (attempt 2 of 3)',
      );
      expect(second).toMatchObject({
        state: 'queued',
        reason: 'attempt 1 failed; retrying (attempt 2 of 3)',
        attempts: 2,
        attemptFailures: [
          { attempt: 1, taskId: `${id}.1`, exitCode: 137, reason: 'exit code 137', atSeconds: 1100 },
        ],
        updatedAtSeconds: 1100,
      });
      store.setJobState(id, 'starting');
      clock = 1200;
      const third = store.retryJob(id, { taskId: `${id}.0`, reason: 'could not start' }, 'again');
      expect(third.attempts).toBe(3);
      expect(third.attemptFailures?.map((f) => [f.attempt, f.exitCode, f.atSeconds])).toEqual([
        [1, 137, 1100],
        [2, undefined, 1200],
      ]);
      expect(store.getJob(id)).toEqual(third);
      const retries = store.listEvents({ jobId: id, kind: 'job.retry' });
      expect(retries.map((e) => e.data)).toEqual([
        { attempt: 1, next: 2, exitCode: 137, reason: 'exit code 137' },
        { attempt: 2, next: 3, reason: 'could not start' },
      ]);
      expect(retries[0]).toMatchObject({ taskId: `${id}.1`, atSeconds: 1100 });
      // The retry comes before the state change it causes.
      const kinds = store.listEvents({ jobId: id }).map((e) => e.kind);
      expect(kinds.slice(-2)).toEqual(['job.retry', 'job.state']);
      store.setJobState(id, 'failed', 'attempt 3 of 3 failed');
      expect(() => store.retryJob(id, { taskId: `${id}.0`, reason: 'x' }, 'x')).toThrow(
        IllegalTransitionError,
      );
      expect(store.getJob(id)?.attempts).toBe(3);
    });

    it('treats a move to the same state as a no-op without an event', () => {
      const { id } = store.submitJob(RESNET);
      const before = store.listEvents().length;
      clock = 1234;
      expect(store.setJobState(id, 'queued').updatedAtSeconds).toBe(1000);
      expect(store.listEvents()).toHaveLength(before);
    });

    it('rejects skipping a state and unknown jobs', () => {
      const { id } = store.submitJob(RESNET);
      expect(() => store.setJobState(id, 'running')).toThrow(IllegalTransitionError);
      expect(() => store.setJobState('job-42', 'cancelled')).toThrow(UnknownRecordError);
    });

    it('records progress and rejects nonsense', () => {
      const { id } = store.submitJob(RESNET);
      expect(store.recordJobProgress(id, 500)).toMatchObject({
        completedIterations: 500,
        totalIterations: 10010,
      });
      expect(store.recordJobProgress(id, 600, 12000)).toMatchObject({
        completedIterations: 600,
        totalIterations: 12000,
      });
      expect(() => store.recordJobProgress(id, -1)).toThrow(StateStoreError);
      expect(() => store.recordJobProgress(id, Number.NaN)).toThrow(StateStoreError);
      expect(store.getJob(id)?.completedIterations).toBe(600);
    });

    it('lists the tasks of jobs in given states, with the other filters', () => {
      store.submitJob(DDP); // job-1: two tasks
      store.submitJob(RESNET); // job-2
      store.submitJob(RESNET); // job-3
      store.setJobState('job-2', 'cancelled');
      store.setJobState('job-3', 'starting');
      const ids = (f: Parameters<StateStore['listTasks']>[0]): string[] =>
        store.listTasks(f).map((t) => t.id);
      expect(ids({ jobStates: ['queued', 'starting'] })).toEqual(['job-1.0', 'job-1.1', 'job-3.0']);
      expect(ids({ jobStates: ['cancelled'] })).toEqual(['job-2.0']);
      expect(ids({ jobStates: ['running'] })).toEqual([]);
      expect(ids({ jobStates: [] })).toEqual([]);
      expect(ids({ jobStates: ['queued', 'starting'], jobId: 'job-3' })).toEqual(['job-3.0']);
      expect(ids({ jobStates: ['queued'], states: ['running'] })).toEqual([]);
    });

    it('lists and counts the jobs still to end and those ended since a time', () => {
      clock = 1000;
      store.submitJob(RESNET); // job-1: ends at 1100
      store.submitJob({ ...RESNET, team: 'other' }); // job-2: ends at 1200
      store.submitJob(RESNET); // job-3: still queued
      store.submitJob(RESNET); // job-4: running, started before the cut and not ended
      clock = 1100;
      store.setJobState('job-1', 'cancelled');
      clock = 1200;
      store.setJobState('job-2', 'cancelled');
      store.setJobState('job-4', 'starting');
      store.setJobState('job-4', 'running');
      const ids = (f: Parameters<StateStore['listJobs']>[0]): string[] => store.listJobs(f).map((j) => j.id);
      expect(ids({ endedSince: 1150 })).toEqual(['job-2', 'job-3', 'job-4']);
      // At the very second a job ended, it is in the window.
      expect(ids({ endedSince: 1100 })).toEqual(['job-1', 'job-2', 'job-3', 'job-4']);
      expect(ids({ endedSince: 1201 })).toEqual(['job-3', 'job-4']);
      expect(ids({ endedSince: 1150, states: ['cancelled'] })).toEqual(['job-2']);
      expect(ids({ endedSince: 1150, team: RESNET.team })).toEqual(['job-3', 'job-4']);
      for (const filter of [
        {},
        { endedSince: 1150 },
        { endedSince: 1201, states: ['cancelled' as const] },
        { team: 'other' },
        { team: RESNET.team, endedSince: 0 },
        { states: [] },
      ])
        expect(store.countJobs(filter)).toBe(store.listJobs(filter).length);
      expect(store.countJobs({ endedSince: 1201 })).toBe(2);
    });

    it('lists jobs a page at a time, in submission order after a given job', () => {
      for (let i = 0; i < 5; i++) store.submitJob(i % 2 === 0 ? RESNET : { ...RESNET, team: 'other' });
      store.setJobState('job-2', 'cancelled');
      const ids = (f: Parameters<StateStore['listJobs']>[0]): string[] => store.listJobs(f).map((j) => j.id);
      expect(ids({ limit: 2 })).toEqual(['job-1', 'job-2']);
      expect(ids({ limit: 2, afterId: 'job-2' })).toEqual(['job-3', 'job-4']);
      expect(ids({ limit: 2, afterId: 'job-4' })).toEqual(['job-5']);
      expect(ids({ afterId: 'job-5' })).toEqual([]);
      // After a job the filter leaves out, and with the other filters.
      expect(ids({ team: 'other', afterId: 'job-1' })).toEqual(['job-2', 'job-4']);
      expect(ids({ states: ['queued'], afterId: 'job-1', limit: 2 })).toEqual(['job-3', 'job-4']);
      expect(ids({ limit: 0 })).toEqual([]);
      expect(store.countJobs({ afterId: 'job-2' })).toBe(3);
      expect(store.countJobs({ afterId: 'job-2', limit: 2 })).toBe(2);
    });

    it('commits tasks to instances and releases them when they stop', () => {
      const job = store.submitJob(DDP);
      const inst = store.createInstance({ typeName: 'p3.8xlarge' });
      expect(() => store.setTaskState('job-1.0', 'starting')).toThrow('needs the instance it is on');
      clock = 1100;
      const t0 = store.setTaskState('job-1.0', 'starting', inst.id);
      expect(t0).toMatchObject({ state: 'starting', instanceId: inst.id, updatedAtSeconds: 1100 });
      store.setTaskState('job-1.1', 'starting', inst.id);
      expect(store.setTaskState('job-1.0', 'running').instanceId).toBe(inst.id);
      expect(store.listTasks({ instanceId: inst.id }).map((t) => t.id)).toEqual(['job-1.0', 'job-1.1']);
      expect(store.listTasks({ states: ['running'] }).map((t) => t.id)).toEqual(['job-1.0']);
      expect(() => store.setTaskState('job-1.0', 'stopped', inst.id)).toThrow(StateStoreError);
      const stopped = store.setTaskState('job-1.0', 'stopped');
      expect(stopped.instanceId).toBeUndefined();
      expect(store.listTasks({ instanceId: inst.id }).map((t) => t.id)).toEqual(['job-1.1']);
      expect(() => store.setTaskState('job-1.0', 'starting', 'inst-9')).toThrow(UnknownRecordError);
      expect(() => store.setTaskState('job-9.0', 'running', inst.id)).toThrow(UnknownRecordError);
      expect(store.listEvents({ taskId: 'job-1.0', kind: 'task.state' }).map((e) => e.data)).toEqual([
        { from: 'pending', to: 'starting', instanceId: inst.id },
        { from: 'starting', to: 'running', instanceId: inst.id },
        { from: 'running', to: 'stopped' },
      ]);
      expect(job.id).toBe('job-1');
    });

    it("dates a task's end and an attempt's failure at the time given (an exit heard late), never after now", () => {
      const { id } = store.submitJob(RESNET);
      const inst = store.createInstance({ typeName: 'p3.2xlarge' });
      store.setTaskState(`${id}.0`, 'running', inst.id);
      store.setJobState(id, 'starting');
      store.setJobState(id, 'running');
      clock = 1100;
      const failed = store.setTaskState(`${id}.0`, 'failed', undefined, { atSeconds: 1040 });
      // The record changed now; the change happened when the task exited.
      expect(failed.updatedAtSeconds).toBe(1100);
      const [end] = store.listEvents({ taskId: `${id}.0`, kind: 'task.state', newestFirst: true, limit: 1 });
      expect(end).toMatchObject({ atSeconds: 1040, data: { from: 'running', to: 'failed' } });
      const retried = store.retryJob(
        id,
        { taskId: `${id}.0`, reason: 'exit code 4', atSeconds: 1040 },
        'again',
      );
      expect(retried.attemptFailures?.[0]?.atSeconds).toBe(1040);
      expect(retried.updatedAtSeconds).toBe(1100);
      // A time ahead of this host's clock is now.
      store.setTaskState(`${id}.0`, 'running', inst.id);
      clock = 1200;
      store.setTaskState(`${id}.0`, 'succeeded', undefined, { atSeconds: 5000 });
      const [ahead] = store.listEvents({
        taskId: `${id}.0`,
        kind: 'task.state',
        newestFirst: true,
        limit: 1,
      });
      expect(ahead?.atSeconds).toBe(1200);
    });

    it('refuses to place tasks on a terminated instance or of a finished job, but lets them stop', () => {
      const { id } = store.submitJob(RESNET);
      const dead = store.createInstance({ typeName: 'p3.2xlarge' });
      store.setInstanceState(dead.id, 'terminated');
      expect(() => store.setTaskState(`${id}.0`, 'starting', dead.id)).toThrow(IllegalTransitionError);
      const live = store.createInstance({ typeName: 'p3.2xlarge' });
      store.setTaskState(`${id}.0`, 'running', live.id);
      store.setJobState(id, 'cancelled', 'user asked');
      expect(() => store.setTaskState(`${id}.0`, 'pending')).toThrow(`job ${id} is cancelled`);
      expect(store.setTaskState(`${id}.0`, 'stopped').state).toBe('stopped');
    });

    it('records checkpoints with their key and time', () => {
      store.submitJob(RESNET);
      clock = 3000;
      const t = store.recordCheckpoint('job-1.0', 's3://bucket/ckpt/job-1/0/3', 2990);
      expect(t).toMatchObject({
        lastCheckpointKey: 's3://bucket/ckpt/job-1/0/3',
        lastCheckpointAtSeconds: 2990,
        updatedAtSeconds: 3000,
      });
      expect(store.recordCheckpoint('job-1.0', 'k2').lastCheckpointAtSeconds).toBe(3000);
      expect(() => store.recordCheckpoint('job-1.0', '')).toThrow(StateStoreError);
      expect(store.listEvents({ kind: 'task.checkpoint' })).toHaveLength(2);
    });

    it("names the uploading instance in a checkpoint's event, else the task's own", () => {
      store.submitJob(RESNET);
      const inst = store.createInstance({ typeName: 'p3.2xlarge' });
      store.setTaskState('job-1.0', 'starting', inst.id);
      store.recordCheckpoint('job-1.0', 'k1');
      store.recordCheckpoint('job-1.0', 'k2', undefined, 'inst-leaving');
      expect(store.listEvents({ kind: 'task.checkpoint' }).map((e) => [e.instanceId, e.taskId])).toEqual([
        [inst.id, 'job-1.0'],
        ['inst-leaving', 'job-1.0'],
      ]);
    });
  });

  describe('instances', () => {
    it('creates requested instances with unique launch tokens and walks their lifecycle', () => {
      const a = store.createInstance({ typeName: 'p3.2xlarge', availabilityZone: 'us-east-1a' });
      const b = store.createInstance({ typeName: 'c7i.large' });
      expect(a).toMatchObject({
        id: 'inst-1',
        state: 'requested',
        typeName: 'p3.2xlarge',
        availabilityZone: 'us-east-1a',
        requestedAtSeconds: 1000,
      });
      expect(b.id).toBe('inst-2');
      expect(a.launchToken).toMatch(/-inst-1-1000$/);
      expect(a.launchToken).not.toBe(b.launchToken);
      expect(a.launchToken.length).toBeLessThanOrEqual(64);
      clock = 1005;
      const launching = store.setInstanceState(a.id, 'launching', { cloudId: 'i-0abc' });
      expect(launching).toMatchObject({ state: 'launching', cloudId: 'i-0abc', launchedAtSeconds: 1005 });
      expect(store.findInstanceByCloudId('i-0abc')?.id).toBe(a.id);
      expect(store.findInstanceByCloudId('i-none')).toBeUndefined();
      expect(() => store.setInstanceState(b.id, 'launching', { cloudId: 'i-0abc' })).toThrow(
        'already belongs to instance inst-1',
      );
      expect(() => store.setInstanceState(a.id, 'launching', { cloudId: 'i-other' })).toThrow(
        'already has cloud id',
      );
      clock = 1180;
      expect(store.setInstanceState(a.id, 'running').runningAtSeconds).toBe(1180);
      store.setInstanceState(a.id, 'draining');
      store.setInstanceState(a.id, 'running');
      store.setInstanceState(a.id, 'terminating', { reason: 'plan 7 drops it' });
      clock = 1300;
      expect(store.setInstanceState(a.id, 'terminated')).toMatchObject({
        terminatedAtSeconds: 1300,
        runningAtSeconds: 1180,
      });
      expect(() => store.setInstanceState(a.id, 'running')).toThrow(IllegalTransitionError);
      expect(store.listInstances({ states: ['requested'] }).map((i) => i.id)).toEqual([b.id]);
      expect(store.listInstances().map((i) => i.id)).toEqual([a.id, b.id]);
      expect(store.listEvents({ instanceId: a.id }).map((e) => e.kind)).toEqual([
        'instance.created',
        ...Array<string>(6).fill('instance.state'),
      ]);
    });

    it('counts an instance launched from when its cloud id is attached, even to a record already terminating', () => {
      // Dropped (a drain, a round) while its RunInstances was under way; the launch returns its cloud id after.
      const a = store.createInstance({ typeName: 'p3.8xlarge' });
      clock = 1001;
      expect(
        store.setInstanceState(a.id, 'terminating', { reason: 'drained' }).launchedAtSeconds,
      ).toBeUndefined();
      clock = 1002;
      expect(store.setInstanceState(a.id, 'terminating', { cloudId: 'i-0late' })).toMatchObject({
        state: 'terminating',
        cloudId: 'i-0late',
        launchedAtSeconds: 1002,
      });
      clock = 1602;
      expect(store.setInstanceState(a.id, 'terminated')).toMatchObject({
        launchedAtSeconds: 1002,
        terminatedAtSeconds: 1602,
      });
      expect(store.getInstance(a.id)?.launchedAtSeconds).toBe(1002);
      // A record closed without ever getting a cloud id was never launched.
      const b = store.createInstance({ typeName: 'c7i.large' });
      expect(store.setInstanceState(b.id, 'terminated').launchedAtSeconds).toBeUndefined();
    });

    it('keeps the placement asked for until the launch says what it got; a fallback without the group clears it', () => {
      const a = store.createInstance({
        typeName: 'c7i.large',
        availabilityZone: 'us-east-1b',
        placementGroup: 'job-7',
      });
      expect(a).toMatchObject({ availabilityZone: 'us-east-1b', placementGroup: 'job-7' });
      expect(store.getInstance(a.id)?.placementGroup).toBe('job-7');
      // Launched in the group: kept; a state change that does not mention the group keeps it too.
      store.setInstanceState(a.id, 'launching', {
        cloudId: 'i-0aa',
        availabilityZone: 'us-east-1b',
        placementGroup: 'job-7',
      });
      expect(store.setInstanceState(a.id, 'running').placementGroup).toBe('job-7');
      const b = store.createInstance({
        typeName: 'c7i.large',
        availabilityZone: 'us-east-1b',
        placementGroup: 'job-7',
      });
      const fellBack = store.setInstanceState(b.id, 'launching', {
        cloudId: 'i-0bb',
        availabilityZone: 'us-east-1c',
        placementGroup: null,
      });
      expect(fellBack.placementGroup).toBeUndefined();
      expect(fellBack.availabilityZone).toBe('us-east-1c');
      expect(store.getInstance(b.id)?.placementGroup).toBeUndefined();
      expect(store.listInstances().map((i) => [i.id, i.placementGroup])).toEqual([
        [a.id, 'job-7'],
        [b.id, undefined],
      ]);
      const launched = store.listEvents({ instanceId: a.id, kind: 'instance.state' })[0]?.data;
      expect(launched).toMatchObject({
        to: 'launching',
        availabilityZone: 'us-east-1b',
        placementGroup: 'job-7',
      });
    });

    it('accepts a caller launch token once and rejects malformed ones', () => {
      store.createInstance({ typeName: 'c7i.large', launchToken: 'tok-1' });
      expect(() => store.createInstance({ typeName: 'c7i.large', launchToken: 'tok-1' })).toThrow(
        'already used',
      );
      expect(() => store.createInstance({ typeName: 'c7i.large', launchToken: 'x'.repeat(65) })).toThrow(
        StateStoreError,
      );
      expect(() => store.createInstance({ typeName: 'c7i.large', launchToken: 'has space' })).toThrow(
        StateStoreError,
      );
      expect(store.listInstances()).toHaveLength(1);
    });

    it('keeps only the hash of a worker token', () => {
      const inst = store.createInstance({ typeName: 'c7i.large' });
      const raw = 'worker-secret-0123456789abcdef';
      const updated = store.setWorkerToken(inst.id, raw);
      expect(updated.workerTokenHash).toBe(createHash('sha256').update(raw).digest('hex'));
      expect(JSON.stringify(updated)).not.toContain(raw);
      expect(store.instanceForWorkerToken(raw)?.id).toBe(inst.id);
      expect(store.instanceForWorkerToken('worker-secret-0123456789abcdeX')).toBeUndefined();
      const other = store.createInstance({ typeName: 'c7i.large' });
      expect(() => store.setWorkerToken(other.id, raw)).toThrow('already used');
      expect(() => store.setWorkerToken(other.id, 'short')).toThrow(StateStoreError);
    });
  });

  describe('intents', () => {
    it('goes pending → done, and pending → failed, once', () => {
      const inst = store.createInstance({ typeName: 'p3.2xlarge' });
      const launch = store.recordIntent(
        {
          kind: 'launch',
          payload: { instanceId: inst.id, typeName: inst.typeName, launchToken: inst.launchToken },
        },
        { round: 3 },
      );
      expect(launch).toMatchObject({
        id: 1,
        kind: 'launch',
        state: 'pending',
        round: 3,
        createdAtSeconds: 1000,
      });
      const stop = store.recordIntent({
        kind: 'stop-task',
        payload: { taskId: 'job-1.0', instanceId: inst.id, checkpoint: true },
      });
      expect(store.listIntents({ states: ['pending'] }).map((i) => i.id)).toEqual([launch.id, stop.id]);
      clock = 1010;
      expect(store.completeIntent(launch.id)).toMatchObject({ state: 'done', updatedAtSeconds: 1010 });
      expect(store.completeIntent(launch.id).state).toBe('done');
      expect(() => store.failIntent(launch.id, 'late')).toThrow(IllegalTransitionError);
      expect(store.failIntent(stop.id, 'worker unreachable')).toMatchObject({
        state: 'failed',
        error: 'worker unreachable',
      });
      expect(store.listIntents({ states: ['pending'] })).toEqual([]);
      expect(store.listIntents({ kind: 'stop-task' }).map((i) => i.state)).toEqual(['failed']);
      const got = store.getIntent(launch.id);
      expect(got?.kind === 'launch' ? got.payload.launchToken : undefined).toBe(inst.launchToken);
      expect(() => store.completeIntent(99)).toThrow(UnknownRecordError);
    });

    it('returns the existing intent for a repeated idempotency key', () => {
      const first = store.recordIntent(
        { kind: 'terminate', payload: { instanceId: 'inst-1' } },
        { key: 'terminate inst-1' },
      );
      const again = store.recordIntent(
        { kind: 'terminate', payload: { instanceId: 'inst-1' } },
        { key: 'terminate inst-1' },
      );
      expect(again).toEqual(first);
      expect(store.listIntents()).toHaveLength(1);
      expect(store.getIntentByKey('terminate inst-1')).toEqual(first);
      store.completeIntent(first.id);
      expect(store.getIntentByKey('terminate inst-1')?.state).toBe('done');
      expect(store.getIntentByKey('terminate inst-2')).toBeUndefined();
    });

    it('prunes the oldest finished intents before a time, at most a limit, keeping launches and pending ones', () => {
      const inst = store.createInstance({ typeName: 'c7i.large' });
      const launch = store.recordIntent(
        {
          kind: 'launch',
          payload: { instanceId: inst.id, typeName: inst.typeName, launchToken: inst.launchToken },
        },
        { key: `launch:${inst.id}` },
      );
      const start = (n: number): number =>
        store.recordIntent({ kind: 'start-task', payload: { taskId: `job-${n}.0`, instanceId: inst.id } }).id;
      const [a, b, c, d] = [start(1), start(2), start(3), start(4)];
      const stop = store.recordIntent({
        kind: 'stop-task',
        payload: { taskId: 'job-1.0', instanceId: inst.id, checkpoint: true },
      }).id;
      clock = 1100;
      store.completeIntent(launch.id);
      store.completeIntent(a);
      store.failIntent(b, 'worker unreachable');
      store.completeIntent(c);
      clock = 1300;
      store.completeIntent(stop);
      const ids = (): number[] => store.listIntents().map((i) => i.id);
      // Finished before 1200: a, b and c (the launch is kept, d is pending, the stop finished later); two at a time.
      expect(store.pruneFinishedIntents(1200, 2)).toBe(2);
      expect(ids()).toEqual([launch.id, c, d, stop]);
      expect(store.pruneFinishedIntents(1200, 100)).toBe(1);
      expect(store.pruneFinishedIntents(1200, 100)).toBe(0);
      expect(ids()).toEqual([launch.id, d, stop]);
      expect(store.getIntent(a)).toBeUndefined();
      expect(store.getIntentByKey(`launch:${inst.id}`)?.state).toBe('done');
      expect(store.listIntents({ states: ['pending'] }).map((i) => i.id)).toEqual([d]);
      // In a transaction that fails, nothing is pruned; ids are never given again.
      expect(() =>
        store.transaction(() => {
          expect(store.pruneFinishedIntents(5000, 100)).toBe(1);
          throw new Error('rolled back');
        }),
      ).toThrow('rolled back');
      expect(ids()).toEqual([launch.id, d, stop]);
      expect(start(5)).toBe(stop + 1);
    });

    it('validates payloads by kind', () => {
      expect(() =>
        store.recordIntent({ kind: 'start-task', payload: { taskId: 'job-1.0' } } as never),
      ).toThrow(/intent start-task: instanceId: /);
      expect(() => store.recordIntent({ kind: 'reboot', payload: {} } as never)).toThrow(
        'unknown intent kind reboot',
      );
      expect(store.listIntents()).toEqual([]);
    });
  });

  describe('rounds, events, tokens, key-values', () => {
    it('keeps plans and decisions per round, newest first, and prunes without reusing numbers', () => {
      for (let n = 1; n <= 3; n++) {
        clock = 1000 + n;
        expect(store.recordRound(round(n)).round).toBe(n);
      }
      expect(store.latestRound()).toEqual({ round: 3, atSeconds: 1003, ...round(3) });
      expect(store.getRound(2)?.decision.reason).toBe('round 2');
      expect(store.listRounds(2).map((r) => r.round)).toEqual([3, 2]);
      expect(store.pruneRounds(1)).toBe(2);
      expect(store.listRounds().map((r) => r.round)).toEqual([3]);
      expect(store.recordRound(round(4)).round).toBe(4);
    });

    it('lists the rounds recorded within a time window, newest first, the newest `limit` of them', () => {
      for (let n = 1; n <= 6; n++) {
        clock = 1000 + 10 * n;
        store.recordRound(round(n));
      }
      const rounds = (limit: number | undefined, sinceSeconds?: number, untilSeconds?: number): number[] =>
        store.listRounds(limit, { sinceSeconds, untilSeconds }).map((r) => r.round);
      // Both ends included.
      expect(rounds(undefined, 1020, 1040)).toEqual([4, 3, 2]);
      expect(rounds(2, 1020, 1040)).toEqual([4, 3]);
      expect(rounds(undefined, 1045)).toEqual([6, 5]);
      expect(rounds(undefined, undefined, 1015)).toEqual([1]);
      expect(rounds(undefined, 1061)).toEqual([]);
      expect(store.listRounds(undefined, {}).map((r) => r.round)).toEqual([6, 5, 4, 3, 2, 1]);
    });

    it('appends events and filters them', () => {
      store.submitJob(RESNET);
      const e = store.appendEvent({
        kind: 'round.decision',
        jobId: 'job-1',
        message: 'kept in place',
        data: { savingPerSecond: 0.001 },
      });
      expect(e).toMatchObject({ seq: 2, atSeconds: 1000, kind: 'round.decision' });
      store.appendEvent({ kind: 'note' });
      expect(store.listEvents({ afterSeq: 1 }).map((x) => x.seq)).toEqual([2, 3]);
      expect(store.listEvents({ limit: 1 }).map((x) => x.seq)).toEqual([1]);
      expect(store.listEvents({ jobId: 'job-1' }).map((x) => x.kind)).toEqual([
        'job.submitted',
        'round.decision',
      ]);
      expect(() => store.appendEvent({ kind: 'Bad Kind' })).toThrow(StateStoreError);
    });

    it('lists events newest first, the limit keeping the newest, under every filter', () => {
      store.submitJob(RESNET); // seq 1: job.submitted
      for (let i = 0; i < 4; i += 1)
        store.appendEvent({ kind: 'note', jobId: i % 2 === 0 ? 'job-1' : undefined });
      // seq 2..5: notes, the even ones of job-1
      const seqs = (f: Parameters<StateStore['listEvents']>[0]): number[] =>
        store.listEvents(f).map((x) => x.seq);
      expect(seqs({ newestFirst: true })).toEqual([5, 4, 3, 2, 1]);
      expect(seqs({ newestFirst: true, limit: 2 })).toEqual([5, 4]);
      expect(seqs({ newestFirst: true, kind: 'note', limit: 3 })).toEqual([5, 4, 3]);
      expect(seqs({ newestFirst: true, jobId: 'job-1', kind: 'note' })).toEqual([4, 2]);
      expect(seqs({ newestFirst: true, jobId: 'job-1', limit: 1 })).toEqual([4]);
      expect(seqs({ newestFirst: true, afterSeq: 3 })).toEqual([5, 4]);
      expect(seqs({ newestFirst: false, limit: 2 })).toEqual([1, 2]);
      // Several kinds at once, in sequence order either way.
      expect(seqs({ kinds: ['job.submitted', 'note'] })).toEqual([1, 2, 3, 4, 5]);
      expect(seqs({ kinds: ['job.submitted', 'nothing'] })).toEqual([1]);
      expect(seqs({ kinds: ['note', 'job.submitted'], afterSeq: 1, limit: 2 })).toEqual([2, 3]);
      expect(seqs({ kinds: ['note', 'job.submitted'], newestFirst: true, limit: 2 })).toEqual([5, 4]);
      expect(seqs({ kinds: ['note'], jobId: 'job-1' })).toEqual([2, 4]);
      expect(seqs({ kinds: [] })).toEqual([]);
    });

    it('lists an event once for a kind named twice, and takes limits as whole numbers, none for a negative one', () => {
      for (let i = 0; i < 5; i += 1) store.appendEvent({ kind: 'a.b' }); // seq 1..5
      store.appendEvent({ kind: 'c.d' }); // seq 6
      const seqs = (f: Parameters<StateStore['listEvents']>[0]): number[] =>
        store.listEvents(f).map((x) => x.seq);
      expect(seqs({ kinds: ['a.b', 'a.b'] })).toEqual([1, 2, 3, 4, 5]);
      expect(seqs({ kinds: ['c.d', 'a.b', 'c.d'], newestFirst: true, limit: 3 })).toEqual([6, 5, 4]);
      expect(seqs({ kinds: ['a.b', 'a.b'], afterSeq: 3 })).toEqual([4, 5]);
      expect(seqs({ kind: 'a.b', limit: 2.5 })).toEqual([1, 2]);
      expect(seqs({ kinds: ['a.b', 'c.d'], limit: 2.5 })).toEqual([1, 2]);
      expect(seqs({ limit: 0.5 })).toEqual([]);
      expect(seqs({ limit: -1 })).toEqual([]);
      expect(store.pruneEvents('a.b', 1e12, 1.5)).toBe(1);
      expect(store.pruneEvents('a.b', 1e12, -1)).toBe(0);
      expect(seqs({ kind: 'a.b' })).toEqual([2, 3, 4, 5]);
      // The same for jobs and finished intents.
      store.submitJob(RESNET);
      store.submitJob(RESNET);
      expect(store.listJobs({ limit: 1.5 }).map((j) => j.id)).toEqual(['job-1']);
      expect(store.listJobs({ limit: -1 })).toEqual([]);
      for (let i = 1; i <= 3; i += 1)
        store.completeIntent(
          store.recordIntent({ kind: 'terminate', payload: { instanceId: `inst-${i}` } }).id,
        );
      expect(store.pruneFinishedIntents(1e12, 1.5)).toBe(1);
      expect(store.pruneFinishedIntents(1e12, -1)).toBe(0);
      expect(store.listIntents().map((i) => i.id)).toEqual([2, 3]);
    });

    it('prunes the oldest events of a kind before a time, at most a limit, keeping sequence numbers and filters', () => {
      store.submitJob(RESNET); // seq 1 at 1000
      for (let i = 0; i < 6; i += 1) {
        clock = 1000 + i * 100;
        // seq 2..7: checkpoints at 1000..1500 on job-1; a note beside each at the same time (seq 8..13 below)
        store.appendEvent({ kind: 'task.checkpoint', jobId: 'job-1', taskId: 'job-1.0' });
      }
      for (let i = 0; i < 6; i += 1) {
        clock = 1000 + i * 100;
        store.appendEvent({ kind: 'note', jobId: 'job-1' });
      }
      const seqs = (f: Parameters<StateStore['listEvents']>[0]): number[] =>
        store.listEvents(f).map((x) => x.seq);
      // Before 1350: the checkpoints at 1000..1300 (seq 2..5), only two at a time.
      expect(store.pruneEvents('task.checkpoint', 1350, 2)).toBe(2);
      expect(seqs({ kind: 'task.checkpoint' })).toEqual([4, 5, 6, 7]);
      expect(store.pruneEvents('task.checkpoint', 1350, 100)).toBe(2);
      expect(store.pruneEvents('task.checkpoint', 1350, 100)).toBe(0);
      expect(seqs({ jobId: 'job-1', kind: 'task.checkpoint' })).toEqual([6, 7]);
      // Other kinds keep every event, whatever their time; every list (by job, after a seq, newest first) agrees.
      expect(seqs({ kind: 'note' })).toEqual([8, 9, 10, 11, 12, 13]);
      expect(seqs({ jobId: 'job-1' })).toEqual([1, 6, 7, 8, 9, 10, 11, 12, 13]);
      expect(seqs({ afterSeq: 5, limit: 3 })).toEqual([6, 7, 8]);
      expect(seqs({ newestFirst: true, kind: 'task.checkpoint' })).toEqual([7, 6]);
      // Numbers are never reused.
      expect(store.appendEvent({ kind: 'task.checkpoint' }).seq).toBe(14);
      // In a transaction that fails, nothing is pruned.
      expect(() =>
        store.transaction(() => {
          expect(store.pruneEvents('note', 2000, 100)).toBe(6);
          throw new Error('rolled back');
        }),
      ).toThrow('rolled back');
      expect(seqs({ kind: 'note' })).toEqual([8, 9, 10, 11, 12, 13]);
      expect(seqs({ jobId: 'job-1', newestFirst: true, limit: 2 })).toEqual([13, 12]);
    });

    it('authenticates teams by token hash and honours revocation', () => {
      const raw = 'team-token-aaaaaaaaaaaaaaaa';
      const rec = store.addTeamToken('vision', raw, 'ci');
      expect(rec).toEqual({
        team: 'vision',
        label: 'ci',
        hashPrefix: createHash('sha256').update(raw).digest('hex').slice(0, 12),
        createdAtSeconds: 1000,
      });
      store.addTeamToken('nlp', 'team-token-bbbbbbbbbbbbbbbb');
      expect(store.teamForToken(raw)).toBe('vision');
      expect(store.teamForToken('team-token-cccccccccccccccc')).toBeUndefined();
      expect(() => store.addTeamToken('nlp', raw)).toThrow('already registered');
      expect(() => store.addTeamToken('nlp', 'short')).toThrow(StateStoreError);
      expect(() => store.addTeamToken('Bad Team', 'team-token-dddddddddddddddd')).toThrow(
        'invalid team name',
      );
      clock = 2000;
      expect(store.revokeTeamToken(raw)).toBe(true);
      expect(store.revokeTeamToken(raw)).toBe(false);
      expect(store.teamForToken(raw)).toBeUndefined();
      expect(store.listTeamTokens('vision')).toEqual([{ ...rec, revokedAtSeconds: 2000 }]);
      expect(store.listTeamTokens().map((t) => t.team)).toEqual(['vision', 'nlp']);
    });

    it('revokes a token by the hash prefix a listing shows', () => {
      const raw = 'team-token-eeeeeeeeeeeeeeee';
      const rec = store.addTeamToken('vision', raw);
      clock = 3000;
      expect(store.revokeTeamTokenByPrefix('000000000000')).toBeUndefined();
      expect(store.revokeTeamTokenByPrefix(rec.hashPrefix)).toEqual({ ...rec, revokedAtSeconds: 3000 });
      expect(store.teamForToken(raw)).toBeUndefined();
      expect(() => store.revokeTeamTokenByPrefix(rec.hashPrefix)).toThrow('already revoked');
      expect(() => store.revokeTeamTokenByPrefix(rec.hashPrefix.slice(0, 4))).toThrow('12 hex digits');
    });

    it('stores scheduler state as JSON values, copied in and out', () => {
      const table = {
        defaultRate: 0.95,
        entries: [{ target: 'resnet18', others: ['gpt2'], mean: 0.919, count: 3 }],
      };
      store.setValue('colocation-table', table);
      table.entries.length = 0;
      expect(store.getValue('colocation-table')).toEqual({
        defaultRate: 0.95,
        entries: [{ target: 'resnet18', others: ['gpt2'], mean: 0.919, count: 3 }],
      });
      store.setValue('colocation-table', null);
      expect(store.getValue('colocation-table')).toBeNull();
      expect(store.deleteValue('colocation-table')).toBe(true);
      expect(store.deleteValue('colocation-table')).toBe(false);
      expect(store.getValue('colocation-table')).toBeUndefined();
    });

    it('refuses a value JSON has no text for, naming the key, and keeps what the key held', () => {
      store.setValue('held', 1);
      for (const bad of [undefined, () => 1, Symbol('s')]) {
        expect(() => store.setValue('held', bad as unknown as JsonValue)).toThrow(StateStoreFaultError);
        expect(() => store.setValue('held', bad as unknown as JsonValue)).toThrow(
          /value of key held cannot be stored as JSON/,
        );
      }
      expect(store.getValue('held')).toBe(1);
      expect(() => store.setValue('fresh', undefined as unknown as JsonValue)).toThrow(/key fresh/);
      expect(store.getValue('fresh')).toBeUndefined();
      const circular: Record<string, unknown> = {};
      circular['self'] = circular;
      expect(() => store.setValue('fresh', circular as JsonValue)).toThrow(
        /value of key fresh cannot be stored/,
      );
      // Inside a value, JSON's own rules: undefined members are left out, NaN is null.
      store.setValue('fresh', { a: undefined, b: [NaN, 1] } as unknown as JsonValue);
      expect(store.getValue('fresh')).toEqual({ b: [null, 1] });
    });
  });

  describe('transactions', () => {
    it('rolls back every write of a failed transaction, ids and events included', () => {
      expect(() =>
        store.transaction(() => {
          store.submitJob(RESNET);
          store.createInstance({ typeName: 'p3.2xlarge' });
          store.recordIntent({ kind: 'terminate', payload: { instanceId: 'inst-1' } }, { key: 'k' });
          store.setValue('k', 1);
          store.recordRound(round(1));
          throw new Error('crash before commit');
        }),
      ).toThrow('crash before commit');
      expect(store.listJobs()).toEqual([]);
      expect(store.listTasks()).toEqual([]);
      expect(store.listInstances()).toEqual([]);
      expect(store.listIntents()).toEqual([]);
      expect(store.listEvents()).toEqual([]);
      expect(store.listRounds()).toEqual([]);
      expect(store.getValue('k')).toBeUndefined();
      expect(store.submitJob(RESNET).id).toBe('job-1');
      expect(store.createInstance({ typeName: 'c7i.large' }).id).toBe('inst-1');
      expect(store.listEvents()[0]?.seq).toBe(1);
    });

    it('gives a job id a rolled-back submission handed back its new job, spec and all', () => {
      expect(() =>
        store.transaction(() => {
          // Read back inside the transaction (as a submission does) before it fails.
          expect(store.getJob(store.submitJob(RESNET).id)?.spec.name).toBe(RESNET.name);
          throw new Error('crash before commit');
        }),
      ).toThrow('crash before commit');
      const job = store.submitJob(FOAM);
      expect(job.id).toBe('job-1');
      expect(job.spec).toEqual(FOAM);
      expect(store.getJob('job-1')?.spec).toEqual(FOAM);
      expect(store.listJobs().map((j) => j.spec.name)).toEqual([FOAM.name]);
    });

    it('leaves an intent whose completion was rolled back pending, in its place among the pending', () => {
      const ids = [1, 2, 3].map(
        (n) => store.recordIntent({ kind: 'terminate', payload: { instanceId: `inst-${n}` } }).id,
      );
      expect(() =>
        store.transaction(() => {
          store.completeIntent(ids[0] as number);
          store.failIntent(ids[1] as number, 'x');
          throw new Error('crash before commit');
        }),
      ).toThrow('crash before commit');
      expect(store.listIntents({ states: ['pending'] }).map((i) => i.id)).toEqual(ids);
      expect(store.listIntents({ states: ['pending'], kind: 'terminate' }).map((i) => i.id)).toEqual(ids);
      store.completeIntent(ids[1] as number);
      expect(store.listIntents({ states: ['pending'] }).map((i) => i.id)).toEqual([ids[0], ids[2]]);
      expect(store.listIntents({ states: ['done'] }).map((i) => i.id)).toEqual([ids[1]]);
    });

    it('commits an intent and the state it describes together', () => {
      const result = store.transaction(() => {
        const inst = store.createInstance({ typeName: 'p3.2xlarge' });
        const intent = store.recordIntent({
          kind: 'launch',
          payload: { instanceId: inst.id, typeName: inst.typeName, launchToken: inst.launchToken },
        });
        return { inst, intent };
      });
      expect(store.getInstance(result.inst.id)?.state).toBe('requested');
      expect(store.getIntent(result.intent.id)?.state).toBe('pending');
    });

    it('rolls back only the inner part of a nested transaction that failed', () => {
      store.transaction(() => {
        store.submitJob(RESNET);
        expect(() =>
          store.transaction(() => {
            store.submitJob(FOAM);
            throw new Error('inner');
          }),
        ).toThrow('inner');
        store.submitJob(DDP);
      });
      expect(store.listJobs().map((j) => [j.id, j.name])).toEqual([
        ['job-1', 'resnet18-cifar10'],
        ['job-2', 'resnet18-ddp'],
      ]);
    });

    it('runs what afterCommit is given once the outermost transaction commits, never after a rollback', () => {
      const ran: string[] = [];
      store.afterCommit(() => ran.push('outside'));
      expect(ran).toEqual(['outside']);
      store.transaction(() => {
        store.submitJob(RESNET);
        store.afterCommit(() => ran.push('outer'));
        expect(() =>
          store.transaction(() => {
            store.afterCommit(() => ran.push('rolled back inner'));
            throw new Error('inner');
          }),
        ).toThrow('inner');
        store.transaction(() => store.afterCommit(() => ran.push('committed inner')));
        // Nothing before the outermost commit.
        expect(ran).toEqual(['outside']);
      });
      expect(ran).toEqual(['outside', 'outer', 'committed inner']);
      expect(() =>
        store.transaction(() => {
          store.afterCommit(() => ran.push('rolled back'));
          throw new Error('outer');
        }),
      ).toThrow('outer');
      store.transaction(() => undefined);
      expect(ran).toEqual(['outside', 'outer', 'committed inner']);
    });

    it('keeps a committed transaction when a hook run after its commit throws, passing the error on', () => {
      const ran: string[] = [];
      expect(() =>
        store.transaction(() => {
          store.setValue('committed', 1);
          store.createInstance({ typeName: 'p3.2xlarge' });
          store.afterCommit(() => {
            throw new Error('hook failed');
          });
          store.afterCommit(() => ran.push('after the failed hook'));
        }),
      ).toThrow('hook failed');
      expect(store.getValue('committed')).toBe(1);
      expect(store.listInstances().map((i) => i.id)).toEqual(['inst-1']);
      expect(store.createInstance({ typeName: 'c7i.large' }).id).toBe('inst-2');
      // The hooks after the one that threw do not run; the next transaction's do.
      expect(ran).toEqual([]);
      store.transaction(() => store.afterCommit(() => ran.push('next')));
      expect(ran).toEqual(['next']);
    });

    it('leaves no trace of a rejected state change', () => {
      const { id } = store.submitJob(RESNET);
      const events = store.listEvents().length;
      expect(() => store.setJobState(id, 'succeeded')).toThrow(IllegalTransitionError);
      expect(store.listEvents()).toHaveLength(events);
      expect(store.getJob(id)?.state).toBe('queued');
    });

    it('refuses async transaction functions', () => {
      expect(() => store.transaction(async () => 1)).toThrow();
      expect(store.listJobs()).toEqual([]);
    });

    it('does not let callers change stored records through returned objects', () => {
      const job = store.submitJob(RESNET);
      try {
        (job as unknown as { state: string }).state = 'running';
        (job.spec as unknown as { name: string }).name = 'changed';
      } catch {
        // frozen records throw in strict mode; either way the store must be unchanged
      }
      expect(store.getJob('job-1')?.state).toBe('queued');
      expect(store.getJob('job-1')?.spec.name).toBe('resnet18-cifar10');
    });
  });
});

describe('MemoryStateStore and the SQL stores agree on random operation sequences (property)', () => {
  type Op =
    | { op: 'submit'; which: number }
    | { op: 'job'; job: number; state: JobState }
    | {
        op: 'instance';
        inst: number;
        state: 'launching' | 'running' | 'draining' | 'terminating' | 'terminated';
      }
    | { op: 'create' }
    | {
        op: 'task';
        job: number;
        index: number;
        state: 'starting' | 'running' | 'stopped' | 'pending';
        inst: number | null;
      }
    | { op: 'intent'; inst: number; finish: 'done' | 'failed' | 'none'; keyed: boolean }
    | { op: 'rollback' }
    | { op: 'retry'; job: number; exitCode: number | null };
  const jobStates = [
    'queued',
    'starting',
    'running',
    'migrating',
    'succeeded',
    'failed',
    'cancelled',
    'unsuccessful',
  ] as const;
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ op: fc.constant('submit' as const), which: fc.integer({ min: 0, max: 2 }) }),
    fc.record({
      op: fc.constant('job' as const),
      job: fc.integer({ min: 1, max: 4 }),
      state: fc.constantFrom(...jobStates),
    }),
    fc.record({
      op: fc.constant('instance' as const),
      inst: fc.integer({ min: 1, max: 3 }),
      state: fc.constantFrom('launching', 'running', 'draining', 'terminating', 'terminated'),
    }),
    fc.record({ op: fc.constant('create' as const) }),
    fc.record({
      op: fc.constant('task' as const),
      job: fc.integer({ min: 1, max: 4 }),
      index: fc.integer({ min: 0, max: 1 }),
      state: fc.constantFrom('starting', 'running', 'stopped', 'pending'),
      inst: fc.option(fc.integer({ min: 1, max: 3 })),
    }),
    fc.record({
      op: fc.constant('intent' as const),
      inst: fc.integer({ min: 1, max: 3 }),
      finish: fc.constantFrom('done', 'failed', 'none'),
      keyed: fc.boolean(),
    }),
    fc.record({ op: fc.constant('rollback' as const) }),
    fc.record({
      op: fc.constant('retry' as const),
      job: fc.integer({ min: 1, max: 4 }),
      exitCode: fc.option(fc.integer({ min: 1, max: 255 })),
    }),
  );

  function apply(store: StateStore, op: Op): string {
    try {
      switch (op.op) {
        case 'submit':
          return store.submitJob([RESNET, DDP, FOAM][op.which] as JobSpec).id;
        case 'job':
          return store.setJobState(`job-${op.job}`, op.state).state;
        case 'instance':
          return store.setInstanceState(
            `inst-${op.inst}`,
            op.state,
            op.state === 'launching' ? { cloudId: `i-${op.inst}` } : {},
          ).state;
        case 'create':
          return store.createInstance({
            typeName: 'p3.8xlarge',
            launchToken: `t-${store.listInstances().length}`,
          }).id;
        case 'task':
          return store.setTaskState(
            `job-${op.job}.${op.index}`,
            op.state,
            op.inst === null ? undefined : `inst-${op.inst}`,
          ).state;
        case 'intent': {
          const intent = store.recordIntent(
            { kind: 'terminate', payload: { instanceId: `inst-${op.inst}` } },
            op.keyed ? { key: `terminate:inst-${op.inst}` } : {},
          );
          if (op.finish === 'done') store.completeIntent(intent.id);
          if (op.finish === 'failed') store.failIntent(intent.id, 'x');
          return String(intent.id);
        }
        case 'rollback':
          // Completes the oldest pending intent, then fails: the intent is pending again, in its place.
          return store.transaction(() => {
            const oldest = store.listIntents({ states: ['pending'] })[0];
            if (oldest === undefined) return 'none pending';
            store.completeIntent(oldest.id);
            throw new Error(`rolled back ${oldest.id}`);
          });
        case 'retry':
          return String(
            store.retryJob(
              `job-${op.job}`,
              {
                taskId: `job-${op.job}.0`,
                ...(op.exitCode === null ? {} : { exitCode: op.exitCode }),
                reason: 'failed',
              },
              'retrying',
            ).attempts,
          );
      }
    } catch (e) {
      return `${(e as Error).name}: ${(e as Error).message}`;
    }
  }

  function agreesWithMemory(name: string, make: (now: () => number) => StateStore, numRuns: number): void {
    it(`${name} gives the same results, errors and final state`, () => {
      fc.assert(
        fc.property(fc.array(opArb, { minLength: 1, maxLength: 40 }), (ops) => {
          let clock = 0;
          const now = (): number => clock;
          const memory = new MemoryStateStore({ nowSeconds: now, storeId: 'x' });
          const sql = make(now);
          try {
            for (const op of ops) {
              clock += 1;
              expect(apply(sql, op)).toEqual(apply(memory, op));
            }
            expect(sql.listJobs()).toEqual(memory.listJobs());
            // The window of a listing, at every time the ops could have ended a job.
            for (let since = 0; since <= clock + 1; since += 3) {
              expect(sql.listJobs({ endedSince: since })).toEqual(memory.listJobs({ endedSince: since }));
              expect(sql.countJobs({ endedSince: since })).toBe(memory.countJobs({ endedSince: since }));
            }
            for (const page of [{ limit: 1 }, { afterId: 'job-1', limit: 2 }, { afterId: 'job-2' }])
              expect(sql.listJobs(page)).toEqual(memory.listJobs(page));
            expect(sql.listTasks()).toEqual(memory.listTasks());
            const withoutToken = (s: StateStore) =>
              s.listInstances().map(({ launchToken: _t, ...rest }) => rest);
            expect(withoutToken(sql)).toEqual(withoutToken(memory));
            expect(sql.listIntents()).toEqual(memory.listIntents());
            expect(sql.listIntents({ states: ['pending'] })).toEqual(
              memory.listIntents({ states: ['pending'] }),
            );
            for (const inst of [1, 2, 3])
              expect(sql.getIntentByKey(`terminate:inst-${inst}`)).toEqual(
                memory.getIntentByKey(`terminate:inst-${inst}`),
              );
            expect(sql.listEvents()).toEqual(memory.listEvents());
          } finally {
            memory.close();
            sql.close();
          }
        }),
        { numRuns, seed: 11 },
      );
    });
  }
  agreesWithMemory('SqliteStateStore', (now) => new SqliteStateStore(':memory:', { nowSeconds: now }), 40);
  agreesWithMemory(
    'PostgresStateStore',
    (now) => new PostgresStateStore(freshPostgresUrl(), { nowSeconds: now }),
    40,
  );
});

describe('SqliteStateStore on disk', () => {
  it('gives an instance numbered again after a file-copy restore a launch token of its own', () => {
    // A backup taken by copying the closed file (not `fleetwise state restore`, which also renews the store id): the
    // restored state numbers instances from where the backup was, under the same store id.
    const path = freshDbPath();
    let now = 1000;
    new SqliteStateStore(path, { nowSeconds: () => now }).close();
    copyFileSync(path, `${path}.backup`);
    const before = new SqliteStateStore(path, { nowSeconds: () => now });
    const lost = before.createInstance({ typeName: 'c7i.large' });
    before.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
    copyFileSync(`${path}.backup`, path);
    now = 5000;
    const restored = new SqliteStateStore(path, { nowSeconds: () => now });
    const again = restored.createInstance({ typeName: 'c7i.large' });
    restored.close();
    expect(again.id).toBe(lost.id);
    expect(restored.storeId).toBe(before.storeId);
    // The lost history's launch would otherwise be found by EC2's ClientToken (and the launch-token tag) and taken
    // for this one.
    expect(again.launchToken).not.toBe(lost.launchToken);
  });

  it('reads the pending intents through their partial index, not by walking every intent ever recorded', () => {
    // The statements the store prepares, captured as it prepares them, then planned on the same database.
    const prepared: string[] = [];
    const prepare = Database.prototype.prepare;
    Database.prototype.prepare = function (this: Database.Database, sql: string) {
      prepared.push(sql);
      return prepare.call(this, sql);
    } as typeof prepare;
    const path = freshDbPath();
    try {
      const store = new SqliteStateStore(path, { nowSeconds: () => 1 });
      store.recordIntent({ kind: 'terminate', payload: { instanceId: 'inst-1' } });
      expect(store.listIntents({ states: ['pending'] })).toHaveLength(1);
      expect(store.listIntents({ states: ['pending'], kind: 'terminate' })).toHaveLength(1);
      store.close();
    } finally {
      Database.prototype.prepare = prepare;
    }
    const pendingReads = prepared.filter((sql) => /FROM intents WHERE state/.test(sql));
    expect(pendingReads).toHaveLength(2);
    const db = new Database(path, { readonly: true });
    try {
      for (const sql of pendingReads) {
        const params = (sql.match(/\?/g) ?? []).map(() => 'terminate');
        const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[];
        expect(plan.map((p) => p.detail).join('; ')).toContain('USING INDEX intents_pending');
      }
    } finally {
      db.close();
    }
  });

  it('runs in WAL mode with foreign keys and fsync on commit, and records its schema version', () => {
    const path = freshDbPath();
    const store = new SqliteStateStore(path);
    expect(store.info()).toMatchObject({
      journalMode: 'wal',
      foreignKeys: true,
      synchronous: 2,
      schemaVersion: LATEST_SCHEMA_VERSION,
    });
    store.close();
    const raw = new Database(path, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(raw.prepare('SELECT version, description FROM schema_migrations').all()).toEqual([
      { version: 1, description: expect.stringContaining('jobs') },
      { version: 2, description: expect.stringContaining('unsuccessful') },
      { version: 3, description: expect.stringContaining('attempts') },
      { version: 4, description: expect.stringContaining('placement group') },
      { version: 5, description: expect.stringContaining('events by job and kind') },
      { version: 6, description: expect.stringContaining('events by kind') },
    ]);
    // A round's reads of one kind of a job's or an instance's events go through an index on both.
    const plan = (sql: string) =>
      (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[])
        .map((r) => r.detail)
        .join('; ');
    expect(plan("SELECT * FROM events WHERE job_id = 'job-1' AND kind = 'job.state' ORDER BY seq")).toContain(
      'events_by_job_kind',
    );
    expect(
      plan(
        "SELECT * FROM events WHERE instance_id = 'inst-1' AND kind = 'instance.market-fallback' ORDER BY seq",
      ),
    ).toContain('events_by_instance_kind');
    // A pass's reads of tasks by state, and reads and deletions of a kind of event, through their indexes.
    expect(plan("SELECT * FROM tasks WHERE state IN ('running', 'starting') ORDER BY seq")).toContain(
      'tasks_by_state',
    );
    expect(
      plan("SELECT * FROM events WHERE kind IN ('task.state', 'job.co-start') AND seq > 10 ORDER BY seq"),
    ).toContain('events_by_kind');
    expect(
      plan("SELECT seq FROM events WHERE kind = 'task.checkpoint' AND at_seconds < 5 ORDER BY seq LIMIT 100"),
    ).toContain('events_by_kind');
    raw.close();
  });

  it('reads jobs and instances from memory, yet as committed: its own writes, rollbacks, other processes by the next turn', async () => {
    const path = freshDbPath();
    const store = new SqliteStateStore(path);
    const other = new SqliteStateStore(path);
    const job = store.submitJob(RESNET);
    const inst = store.createInstance({ typeName: 'c7i.2xlarge' });
    // Read twice: the second read is the first one's (frozen) record.
    expect(store.getJob(job.id)).toBe(store.getJob(job.id));
    expect(Object.isFrozen(store.getInstance(inst.id))).toBe(true);
    store.setJobState(job.id, 'starting');
    expect(store.getJob(job.id)?.state).toBe('starting');
    // A transaction that rolls back leaves what was committed.
    expect(() =>
      store.transaction(() => {
        store.setJobState(job.id, 'cancelled');
        expect(store.getJob(job.id)?.state).toBe('cancelled');
        throw new Error('roll back');
      }),
    ).toThrow('roll back');
    expect(store.getJob(job.id)?.state).toBe('starting');
    // Another connection (another process) commits: this one sees it from its next turn of the event loop on.
    other.setJobState(job.id, 'cancelled');
    other.setInstanceState(inst.id, 'launching');
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.getJob(job.id)?.state).toBe('cancelled');
    expect(store.getInstance(inst.id)?.state).toBe('launching');
    other.close();
    store.close();
  });

  it('keeps everything across close and reopen, migrating only once', () => {
    const path = freshDbPath();
    const first = new SqliteStateStore(path, { nowSeconds: () => 50 });
    const job = first.submitJob(FOAM);
    first.setJobState(job.id, 'starting');
    const inst = first.createInstance({ typeName: 'c7i.2xlarge' });
    first.setTaskState(`${job.id}.0`, 'starting', inst.id);
    first.recordRound(round(1));
    first.setValue('colocation-table', { defaultRate: 0.95, entries: [] });
    first.retryJob(job.id, { taskId: `${job.id}.0`, exitCode: 3, reason: 'exit code 3' }, 'retrying');
    const storeId = first.storeId;
    first.close();
    const second = new SqliteStateStore(path, { nowSeconds: () => 60 });
    expect(second.storeId).toBe(storeId);
    expect(second.getJob(job.id)).toMatchObject({
      state: 'queued',
      spec: FOAM,
      submittedAtSeconds: 50,
      attempts: 2,
      attemptFailures: [
        { attempt: 1, taskId: `${job.id}.0`, exitCode: 3, reason: 'exit code 3', atSeconds: 50 },
      ],
    });
    expect(second.getTask(`${job.id}.0`)?.instanceId).toBe(inst.id);
    expect(second.latestRound()?.round).toBe(1);
    expect(second.getValue('colocation-table')).toEqual({ defaultRate: 0.95, entries: [] });
    expect(second.submitJob(RESNET).id).toBe('job-2');
    second.close();
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) FROM schema_migrations').pluck().get()).toBe(LATEST_SCHEMA_VERSION);
    raw.close();
  });

  it('migrates a version-1 database to the unsuccessful job state, keeping rows and foreign keys', () => {
    const path = freshDbPath();
    const raw = new Database(path);
    raw.pragma('foreign_keys = ON');
    raw.exec(MIGRATIONS_TABLE_SQL);
    raw.exec((MIGRATIONS[0] as { sql: string }).sql);
    raw.prepare("INSERT INTO schema_migrations VALUES (1, 'v1', 0)").run();
    raw
      .prepare(
        "INSERT INTO jobs (seq, id, name, team, spec_json, state, submitted_at, updated_at) VALUES (7, 'job-7', 'foam', 'cfd', ?, 'running', 10, 10)",
      )
      .run(JSON.stringify(FOAM));
    raw
      .prepare(
        "INSERT INTO tasks (id, job_id, task_index, name, workload_key, state, updated_at) VALUES ('job-7.0', 'job-7', 0, 'main', 'k', 'pending', 10)",
      )
      .run();
    expect(() => raw.prepare("UPDATE jobs SET state = 'unsuccessful' WHERE id = 'job-7'").run()).toThrow(
      /CHECK constraint/,
    );
    raw.close();

    const store = new SqliteStateStore(path, { nowSeconds: () => 20 });
    expect(store.schemaVersion).toBe(LATEST_SCHEMA_VERSION);
    expect(store.info().foreignKeys).toBe(true);
    expect(store.getJob('job-7')).toMatchObject({
      state: 'running',
      spec: FOAM,
      submittedAtSeconds: 10,
      attempts: 1,
    });
    expect(store.getJob('job-7')?.attemptFailures).toBeUndefined();
    expect(store.setJobState('job-7', 'unsuccessful', 'stopped at stage 2').state).toBe('unsuccessful');
    expect(store.getTask('job-7.0')?.jobId).toBe('job-7');
    // New ids continue after the migrated rows, and foreign keys still hold.
    expect(store.submitJob(RESNET).id).toBe('job-8');
    store.close();
    const check = new Database(path);
    check.pragma('foreign_keys = ON');
    expect(() =>
      check
        .prepare(
          "INSERT INTO tasks (id, job_id, task_index, name, workload_key, state, updated_at) VALUES ('x.0', 'nope', 0, 'main', 'k', 'pending', 0)",
        )
        .run(),
    ).toThrow(/FOREIGN KEY/);
    expect(check.pragma('foreign_key_check')).toEqual([]);
    check.close();
  });

  it("migrates a version-3 database to instances' placement groups, keeping its instances", () => {
    const path = freshDbPath();
    const raw = new Database(path);
    raw.pragma('foreign_keys = ON');
    raw.exec(MIGRATIONS_TABLE_SQL);
    for (const m of MIGRATIONS.filter((x) => x.version <= 3)) {
      raw.exec(m.sql);
      raw.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.description);
    }
    raw
      .prepare(
        "INSERT INTO instances (seq, id, cloud_id, type_name, state, availability_zone, launch_token, requested_at, updated_at) VALUES (4, 'inst-4', 'i-04', 'c7i.large', 'running', 'us-east-1a', 'tok-4', 10, 10)",
      )
      .run();
    raw.close();

    const store = new SqliteStateStore(path, { nowSeconds: () => 20 });
    expect(store.schemaVersion).toBe(LATEST_SCHEMA_VERSION);
    const before = store.getInstance('inst-4');
    expect(before).toMatchObject({ cloudId: 'i-04', availabilityZone: 'us-east-1a', state: 'running' });
    expect(before?.placementGroup).toBeUndefined();
    expect(store.createInstance({ typeName: 'c7i.large', placementGroup: 'job-1' })).toMatchObject({
      id: 'inst-5',
      placementGroup: 'job-1',
    });
    store.close();
  });

  it('gives every database its own launch-token prefix', () => {
    const a = new SqliteStateStore(freshDbPath());
    const b = new SqliteStateStore(freshDbPath());
    const ta = a.createInstance({ typeName: 'c7i.large' }).launchToken;
    const tb = b.createInstance({ typeName: 'c7i.large' }).launchToken;
    expect(ta).not.toBe(tb);
    expect(ta.startsWith(a.storeId)).toBe(true);
    a.close();
    b.close();
  });

  it('refuses a database written by a newer schema version, clearly', () => {
    const path = freshDbPath();
    new SqliteStateStore(path).close();
    const raw = new Database(path);
    raw
      .prepare('INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)')
      .run(LATEST_SCHEMA_VERSION + 1, 'future', 0);
    raw.close();
    expect(() => new SqliteStateStore(path)).toThrow(SchemaVersionError);
    expect(() => new SqliteStateStore(path)).toThrow(
      `database schema version ${LATEST_SCHEMA_VERSION + 1} is newer than this fleetwise supports (${LATEST_SCHEMA_VERSION})`,
    );
  });

  it('refuses a SQLite file that is not a fleetwise database', () => {
    const path = freshDbPath();
    const raw = new Database(path);
    raw.exec('CREATE TABLE customers (id INTEGER)');
    raw.close();
    expect(() => new SqliteStateStore(path)).toThrow(
      'is not a fleetwise state database (it has tables customers)',
    );
  });

  it('names a damaged state file and how to get a state back, on opening and on the first read of its damage', () => {
    const messageOf = (path: string): string => {
      try {
        const store = new SqliteStateStore(path);
        try {
          store.listJobs();
        } finally {
          store.close();
        }
      } catch (e) {
        expect(e).toBeInstanceOf(StateStoreFaultError);
        return (e as Error).message;
      }
      throw new Error(`expected ${path} to be refused`);
    };
    const advice = /the state database is damaged\. Move it aside .*--restore-from.*--init/;
    // Not SQLite at all: refused as it opens.
    const garbage = freshDbPath();
    writeFileSync(garbage, Buffer.alloc(8192, 0x5a));
    const notADatabase = messageOf(garbage);
    expect(notADatabase).toContain(`${garbage}: file is not a database`);
    expect(notADatabase).toMatch(advice);
    // A page of the jobs table overwritten: the file opens, and the first read of that page says so.
    const damaged = freshDbPath();
    const store = new SqliteStateStore(damaged);
    for (let i = 0; i < 20; i += 1) store.submitJob(RESNET);
    store.close();
    const raw = new Database(damaged, { readonly: true });
    const pageSize = Number(raw.pragma('page_size', { simple: true }));
    const root = Number(raw.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'jobs'").pluck().get());
    raw.close();
    const bytes = readFileSync(damaged);
    bytes.fill(0xff, (root - 1) * pageSize, root * pageSize);
    writeFileSync(damaged, bytes);
    const malformed = messageOf(damaged);
    expect(malformed).toContain(`${damaged}: database disk image is malformed`);
    expect(malformed).toMatch(advice);
  });

  it('enforces foreign keys', () => {
    const store = new SqliteStateStore(freshDbPath());
    store.close();
    const raw = new Database(store.path);
    raw.pragma('foreign_keys = ON');
    expect(() =>
      raw
        .prepare(
          "INSERT INTO tasks (id, job_id, task_index, name, workload_key, state, updated_at) VALUES ('x', 'job-404', 0, 'n', 'w', 'pending', 0)",
        )
        .run(),
    ).toThrow(/FOREIGN KEY/);
    raw.close();
  });

  it('never writes raw tokens to disk', () => {
    const store = new SqliteStateStore(freshDbPath());
    const teamToken = 'TEAMSECRET-7f3a9c1e5b2d4f60';
    const workerToken = 'WORKERSECRET-0d9e8c7b6a5f4e3d';
    store.addTeamToken('vision', teamToken);
    store.setWorkerToken(store.createInstance({ typeName: 'c7i.large' }).id, workerToken);
    const files = [store.path, `${store.path}-wal`].filter(existsSync).map((f) => readFileSync(f));
    store.close();
    for (const bytes of files) {
      expect(bytes.includes(teamToken)).toBe(false);
      expect(bytes.includes(workerToken)).toBe(false);
    }
    expect(files.some((b) => b.includes(createHash('sha256').update(teamToken).digest('hex')))).toBe(true);
  });
});

// ---- crash safety: a child process writes and is SIGKILLed, then the database is reopened -----------------------

/**
 * Transpile the store and the modules it imports (followed from `import … from './….js'`) into a scratch directory,
 * so a plain `node` child runs the real store without a build. Only the import closure, to stay quick.
 */
async function transpileStore(outDir: string): Promise<void> {
  const ts = (await import('typescript')).default;
  const pending = [join(PROJECT_ROOT, 'src', 'controller', 'state', 'sqlite-state-store.ts')];
  const done = new Set<string>();
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (done.has(file)) continue;
    done.add(file);
    const source = readFileSync(file, 'utf8');
    for (const m of source.matchAll(/from '(\.{1,2}\/[^']+)\.js'/g))
      pending.push(join(dirname(file), `${m[1]}.ts`));
    const out = join(outDir, relative(PROJECT_ROOT, file)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(out), { recursive: true });
    const { outputText } = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      fileName: file,
    });
    writeFileSync(out, outputText);
  }
  writeFileSync(join(outDir, 'package.json'), '{"type":"module"}');
  symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(outDir, 'node_modules'), 'dir');
}

const CHILD = `
import { SqliteStateStore } from './src/controller/state/sqlite-state-store.js';
const [path, specJson, mode, commitsText] = process.argv.slice(2);
const spec = JSON.parse(specJson);
const store = new SqliteStateStore(path);
const say = (line) => process.stdout.write(line + '\\n');
// Bounded in time, so an orphan (parent gone before it could kill us) exits on its own.
const deadline = Date.now() + 30_000;
for (let n = 1; (mode === 'forever' || n <= Number(commitsText)) && Date.now() < deadline; n++) {
  if (n % 10 === 0) {
    // One big transaction: 100 events of batch n commit together or not at all.
    store.transaction(() => {
      for (let i = 0; i < 100; i++) store.appendEvent({ kind: 'test.batch', data: { batch: n, i } });
    });
  } else {
    const job = store.submitJob(spec);
    store.setJobState(job.id, 'starting');
  }
  say('committed ' + n);
}
if (mode === 'hang') {
  store.transaction(() => {
    store.submitJob(spec);
    for (let i = 0; i < 100; i++) store.appendEvent({ kind: 'test.uncommitted', data: { i } });
    say('inside');
    while (Date.now() < deadline) {}
  });
}
process.exit(3);
`;

interface ChildRun {
  readonly lastCommitted: number;
}

async function runAndKill(
  dir: string,
  path: string,
  mode: 'hang' | 'forever',
  commits: number,
): Promise<ChildRun> {
  const child = spawn(
    process.execPath,
    [join(dir, 'child.mjs'), path, JSON.stringify(RESNET), mode, String(commits)],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let lastCommitted = 0;
  let stderr = '';
  let buffer = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('exit', (_code, signal) => resolve(signal)),
  );
  child.stdout.on('data', (d: Buffer) => {
    buffer += d.toString();
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      const m = /^committed (\d+)$/.exec(line);
      if (m !== null) lastCommitted = Number(m[1]);
      const killNow = mode === 'hang' ? line === 'inside' : lastCommitted >= commits;
      if (killNow && child.exitCode === null && !child.killed) child.kill('SIGKILL');
    }
  });
  const signal = await exited;
  expect(signal, `child did not die by SIGKILL; stderr: ${stderr}`).toBe('SIGKILL');
  return { lastCommitted };
}

describe('SqliteStateStore crash safety (child process killed with SIGKILL)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fleetwise-crash-'));
  beforeAll(async () => {
    await transpileStore(dir);
    writeFileSync(join(dir, 'child.mjs'), CHILD);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function checkCommitted(path: string, lastCommitted: number): SqliteStateStore {
    const integrity = new Database(path);
    expect(integrity.pragma('integrity_check', { simple: true })).toBe('ok');
    integrity.close();
    const store = new SqliteStateStore(path);
    const jobs = store.listJobs();
    const committedJobs = Array.from({ length: lastCommitted }, (_, i) => i + 1).filter(
      (n) => n % 10 !== 0,
    ).length;
    // Every reported commit is there; at most one more (committed, killed before it was reported).
    expect(jobs.length).toBeGreaterThanOrEqual(committedJobs);
    expect(jobs.length).toBeLessThanOrEqual(committedJobs + 1);
    expect(jobs.slice(0, committedJobs).every((j) => j.state === 'starting')).toBe(true);
    expect(store.listTasks()).toHaveLength(jobs.length);
    const batches = new Map<number, number>();
    for (const e of store.listEvents({ kind: 'test.batch' })) {
      const batch = (e.data as { batch: number }).batch;
      batches.set(batch, (batches.get(batch) ?? 0) + 1);
    }
    for (const [batch, count] of batches) expect(count, `batch ${batch}`).toBe(100);
    for (let n = 10; n <= lastCommitted; n += 10) expect(batches.get(n), `batch ${n}`).toBe(100);
    return store;
  }

  it('keeps every committed transaction and none of the one open when killed', async () => {
    const path = join(dir, 'hang.db');
    const { lastCommitted } = await runAndKill(dir, path, 'hang', 60);
    expect(lastCommitted).toBe(60);
    const store = checkCommitted(path, 60);
    expect(store.listJobs()).toHaveLength(54);
    expect(store.listEvents({ kind: 'test.uncommitted' })).toEqual([]);
    expect(store.submitJob(RESNET).id).toBe('job-55');
    expect(store.info().journalMode).toBe('wal');
    store.close();
  });

  it('survives being killed at an arbitrary point while writing', async () => {
    const path = join(dir, 'forever.db');
    const { lastCommitted } = await runAndKill(dir, path, 'forever', 80);
    expect(lastCommitted).toBeGreaterThanOrEqual(80);
    const store = checkCommitted(path, lastCommitted);
    store.setJobState('job-1', 'running');
    store.close();
  });
});
