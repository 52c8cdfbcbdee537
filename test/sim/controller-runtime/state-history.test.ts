import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryStateStore } from '../../../src/controller/memory-state-store.js';
import { SqliteStateStore } from '../../../src/controller/state/sqlite-state-store.js';
import type { EventRecord, JobRecord, JobState } from '../../../src/controller/state-store.js';
import type { JobSpec } from '../../../src/controller/job-spec/spec.js';
import { ValidationError } from '../../../src/core/validation.js';
import { readSqliteStateHistory } from '../../../src/sim/controller-runtime/read-state-history.js';
import {
  historyEvents,
  historyTrace,
  runningSeconds,
  WORK_EVENT_KINDS,
} from '../../../src/sim/controller-runtime/state-history.js';
import { fleetwiseTrace } from '../../../src/sim/traces/fleetwise-json.js';
import { asNobody, NOBODY } from '../../helpers/as-nobody.js';
import { example, exportedJobsOf, writeJobHistory } from '../../helpers/job-history.js';

const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-state-history-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function clock() {
  let now = 0;
  return { now: () => now, set: (t: number) => void (now = t) };
}

const sha256 = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

describe("a controller's job history as a trace", () => {
  it('measures running time over moves, declares what never finished, leaves out what never ran', () => {
    const c = clock();
    const store = new MemoryStateStore({ nowSeconds: c.now });
    const expected = writeJobHistory(store, c);
    const history = { jobs: store.listJobs(), jobStateEvents: store.listEvents({ kind: 'job.state' }) };
    expect(runningSeconds(history.jobStateEvents).get('job-1')).toBe(980);

    const { document, skipped } = historyTrace(history, { name: 'h', source: 'memory' });
    expect(skipped.map((s) => s.id)).toEqual(expected.skipped);
    expect(skipped.map((s) => s.reason)).toEqual([
      'cancelled without ever running',
      'running, not finished, and its spec declares no expectedDurationSeconds',
    ]);
    expect(exportedJobsOf(document)).toEqual(expected.exported);
    // Every task keeps the co-location key the controller stored for it.
    const ddp = document.jobs[2];
    expect(ddp?.tasks.map((t) => t.workload)).toEqual(
      store.listTasks({ jobId: 'job-3' }).map((t) => t.workloadKey),
    );
    // What it writes is a valid fleetwise trace.
    expect(fleetwiseTrace(document, 'h').jobs).toHaveLength(3);
  });

  it('keeps the dependencies of a pipeline, and leaves out a job whose dependency is left out', () => {
    const c = clock();
    const store = new MemoryStateStore({ nowSeconds: c.now });
    const step = (name: string, dependsOn?: string[]) =>
      store.submitJob({
        ...example('resnet.yaml'),
        name,
        expectedDurationSeconds: 600,
        ...(dependsOn === undefined ? {} : { dependsOn }),
      }).id;
    c.set(100);
    const prepare = step('prepare'); // job-1: ran and succeeded
    c.set(110);
    const train = step('train', [prepare]); // job-2: held no more, queued with a declared duration
    c.set(120);
    const { expectedDurationSeconds: _d, ...unsized } = example('resnet.yaml');
    const probe = store.submitJob({ ...unsized, name: 'probe' }).id; // job-3: running, no declared duration
    c.set(130);
    const report = step('report', [train, probe]); // job-4: held for one left out
    c.set(200);
    store.setJobState(prepare, 'starting');
    store.setJobState(prepare, 'running');
    store.setJobState(probe, 'starting');
    store.setJobState(probe, 'running');
    c.set(500);
    store.setJobState(prepare, 'succeeded');
    const history = { jobs: store.listJobs(), jobStateEvents: store.listEvents({ kind: 'job.state' }) };
    const { document, skipped } = historyTrace(history, { name: 'pipeline', source: 'memory' });
    expect(skipped).toEqual([
      { id: probe, reason: 'running, not finished, and its spec declares no expectedDurationSeconds' },
      { id: report, reason: `it depends on ${probe}, which is not in the trace` },
    ]);
    expect(document.jobs.map((j) => [j.id, j.dependsOn])).toEqual([
      [prepare, undefined],
      [train, [prepare]],
    ]);
    // It replays: the simulator holds train until prepare has ended.
    expect(fleetwiseTrace(document, 'pipeline').jobs[1]?.dependsOn).toEqual([prepare]);
  });

  it('leaves out a job waiting for a failed job it kept, so what it exports replays', () => {
    const c = clock();
    const store = new MemoryStateStore({ nowSeconds: c.now });
    const step = (name: string, dependsOn?: string[]) =>
      store.submitJob({
        ...example('resnet.yaml'),
        name,
        expectedDurationSeconds: 600,
        ...(dependsOn === undefined ? {} : { dependsOn }),
      }).id;
    c.set(100);
    const prepare = step('prepare'); // ran, then failed: kept as successful: false
    c.set(110);
    const train = step('train', [prepare]); // still queued with a declared duration
    c.set(200);
    store.setJobState(prepare, 'starting');
    store.setJobState(prepare, 'running');
    c.set(500);
    store.setJobState(prepare, 'failed');
    const history = { jobs: store.listJobs(), jobStateEvents: store.listEvents({ kind: 'job.state' }) };
    const { document, skipped } = historyTrace(history, { name: 'failed', source: 'memory' });
    expect(skipped).toEqual([
      {
        id: train,
        reason: `it depends on ${prepare}, which failed (successful: false in the trace), so it could never start`,
      },
    ]);
    expect(document.jobs.map((j) => [j.id, j.successful])).toEqual([[prepare, false]]);
    expect(fleetwiseTrace(document, 'failed').jobs).toHaveLength(1);
  });

  it('reads a SQLite state read-only: same records as the store, the file left as it was', () => {
    const c = clock();
    const path = join(tmp, 'state.db');
    const store = new SqliteStateStore(path, { nowSeconds: c.now });
    writeJobHistory(store, c);
    const jobs = store.listJobs();
    const events = store.listEvents({ kind: 'job.state' });
    store.close();
    const before = sha256(path);
    const files = readdirSync(tmp).sort();

    const history = readSqliteStateHistory(path);
    expect(history.jobs).toEqual(jobs);
    expect(history.jobStateEvents).toEqual(events);
    expect(sha256(path)).toBe(before);
    // A WAL reader coordinates through the -shm file, which SQLite creates; it writes nothing to the log.
    expect(readdirSync(tmp).filter((f) => !files.includes(f) && !/^state\.db-(shm|wal)$/.test(f))).toEqual(
      [],
    );
    const wal = `${path}-wal`;
    if (existsSync(wal)) expect(statSync(wal).size).toBe(0);
  });

  it('reads a state in a directory this user cannot write to (SQLite cannot make state.db-shm there) from a copy', async () => {
    // Root reads and writes through any mode: only another user (nobody) meets a read-only state directory.
    const place = mkdtempSync(join(tmpdir(), 'fleetwise-read-only-state-'));
    const planted: string[] = [];
    try {
      chmodSync(place, 0o755);
      const c = clock();
      const live = join(place, 'live.db');
      const store = new SqliteStateStore(live, { nowSeconds: c.now });
      writeJobHistory(store, c);
      const jobs = store.listJobs();
      const events = store.listEvents({ kind: 'job.state' });
      // A state as a controller that still runs (or was killed) leaves it: commits in state.db-wal, no -shm; and one
      // closed cleanly, all in state.db.
      const running = join(place, 'running');
      const closed = join(place, 'closed');
      for (const dir of [running, closed]) mkdirSync(dir, { mode: 0o755 });
      expect(statSync(`${live}-wal`).size).toBeGreaterThan(0);
      copyFileSync(live, join(running, 'state.db'));
      copyFileSync(`${live}-wal`, join(running, 'state.db-wal'));
      store.close();
      copyFileSync(live, join(closed, 'state.db'));
      for (const dir of [running, closed])
        for (const f of readdirSync(dir)) chownSync(join(dir, f), NOBODY, NOBODY);
      const contents = (dir: string): string[] =>
        readdirSync(dir)
          .sort()
          .map((f) => `${f} ${sha256(join(dir, f))}`);
      const before = [contents(running), contents(closed)];
      // The copies nobody makes (none but this test reads a state as nobody).
      const copiesLeft = (): string[] =>
        readdirSync(tmpdir()).filter(
          (f) => f.startsWith('fleetwise-export-') && statSync(join(tmpdir(), f)).uid === NOBODY,
        );
      // Copies a killed export left (a signal skips its cleanup): nobody's own with its process gone is removed; one
      // whose process runs, and another user's, stay.
      const deadPid = spawnSync('true').pid as number;
      const abandoned = join(tmpdir(), `fleetwise-export-${deadPid}-abandoned`);
      const inUse = join(tmpdir(), `fleetwise-export-${process.pid}-in-use`);
      const others = join(tmpdir(), `fleetwise-export-${deadPid}-root`);
      planted.push(abandoned, inUse, others);
      for (const d of [abandoned, inUse, others]) {
        mkdirSync(d, { mode: 0o700 });
        writeFileSync(join(d, 'state.db'), 'a copy');
      }
      for (const d of [abandoned, inUse]) {
        chownSync(d, NOBODY, NOBODY);
        chownSync(join(d, 'state.db'), NOBODY, NOBODY);
      }
      const leftBefore = copiesLeft().filter((f) => !f.includes('-abandoned'));

      for (const dir of [running, closed]) {
        const history = await asNobody(async () => readSqliteStateHistory(join(dir, 'state.db')));
        expect(history.jobs).toEqual(jobs);
        expect(history.jobStateEvents).toEqual(events);
      }
      // The state as it was, and no copy left behind.
      expect([contents(running), contents(closed)]).toEqual(before);
      expect(copiesLeft()).toEqual(leftBefore);
      expect(existsSync(abandoned)).toBe(false);
      expect(existsSync(inUse)).toBe(true);
      expect(existsSync(others)).toBe(true);

      // No copy can be made either (its log is another user's): say why, and what to do.
      chownSync(join(running, 'state.db-wal'), 0, 0);
      const refused = await asNobody(async () => {
        try {
          readSqliteStateHistory(join(running, 'state.db'));
        } catch (e) {
          return e;
        }
        throw new Error('expected the read to be refused');
      });
      expect(refused).toBeInstanceOf(ValidationError);
      expect((refused as ValidationError).source).toBe(join(running, 'state.db'));
      const problems = (refused as ValidationError).problems.join('; ');
      expect(problems).toMatch(/SQLite must write state\.db-shm beside it, which this user cannot/);
      expect(problems).toMatch(/copying it to a temporary directory failed \(EACCES/);
      expect(problems).toMatch(/copy the state directory somewhere writable and export from the copy/);
      expect(problems).not.toMatch(/not a fleetwise state database/);
      expect(copiesLeft()).toEqual(leftBefore);

      // A database this user cannot read at all is that, not a directory to copy it from.
      chownSync(join(closed, 'state.db'), 0, 0);
      const unreadable = await asNobody(async () => {
        try {
          readSqliteStateHistory(join(closed, 'state.db'));
        } catch (e) {
          return e;
        }
        throw new Error('expected the read to be refused');
      });
      expect((unreadable as Error).message).toMatch(/state\.db: cannot open the state database: EACCES/);
      expect((unreadable as Error).message).not.toMatch(/-shm/);
    } finally {
      rmSync(place, { recursive: true, force: true });
      for (const d of planted) rmSync(d, { recursive: true, force: true });
    }
  });

  it('reads the events that say when a job worked, and measures a waiting move and a lost instance by them', () => {
    const c = clock();
    const store = new SqliteStateStore(join(tmp, 'work.db'), { nowSeconds: c.now });
    const at = (t: number, change: () => void): void => {
      c.set(t);
      change();
    };
    c.set(1000);
    const job = store.submitJob(example('resnet.yaml')).id;
    const task = `${job}.0`;
    const [first, second] = ['i-1', 'i-2'].map((cloudId) => {
      const inst = store.createInstance({ typeName: 'c7i.xlarge' });
      store.setInstanceState(inst.id, 'launching', { cloudId });
      return store.setInstanceState(inst.id, 'running').id;
    });
    const runOn = (instanceId: string | undefined, t: number): void => {
      at(t, () => {
        store.setTaskState(task, 'starting', instanceId);
        store.setJobState(job, 'starting');
      });
      at(t + 10, () => {
        store.setTaskState(task, 'running');
        store.setJobState(job, 'running');
      });
    };
    runOn(first, 1010);
    // A move that waits for its new instance from 1100; its task is told to stop at 1300.
    at(1100, () => {
      store.appendEvent({ kind: 'job.move-waits', jobId: job, message: 'waits', data: { round: 2 } });
      store.setJobState(job, 'migrating', 'moving (round 2)');
    });
    at(1300, () => store.setTaskState(task, 'checkpointing'));
    at(1310, () => store.setTaskState(task, 'stopped'));
    runOn(second, 1310);
    // Its instance ended at 1500, unseen until 2000.
    at(2000, () => {
      store.appendEvent({
        kind: 'job.ran-until',
        jobId: job,
        message: 'lost',
        data: { ranUntilSeconds: 1500 },
      });
      store.setTaskState(task, 'pending');
      store.setJobState(job, 'queued');
    });
    runOn(first, 2010);
    at(2100, () => store.setJobState(job, 'succeeded'));
    const inStore = store.listEvents({ kinds: WORK_EVENT_KINDS });
    store.close();

    const history = readSqliteStateHistory(join(tmp, 'work.db'));
    // Of the task's changes only the one into checkpointing; the other work events all.
    expect(history.workEvents).toEqual(
      inStore.filter((e) => e.kind !== 'task.state' || (e.data as { to?: string }).to === 'checkpointing'),
    );
    expect(history.workEvents?.map((e) => [e.kind, e.atSeconds])).toEqual([
      ['job.move-waits', 1100],
      ['task.state', 1300],
      ['job.ran-until', 2000],
    ]);
    expect(runningSeconds(historyEvents(history)).get(job)).toBe(1300 - 1020 + (1500 - 1320) + (2100 - 2020));
  });

  it('refuses what is not a fleetwise state, naming the file', () => {
    const problemsOf = (path: string): string => {
      try {
        readSqliteStateHistory(path);
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        expect((e as ValidationError).source).toBe(path);
        return (e as ValidationError).problems.join('; ');
      }
      throw new Error('expected a validation error');
    };
    expect(problemsOf(join(tmp, 'missing.db'))).toMatch(/no controller state here/);
    const text = join(tmp, 'text.db');
    writeFileSync(text, 'hello, not SQLite\n'.repeat(10));
    expect(problemsOf(text)).toMatch(/not a fleetwise state database/);
    const other = join(tmp, 'other.db');
    const db = new Database(other);
    db.exec('CREATE TABLE jobs (id TEXT)');
    db.close();
    expect(problemsOf(other)).toMatch(
      /not a fleetwise state database: no schema_migrations, events tables \(it has jobs\)/,
    );
    expect(existsSync(join(tmp, 'missing.db'))).toBe(false);
  });
});

describe('export-trace durations and scale', () => {
  const record = (id: string, spec: JobSpec, submittedAtSeconds: number, state: JobState): JobRecord => ({
    id,
    name: spec.name,
    team: spec.team,
    spec,
    state,
    submittedAtSeconds,
    updatedAtSeconds: submittedAtSeconds,
    completedIterations: 0,
    migrations: 0,
    attempts: 1,
  });
  const change = (
    seq: number,
    jobId: string,
    atSeconds: number,
    from: JobState,
    to: JobState,
  ): EventRecord => ({
    seq,
    atSeconds,
    kind: 'job.state',
    jobId,
    data: { from, to },
  });

  it('takes the declared init delay off each running stretch, since the replay adds it on every start', () => {
    const spec = example('resnet.yaml'); // initDelaySeconds: 80
    expect(spec.checkpoint.initDelaySeconds).toBe(80);
    const jobs = [record('job-1', spec, 0, 'succeeded'), record('job-2', spec, 10, 'failed')];
    const events = [
      change(1, 'job-1', 100, 'starting', 'running'),
      change(2, 'job-1', 600, 'running', 'migrating'), // 500 s running: 80 s init, 420 s of progress
      change(3, 'job-1', 700, 'starting', 'running'),
      change(4, 'job-1', 1000, 'running', 'succeeded'), // 300 s: 80 s init, 220 s of progress
      change(5, 'job-2', 100, 'starting', 'running'),
      change(6, 'job-2', 150, 'running', 'failed'), // failed within its init: no progress, but it ran
    ];
    const { document, skipped } = historyTrace({ jobs, jobStateEvents: events }, { name: 'h', source: 'x' });
    expect(skipped).toEqual([]);
    expect(document.jobs.map((j) => [j.id, j.durationSeconds, j.initDelaySeconds])).toEqual([
      ['job-1', 420 + 220, 80],
      ['job-2', 1, 80],
    ]);
    // Without init delays, the raw running time is still what runningSeconds sums.
    expect(runningSeconds(events).get('job-1')).toBe(800);
  });

  const event = (
    seq: number,
    kind: string,
    jobId: string,
    atSeconds: number,
    data: Record<string, string | number>,
  ): EventRecord => ({ seq, atSeconds, kind, jobId, data });

  it("counts a make-before-break move's wait as running, up to its tasks' stop", () => {
    const spec = example('resnet.yaml'); // initDelaySeconds: 80
    const jobs = ['job-1', 'job-2', 'job-3', 'job-4'].map((id) => record(id, spec, 0, 'succeeded'));
    const waiting = 'moving (round 3): works on until its new instances are ready';
    const jobStateEvents = [
      // job-1: the move waits from 200 (its marker is a work event) until its task is told to stop at 260.
      change(1, 'job-1', 100, 'starting', 'running'),
      change(3, 'job-1', 200, 'running', 'migrating'),
      change(6, 'job-1', 270, 'migrating', 'starting'),
      change(7, 'job-1', 280, 'starting', 'running'),
      change(8, 'job-1', 400, 'running', 'succeeded'),
      // job-2: as a state written before the marker says it, by its reason alone.
      change(10, 'job-2', 100, 'starting', 'running'),
      {
        ...change(11, 'job-2', 200, 'running', 'migrating'),
        data: { from: 'running', to: 'migrating', reason: waiting },
      },
      change(13, 'job-2', 270, 'migrating', 'starting'),
      change(14, 'job-2', 280, 'starting', 'running'),
      change(15, 'job-2', 400, 'running', 'succeeded'),
      // job-3: a move that stops at once (its task checkpoints in the same change).
      change(20, 'job-3', 100, 'starting', 'running'),
      change(22, 'job-3', 200, 'running', 'migrating'),
      change(23, 'job-3', 270, 'migrating', 'starting'),
      change(24, 'job-3', 280, 'starting', 'running'),
      change(25, 'job-3', 400, 'running', 'succeeded'),
      // job-4: a waiting move called off at 250: one stretch, one init.
      change(30, 'job-4', 100, 'starting', 'running'),
      change(32, 'job-4', 200, 'running', 'migrating'),
      change(33, 'job-4', 250, 'migrating', 'running'),
      change(34, 'job-4', 400, 'running', 'succeeded'),
    ];
    const workEvents = [
      event(2, 'job.move-waits', 'job-1', 200, { round: 3 }),
      event(4, 'task.state', 'job-1', 260, { from: 'running', to: 'checkpointing' }),
      event(5, 'task.state', 'job-1', 270, { from: 'checkpointing', to: 'stopped' }),
      event(12, 'task.state', 'job-2', 260, { from: 'running', to: 'checkpointing' }),
      event(21, 'task.state', 'job-3', 200, { from: 'running', to: 'checkpointing' }),
      event(31, 'job.move-waits', 'job-4', 200, { round: 3 }),
    ];
    const history = { jobs, jobStateEvents, workEvents };
    expect(Object.fromEntries(runningSeconds(historyEvents(history)))).toEqual({
      'job-1': 160 + 120,
      'job-2': 160 + 120,
      'job-3': 100 + 120,
      'job-4': 300,
    });
    const { document } = historyTrace(history, { name: 'h', source: 'x' });
    expect(document.jobs.map((j) => [j.id, j.durationSeconds])).toEqual([
      ['job-1', 160 - 80 + (120 - 80)],
      ['job-2', 160 - 80 + (120 - 80)],
      ['job-3', 100 - 80 + (120 - 80)],
      ['job-4', 300 - 80],
    ]);
    // Without its work events a history counts only the time in running.
    expect(runningSeconds(jobStateEvents).get('job-1')).toBe(100 + 120);
  });

  it('ends a running stretch where the work on a lost instance ended, never outside the stretch', () => {
    const lost = (seq: number, jobId: string, at: number, ranUntilSeconds: number): EventRecord[] => [
      event(seq, 'job.ran-until', jobId, at, { ranUntilSeconds }),
      change(seq + 1, jobId, at, 'running', 'queued'),
    ];
    const again = (seq: number, jobId: string): EventRecord[] => [
      change(seq, jobId, 600, 'queued', 'starting'),
      change(seq + 1, jobId, 620, 'starting', 'running'),
      change(seq + 2, jobId, 700, 'running', 'succeeded'),
    ];
    const events = [
      // job-1: stopped with the controller at 160, back in the queue when it restarted at 500.
      change(1, 'job-1', 100, 'starting', 'running'),
      ...lost(2, 'job-1', 500, 160),
      ...again(4, 'job-1'),
      // job-2: an end after the change (clocks apart) ends it at the change; job-3: one before its start, at its start.
      change(10, 'job-2', 100, 'starting', 'running'),
      ...lost(11, 'job-2', 500, 900),
      ...again(13, 'job-2'),
      change(20, 'job-3', 100, 'starting', 'running'),
      ...lost(21, 'job-3', 500, 50),
      ...again(23, 'job-3'),
      // job-4: an end recorded while it did not work is not carried to its next stretch.
      event(30, 'job.ran-until', 'job-4', 550, { ranUntilSeconds: 560 }),
      ...again(31, 'job-4'),
    ];
    expect(Object.fromEntries(runningSeconds(events))).toEqual({
      'job-1': 60 + 80,
      'job-2': 400 + 80,
      'job-3': 0 + 80,
      'job-4': 80,
    });
  });

  it('exports a history of 200,000 jobs (no spread of every job into one call)', () => {
    const spec = example('resnet.yaml');
    const n = 200_000;
    const jobs: JobRecord[] = [];
    const events: EventRecord[] = [];
    for (let i = 0; i < n; i++) {
      const id = `job-${i + 1}`;
      jobs.push(record(id, spec, 1000 + i, 'succeeded'));
      events.push(change(2 * i, id, 2000 + i, 'starting', 'running'));
      events.push(change(2 * i + 1, id, 3000 + i, 'running', 'succeeded'));
    }
    const { document } = historyTrace({ jobs, jobStateEvents: events }, { name: 'big', source: 'x' });
    expect(document.jobs).toHaveLength(n);
    expect(document.jobs[0]?.arrivalSeconds).toBe(0);
    expect(document.jobs[n - 1]?.arrivalSeconds).toBe(n - 1);
  }, 60_000);
});
