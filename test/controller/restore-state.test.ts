import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSubmission, forgetSubmissionKey, requestHashOf } from '../../src/controller/submission-keys.js';
import { parseRestoreSource } from '../../src/controller/backup/restore-source.js';
import {
  RestoreError,
  restoreState,
  type RestoreSummary,
} from '../../src/controller/backup/restore-state.js';
import { describeRestore } from '../../src/cli/controller-backups.js';
import { StateBackup } from '../../src/controller/backup/state-backup.js';
import { CLUSTER_INITIALIZED_KEY } from '../../src/controller/state/initialization.js';
import { previousStoreIds } from '../../src/controller/state/lineage.js';
import { LATEST_SCHEMA_VERSION } from '../../src/controller/state/sqlite-schema.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobRecord, JobState, StateStore } from '../../src/controller/state-store.js';
import {
  backupSecretsKey,
  jobArchiveKeys,
  latestBackupKey,
  stateBackupKeys,
} from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { createS3Client, S3ObjectStore } from '../../src/storage/s3-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { startS3FaultProxy, type S3FaultProxy } from '../helpers/s3-fault-proxy.js';
import { secretFilesIn } from '../../src/cli/commands/controller/secrets.js';
import { gunzipObject, readJson, StoreWithOutage } from './backup-fixtures.js';
import { catalog, CPU_SMALL, jobSpec } from './controller-fixtures.js';
import { RestoreCluster } from './restore-cluster.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { writtenJobSpec } from '../../src/controller/job-spec/written-form.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-restore-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

/** A restore from `from` into a new box that is refused, with nothing installed there; what it says. */
async function refusedRestore(from: string): Promise<string> {
  const box = join(scratch, `box-${++counter}`);
  mkdirSync(box, { recursive: true });
  const error = await restoreState({
    from,
    cluster: 'prod',
    dbFile: join(box, 'state.db'),
    secretFiles: secretFilesIn(box),
    openObjectStore: (location) => openObjectStore(location),
    catalog,
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RestoreError);
  expect(existsSync(join(box, 'state.db'))).toBe(false);
  expect(existsSync(join(box, 'worker-token'))).toBe(false);
  return (error as Error).message;
}

/** `database` with the jobs_by_state index redefined on another column without rebuilding it. */
function skewIndex(database: Buffer, file: string): Buffer {
  writeFileSync(file, database);
  const db = new Database(file);
  db.unsafeMode(true); // better-sqlite3 opens in SQLite's defensive mode, which forbids writing the schema
  db.pragma('writable_schema = ON');
  db.prepare(
    "UPDATE sqlite_master SET sql = 'CREATE INDEX jobs_by_state ON jobs (team)' WHERE name = 'jobs_by_state'",
  ).run();
  db.close();
  return readFileSync(file);
}

function jobsOf(store: StateStore): [string, string, JobState, number][] {
  return store.listJobs().map((j) => [j.id, j.name, j.state, j.submittedAtSeconds]);
}

describe('restore from a backup', () => {
  it('installs the newest backup, submits again the jobs accepted after it, and ends those that ended after it', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('waits'); // job-1: queued in the backup, cancelled after it
    await c.submit('runs'); // job-2: running in the backup, succeeds after it
    c.state.setJobState('job-2', 'starting');
    c.state.setJobState('job-2', 'running');
    await c.submit('stays'); // job-3: queued in the backup and after it
    await c.submit('done'); // job-4: ended before the backup
    await c.end('job-4', ['starting', 'running', 'succeeded']);
    const taken = await c.backup.run();

    await c.submit('late'); // job-5: accepted after the backup
    await c.submit('late-and-done'); // job-6: accepted and succeeded after the backup
    await c.submit('late-and-failed'); // job-7: accepted and failed after the backup
    await c.end('job-1', ['cancelled']);
    await c.end('job-2', ['succeeded']);
    await c.end('job-6', ['starting', 'running', 'succeeded']);
    await c.end('job-7', ['failed']);
    const before = jobsOf(c.state);
    const storeId = c.state.storeId;
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    // Every accepted job, with its id, name and submission time, ended as it ended.
    expect(jobsOf(restored)).toEqual(before);
    expect(restored.getJob('job-6')?.reason).toMatch(/after the backup restored; from the job archive/);
    expect(restored.getJob('job-7')?.reason).toMatch(/^exit code 3 \(ended .* after the backup restored/);
    expect(restored.listEvents({ kind: 'job.restored' }).map((e) => e.jobId)).toEqual([
      'job-5',
      'job-6',
      'job-7',
    ]);
    expect(restored.listTasks({ jobId: 'job-5' }).map((t) => [t.id, t.state])).toEqual([
      ['job-5.0', 'pending'],
    ]);
    // New jobs come after every restored one; new launches never reuse the old box's launch tokens.
    expect(restored.submitJob(jobSpec('next', CPU_SMALL)).id).toBe('job-8');
    expect(restored.storeId).not.toBe(storeId);
    // The id it had is remembered (instances launched under it are adopted), and the state counts as started.
    expect(previousStoreIds(restored)).toEqual([storeId]);
    expect(restored.getValue(CLUSTER_INITIALIZED_KEY)).toBeDefined();
    expect(restored.createInstance({ typeName: 'c7i.large' }).launchToken).not.toContain(storeId);
    restored.close();
    // The state directory's tokens are back, owner-only; the database too.
    expect(readFileSync(join(dir, 'worker-token'), 'utf8').trim()).toBe('the-worker-token');
    expect(readFileSync(join(dir, 'admin-token'), 'utf8').trim()).toBe('the-admin-token');
    expect(readFileSync(join(dir, 'metrics-token'), 'utf8').trim()).toBe('the-metrics-token');
    for (const file of ['worker-token', 'admin-token', 'metrics-token', 'state.db'])
      expect(statSync(join(dir, file)).mode & 0o777).toBe(0o600);
    expect(taken.seq).toBe(1);
  });

  it('restores a job as it was accepted, under a rule for new submissions added since', async () => {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    // Stages that disagree with expectedDurationSeconds, as a controller before that check accepted them.
    const accepted: JobSpec = {
      ...jobSpec('older', CPU_SMALL),
      expectedDurationSeconds: 600,
      success: { kind: 'stages', stageSeconds: [10, 20], continueProbabilities: [0.9] },
    };
    expect(() => validateJobSpec(writtenJobSpec(accepted), 'spec', catalog)).toThrow(
      /success\.stageSeconds: the stages sum to 30 s but expectedDurationSeconds is 600 s/,
    );
    await c.submit('older', accepted);
    c.state.close();
    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.getJob('job-1')?.spec).toMatchObject({
      expectedDurationSeconds: 600,
      success: { kind: 'stages', stageSeconds: [10, 20] },
    });
    restored.close();
  });

  it('restores a latency table below the floor new submissions keep, as an earlier controller accepted it', async () => {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    // A point at a 200× slowdown, under the 0.01 floor tables have had since.
    const table: [number, number][] = [
      [0, 1],
      [500, 0.005],
    ];
    const accepted: JobSpec = {
      ...jobSpec('kv', CPU_SMALL),
      network: { sensitivity: table, pattern: 'star', gibPerHour: 0 },
    };
    expect(() => validateJobSpec(writtenJobSpec(accepted), 'spec', catalog)).toThrow(
      /network\.sensitivity\.1: relative performance must be at least 0\.01 \(a 100× slowdown\), got 0\.005/,
    );
    await c.submit('kv', accepted);
    c.state.close();
    const { dir, summary } = await c.restore(c.objectsDir);
    expect(summary.resubmitted).toEqual(['job-1']);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.getJob('job-1')?.spec.network).toEqual(accepted.network);
    restored.close();
  });

  it('dates a job ended from the job archive when it ended, not when it was restored', async () => {
    // The old box's clock, two hours back: the restore runs at the real time.
    const t0 = Date.now() / 1000 - 7200;
    let now = t0;
    const c = new RestoreCluster(scratch, () => now);
    await c.submit('runs'); // job-1: running in the backup, succeeds after it
    now = t0 + 10;
    c.state.setJobState('job-1', 'starting');
    c.state.setJobState('job-1', 'running');
    await c.submit('waits'); // job-2: queued in the backup, runs and succeeds after it
    await c.backup.run();
    now = t0 + 53;
    await c.end('job-1', ['succeeded']);
    now = t0 + 60;
    await c.end('job-2', ['starting', 'running', 'succeeded']);
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    const succeeded = restored.getJob('job-1') as JobRecord;
    expect([succeeded.startedAtSeconds, succeeded.finishedAtSeconds]).toEqual([t0 + 10, t0 + 53]);
    const stepsOf = (id: string): [string, number][] =>
      restored
        .listEvents({ jobId: id, kind: 'job.state' })
        .map((e) => [String((e.data as { to: string }).to), e.atSeconds]);
    expect(stepsOf('job-1')).toEqual([
      ['starting', t0 + 10],
      ['running', t0 + 10],
      ['succeeded', t0 + 53],
    ]);
    // A job the backup has queued: every step since is dated when it ended (when it started is not archived).
    const ran = restored.getJob('job-2') as JobRecord;
    expect([ran.state, ran.startedAtSeconds, ran.finishedAtSeconds]).toEqual(['succeeded', t0 + 60, t0 + 60]);
    expect(stepsOf('job-2')).toEqual([
      ['starting', t0 + 60],
      ['running', t0 + 60],
      ['succeeded', t0 + 60],
    ]);
    // Both ended two hours ago: outside the last hour's ended jobs.
    expect(restored.listJobs({ endedSince: Date.now() / 1000 - 3600 }).map((j) => j.id)).toEqual([]);
    restored.close();
  });

  it("passes over a newer fleetwise's backup and one that is not a fleetwise state, naming them", async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('first');
    const first = await c.backup.run();
    await c.submit('second');
    await c.backup.run();
    await c.submit('third');
    await c.backup.run();
    c.state.close();
    /** Store `database` as backup `seq`, with a manifest that matches it (so only the schema tells). */
    const storeAs = async (seq: number, database: Buffer): Promise<void> => {
      const keys = stateBackupKeys('prod', seq);
      const manifest = await readJson(c.objects, keys.manifest);
      const data = gzipSync(database);
      writeFileSync(join(c.objectsDir, keys.data), data);
      const doc = {
        ...(manifest as object),
        sha256: createHash('sha256').update(data).digest('hex'),
        sizeBytes: data.length,
        databaseBytes: database.length,
      };
      writeFileSync(join(c.objectsDir, keys.manifest), JSON.stringify(doc));
      if (seq === 3) writeFileSync(join(c.objectsDir, latestBackupKey('prod')), JSON.stringify(doc));
    };
    // Backup 3 a newer fleetwise wrote (one more migration), backup 2 another program's database.
    const newer = join(c.dir, 'newer.db');
    writeFileSync(newer, await gunzipObject(c.objects, stateBackupKeys('prod', 3).data));
    const db = new Database(newer);
    db.prepare('INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)').run(
      LATEST_SCHEMA_VERSION + 1,
      'from the future',
      0,
    );
    db.close();
    await storeAs(3, readFileSync(newer));
    const foreign = join(c.dir, 'foreign.db');
    const other = new Database(foreign);
    other.exec('CREATE TABLE other (x INTEGER)');
    other.close();
    await storeAs(2, readFileSync(foreign));

    const { dir, summary } = await c.restore(c.objectsDir);
    expect(summary.manifest).toEqual(first);
    expect(summary.skipped).toEqual([
      {
        key: stateBackupKeys('prod', 3).manifest,
        reason:
          `backup ${stateBackupKeys('prod', 3).data} was written by a newer fleetwise ` +
          `(schema ${LATEST_SCHEMA_VERSION + 1} > ${LATEST_SCHEMA_VERSION}): upgrade fleetwise to restore it`,
      },
      {
        key: stateBackupKeys('prod', 2).manifest,
        reason: `backup ${stateBackupKeys('prod', 2).data} is not a fleetwise state (it has tables other)`,
      },
    ]);
    // The jobs the older backup lacks come back from the archive.
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.listJobs().map((j) => j.name)).toEqual(['first', 'second', 'third']);
    restored.close();

    // With no older one to take (the newer fleetwise's named), the refusal says why, naming the backup.
    expect(await refusedRestore(join(c.objectsDir, stateBackupKeys('prod', 3).data))).toContain(
      `backup ${stateBackupKeys('prod', 3).data} was written by a newer fleetwise ` +
        `(schema ${LATEST_SCHEMA_VERSION + 1} > ${LATEST_SCHEMA_VERSION})`,
    );
  });

  it('refuses a job archive document cut short, naming the job, the document and what to do', async () => {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    await c.submit('cut'); // job-1, accepted after the backup
    const kept = await c.submit('kept'); // job-2, ended after it
    await c.end(kept.id, ['cancelled']);
    c.state.close();
    /** Refused saying the document (`pattern`) and what to do (`todo`), with nothing installed. */
    const refused = async (pattern: RegExp, todo: string): Promise<void> => {
      const message = await refusedRestore(c.objectsDir);
      expect(message).toMatch(pattern);
      expect(message).toContain(`); ${todo}; nothing was installed`);
    };
    const cut = (key: string): void => {
      const file = join(c.objectsDir, key);
      writeFileSync(file, readFileSync(file).subarray(0, 20));
    };

    const spec = jobArchiveKeys('prod', 'job-1').spec;
    const good = readFileSync(join(c.objectsDir, spec));
    cut(spec);
    await refused(
      /^the job archive's spec of job-1 is unreadable \(.* jobs\/prod\/job-1\/spec\.json: not valid JSON /,
      'move that document aside to restore without job-1',
    );
    writeFileSync(join(c.objectsDir, spec), good);
    cut(jobArchiveKeys('prod', 'job-2').end);
    await refused(
      /^the job archive's end record of job-2 is unreadable \(.* jobs\/prod\/job-2\/end\.json: not valid JSON /,
      'move that document aside to restore job-2 as not ended (it would run again)',
    );
    // Moved aside, the restore goes on: job-2 as the archive has it without its end, not ended.
    renameSync(join(c.objectsDir, jobArchiveKeys('prod', 'job-2').end), join(c.dir, 'end.json.aside'));
    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.listJobs().map((j) => [j.id, j.state])).toEqual([
      ['job-1', 'queued'],
      ['job-2', 'queued'],
    ]);
    restored.close();
  });

  it("refuses the backups' tokens cut short, saying what to do, and restores without them once moved aside", async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('one');
    await c.backup.run();
    c.state.close();
    const secrets = join(c.objectsDir, backupSecretsKey('prod'));
    writeFileSync(secrets, '{"version":1,"workerToken":');
    const message = await refusedRestore(c.objectsDir);
    expect(message).toMatch(
      /^the backups' tokens are unreadable \(.* backups\/prod\/secrets\.json: not valid JSON /,
    );
    expect(message).toContain('); move that document aside to restore without them');
    expect(message).toMatch(/; nothing was installed$/);
    renameSync(secrets, join(c.dir, 'secrets.json.aside'));
    const { dir, summary } = await c.restore(c.objectsDir);
    expect(summary.secrets).toEqual([]);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.listJobs().map((j) => j.name)).toEqual(['one']);
    restored.close();
  });

  it('restores a given backup rather than the newest, and refuses one of another cluster', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('first');
    const first = await c.backup.run();
    await c.submit('second');
    await c.backup.run();
    c.state.close();
    // The archive still brings back job-2, accepted after the backup named.
    for (const key of [first.key, stateBackupKeys('prod', 1).manifest]) {
      const { dir } = await c.restore(join(c.objectsDir, key));
      const restored = new SqliteStateStore(join(dir, 'state.db'));
      expect(restored.listJobs().map((j) => j.id)).toEqual(['job-1', 'job-2']);
      expect(restored.listEvents({ kind: 'job.restored' }).map((e) => e.jobId)).toEqual(['job-2']);
      restored.close();
    }
    await expect(c.restore(join(c.objectsDir, first.key), { cluster: 'staging' })).rejects.toThrow(
      /is a backup of cluster prod, but this controller runs cluster staging \(start it with --cluster prod\)/,
    );
    await expect(c.restore(c.objectsDir, { cluster: 'staging' })).rejects.toThrow(
      /no backup of cluster staging in .*objects \(looked for backups\/staging\/latest\.json\)/,
    );
  });

  it('refuses a corrupt backup with a clear error, and installs nothing', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('one');
    const manifest = await c.backup.run();
    c.state.close();
    const dataFile = join(c.objectsDir, manifest.key);
    const good = readFileSync(dataFile);
    const database = await gunzipObject(c.objects, manifest.key);
    const manifestFile = join(c.objectsDir, stateBackupKeys('prod', 1).manifest);
    const latestFile = join(c.objectsDir, latestBackupKey('prod'));
    /** Store `data` as the backup, with a manifest that matches it (so only the content's own checks can tell). */
    const storeWithMatchingManifest = (data: Buffer, databaseBytes: number): void => {
      writeFileSync(dataFile, data);
      const doc = {
        ...manifest,
        sha256: createHash('sha256').update(data).digest('hex'),
        sizeBytes: data.length,
        databaseBytes,
      };
      writeFileSync(manifestFile, JSON.stringify(doc));
      writeFileSync(latestFile, JSON.stringify(doc));
    };
    const refused = async (pattern: RegExp): Promise<void> => {
      expect(await refusedRestore(c.objectsDir)).toMatch(pattern);
    };

    // One byte flipped: the sha256 in the manifest tells.
    const flipped = Buffer.from(good);
    flipped[Math.floor(flipped.length / 2)] = (flipped[Math.floor(flipped.length / 2)] as number) ^ 0xff;
    writeFileSync(dataFile, flipped);
    await refused(/backups\/prod\/state-0000000001\.db\.gz is corrupt/);
    // Cut short.
    writeFileSync(dataFile, good.subarray(0, good.length - 100));
    await refused(/is corrupt/);
    // Not gzip at all, manifest matching.
    storeWithMatchingManifest(Buffer.from('not a backup'), 12);
    await refused(/is corrupt: not a valid gzip stream/);
    // gzip of something that is not SQLite.
    storeWithMatchingManifest(gzipSync(Buffer.alloc(8192, 7)), 8192);
    await refused(/is not a usable SQLite database/);
    // Damaged pages: SQLite cannot even read it.
    const damaged = Buffer.from(database);
    for (let page = 4096; page < damaged.length; page += 4096) damaged.fill(0x5a, page, page + 64);
    storeWithMatchingManifest(gzipSync(damaged), damaged.length);
    await refused(/is not a usable SQLite database: database disk image is malformed/);
    // Readable, but an index no longer matches its table: SQLite's integrity check tells.
    const skewed = skewIndex(database, join(c.dir, 'skewed.db'));
    storeWithMatchingManifest(gzipSync(skewed), skewed.length);
    await refused(/fails SQLite's integrity check: .*jobs_by_state/);
    // A manifest that is not one.
    writeFileSync(latestFile, '{"version": 1, "cluster": "prod"}');
    await refused(/backup manifest .*latest\.json is unreadable: .*seq/);

    // And the good backup restores.
    writeFileSync(dataFile, good);
    writeFileSync(manifestFile, JSON.stringify(manifest));
    writeFileSync(latestFile, JSON.stringify(manifest));
    await expect(c.restore(c.objectsDir)).resolves.toBeDefined();
  });

  it('restores the newest complete backup even when latest.json names an older one (its write failed)', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('first');
    const first = await c.backup.run();
    await c.submit('second');
    const second = await c.backup.run();
    c.state.close();
    // The pointer as it was before the second backup: the pointer write after its manifest failed.
    writeFileSync(join(c.objectsDir, latestBackupKey('prod')), JSON.stringify(first));
    const dir = join(scratch, `box-${++counter}`);
    mkdirSync(dir);
    const summary = await restoreState({
      from: c.objectsDir,
      cluster: 'prod',
      dbFile: join(dir, 'state.db'),
      secretFiles: secretFilesIn(dir),
      openObjectStore: (location) => openObjectStore(location),
      catalog,
    });
    expect(summary.manifest).toEqual(second);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    // Both jobs came from the backup itself, none had to be brought back from the archive.
    expect(restored.listJobs().map((j) => j.id)).toEqual(['job-1', 'job-2']);
    expect(restored.listEvents({ kind: 'job.restored' })).toEqual([]);
    restored.close();
  });

  it('passes over newer backups that lack their data or fail their checks for the newest that verifies, and says so', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('first');
    const first = await c.backup.run();
    await c.submit('second');
    await c.backup.run();
    await c.submit('third');
    const third = await c.backup.run();
    c.state.close();
    // The newest manifest without its data (stored, its data then lost), the one before it damaged.
    rmSync(join(c.objectsDir, third.key));
    const second = join(c.objectsDir, stateBackupKeys('prod', 2).data);
    const good = readFileSync(second);
    const flipped = Buffer.from(good);
    flipped[Math.floor(flipped.length / 2)] = (flipped[Math.floor(flipped.length / 2)] as number) ^ 0xff;
    writeFileSync(second, flipped);

    const { dir, summary } = await c.restore(c.objectsDir);
    expect(summary.manifest).toEqual(first);
    expect(summary.skipped).toEqual([
      {
        key: stateBackupKeys('prod', 3).manifest,
        reason: expect.stringMatching(
          /cannot read backup .* no object "backups\/prod\/state-0000000003\.db\.gz"/,
        ) as unknown,
      },
      {
        key: stateBackupKeys('prod', 2).manifest,
        reason: expect.stringMatching(/backups\/prod\/state-0000000002\.db\.gz is corrupt/) as unknown,
      },
    ]);
    // The archive brings back what the backup taken missed.
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.listJobs().map((j) => j.id)).toEqual(['job-1', 'job-2', 'job-3']);
    expect(restored.listEvents({ kind: 'job.restored' }).map((e) => e.jobId)).toEqual(['job-2', 'job-3']);
    restored.close();

    // A backup named is that one or none.
    await expect(c.restore(join(c.objectsDir, third.key))).rejects.toThrow(
      /no object .*state-0000000003\.db\.gz/,
    );
    // None verifying: refused, each named with why.
    writeFileSync(join(c.objectsDir, first.key), good.subarray(0, 100));
    await expect(c.restore(c.objectsDir)).rejects.toThrow(
      /none of the 3 backups in .* verifies: backups\/prod\/state-0000000003\.json: cannot read backup .*; backups\/prod\/state-0000000002\.json: .* is corrupt.*; backups\/prod\/state-0000000001\.json: .* is corrupt/,
    );
  });

  it("takes latest.json's backup when the manifests after it fail, and never an older one when the store fails", async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('first');
    const first = await c.backup.run();
    await c.submit('second');
    const second = await c.backup.run();
    c.state.close();
    // Backup 1's manifest rotated away, latest.json still on it; backup 2's data lost.
    rmSync(join(c.objectsDir, stateBackupKeys('prod', 1).manifest));
    writeFileSync(join(c.objectsDir, latestBackupKey('prod')), JSON.stringify(first));
    rmSync(join(c.objectsDir, second.key));
    const { summary } = await c.restore(c.objectsDir);
    expect(summary.manifest).toEqual(first);
    expect(summary.skipped.map((s) => s.key)).toEqual([stateBackupKeys('prod', 2).manifest]);

    // The store failing to give the newest backup is worth another try, not a reason to take an older one.
    const flaky = new StoreWithOutage(new FsObjectStore(c.objectsDir));
    flaky.failingGets = (key) => key === second.key;
    await expect(c.restore(c.objectsDir, { openObjectStore: () => flaky })).rejects.toThrow(
      /^cannot read backup .*state-0000000002\.db\.gz: object store .* injected outage.*; try again$/,
    );
  });

  it('never replaces a state that has jobs; an empty or zero-length one is replaced', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('one');
    await c.backup.run();
    c.state.close();
    const dir = join(scratch, `box-${++counter}`);
    mkdirSync(dir);
    const options = {
      from: c.objectsDir,
      cluster: 'prod',
      dbFile: join(dir, 'state.db'),
      secretFiles: secretFilesIn(dir),
      openObjectStore: (location: string) => openObjectStore(location),
      catalog,
    };
    writeFileSync(join(dir, 'state.db'), '');
    await restoreState(options);
    await expect(restoreState(options)).rejects.toThrow(
      /state\.db already holds a state \(1 job\(s\) and instance\(s\)\); a restore starts a new box/,
    );
  });

  it('brings back a job accepted after the backup with every field as it was accepted', async () => {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    // Fields that validation converts (spotMaxDelayMinutes, network.root), and the rest of the optional ones.
    const spec = validateJobSpec(
      {
        name: 'loadtest',
        team: 'infra',
        description: 'a server and two clients',
        tasks: [
          { name: 'server', image: 'busybox', command: ['sleep', '60'], demand: { c7i: [0, 1, 2] } },
          { name: 'client', image: 'busybox', replicas: 2, env: { RATE: 10 }, demand: { c7i: [0, 1, 2] } },
        ],
        network: { sensitivity: 'memcached', pattern: 'star', root: 'server', gibPerHour: 4 },
        spot: 'preferred',
        spotMaxDelayMinutes: 90,
        expectedDurationSeconds: '2h',
        noMoveSeconds: '10m',
        maxRunSeconds: '1d',
        retryStrategy: { attempts: 3, evaluateOnExit: [{ onExitCode: 137, action: 'RETRY' }] },
        unsuccessfulExitCodes: [4, 3],
        success: { kind: 'success', successProbability: 0.5, expectedSizeSeconds: 3600 },
        checkpoint: { everySeconds: '30m', restoreDelaySeconds: 20 },
        queue: { class: 'batch', priority: 2 },
        valueOfTimePerJobHour: 3,
      },
      'spec',
      catalog,
    );
    const late = await c.submit('loadtest', spec);
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.getJob(late.id)?.spec).toEqual(spec);
    restored.close();
  });

  it('withdraws the archived jobs of an array the loss cut short (one never stored), and keeps a whole one', async () => {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    const sweep = (index: number, size: number, name = 'sweep'): JobSpec => ({
      ...jobSpec(name, CPU_SMALL),
      arrayProperties: { size, index },
    });
    await c.submit('sweep', sweep(0, 3)); // job-1
    c.state.submitJob(sweep(1, 3)); // job-2: stored, the machine lost before its spec was archived
    await c.submit('sweep', sweep(2, 3)); // job-3
    await c.submit('pair', sweep(0, 2, 'pair')); // job-4
    await c.submit('pair', sweep(1, 2, 'pair')); // job-5
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.listJobs().map((j) => [j.id, j.state])).toEqual([
      ['job-1', 'cancelled'],
      ['job-3', 'cancelled'],
      ['job-4', 'queued'],
      ['job-5', 'queued'],
    ]);
    expect(restored.getJob('job-1')?.reason).toBe(
      'withdrawn at restore: its array was not accepted whole before the loss (job-2 never stored)',
    );
    restored.close();
    // What --restore-from prints says so.
    const line = describeRestore({
      location: c.objectsDir,
      manifest: { key: 'state-1.db.gz', seq: 1, takenAtSeconds: 0 } as RestoreSummary['manifest'],
      secrets: [],
      skipped: [],
      resubmitted: ['job-1', 'job-3', 'job-4', 'job-5'],
      ended: [],
      withdrawn: ['job-1', 'job-3'],
    });
    expect(line).toContain(
      '4 job(s) accepted after it submitted again (job-1, job-3, job-4, job-5), 0 ended as they did after it, ' +
        '2 withdrawn, of an array the loss cut short (job-1, job-3); ',
    );
    // And the newer backups it passed over, and why.
    expect(
      describeRestore({
        location: c.objectsDir,
        manifest: { key: 'state-1.db.gz', seq: 1, takenAtSeconds: 0 } as RestoreSummary['manifest'],
        secrets: [],
        skipped: [{ key: 'state-2.db.gz', reason: 'no object' }],
        resubmitted: [],
        ended: [],
        withdrawn: [],
      }),
    ).toContain('; passed over newer backups: state-2.db.gz (no object)\n');
  });

  it('keeps the idempotency keys of the jobs it brings back, but not of an array the loss cut short', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('early', jobSpec('early', CPU_SMALL), 'early-key'); // job-1: in the backup, key and all
    await c.backup.run();
    const late = await c.submit('late', jobSpec('late', CPU_SMALL), 'late-key'); // job-2
    // An array's jobs share their submission's key: job-3 and job-4 archived, and job-5, cut short, of another.
    const sweep = (index: number, size: number, name: string): JobSpec => ({
      ...jobSpec(name, CPU_SMALL),
      arrayProperties: { size, index },
    });
    for (const index of [0, 1]) {
      const spec = sweep(index, 2, 'pair');
      const job = c.state.submitJob(spec);
      await c.archive.keepSubmitted(job, { key: 'pair-key', requestHash: 'pair-hash' }, { ofArray: true });
    }
    const cut = c.state.submitJob(sweep(0, 2, 'cut')); // its other job never stored
    await c.archive.keepSubmitted(cut, { key: 'cut-key', requestHash: 'cut-hash' }, { ofArray: true });
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(findSubmission(restored, 'research', 'early-key')?.jobIds).toEqual(['job-1']);
    expect(findSubmission(restored, 'research', 'late-key')).toMatchObject({
      jobIds: [late.id],
      requestHash: requestHashOf(jobSpec('late', CPU_SMALL)),
    });
    expect(findSubmission(restored, 'research', 'pair-key')?.jobIds).toEqual(['job-3', 'job-4']);
    expect(findSubmission(restored, 'research', 'cut-key')).toBeUndefined();
    restored.close();
  });

  it("gives a key used again after a withdrawal to the retry's job, end record or not", async () => {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    const spec = jobSpec('retried', CPU_SMALL);
    const key = { key: 'retried-key', requestHash: requestHashOf(spec) };
    // job-1 withdrawn (its spec was archived, the answer said to retry) and its end archived; job-2 its retry.
    const withdrawn = c.state.submitJob(spec);
    await c.archive.keepSubmitted(withdrawn, key);
    await c.withdraw(withdrawn.id);
    const retry = await c.submit('retried', spec, 'retried-key');
    // job-3 withdrawn the same way but the loss took its end record; job-4 its retry.
    const other = jobSpec('retried-again', CPU_SMALL);
    const otherKey = { key: 'other-key', requestHash: requestHashOf(other) };
    await c.archive.keepSubmitted(c.state.submitJob(other), otherKey);
    const otherRetry = await c.submit('retried-again', other, 'other-key');
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(findSubmission(restored, 'research', 'retried-key')?.jobIds).toEqual([retry.id]);
    expect(findSubmission(restored, 'research', 'other-key')?.jobIds).toEqual([otherRetry.id]);
    restored.close();
  });

  it('never gives again an id the archive holds only the end of (a job withdrawn after the backup)', async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('kept'); // job-1
    await c.backup.run();
    // job-2: stored, its spec never archived, withdrawn; only its end is archived.
    await c.withdraw(c.state.submitJob(jobSpec('withdrawn', CPU_SMALL)).id);
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.getJob('job-2')).toBeUndefined();
    expect(restored.submitJob(jobSpec('next', CPU_SMALL)).id).toBe('job-3');
    restored.close();
  });

  it("ends a job only with its own submission's end record", async () => {
    const c = new RestoreCluster(scratch);
    await c.submit('first'); // job-1
    const live = await c.submit('live'); // job-2, queued in the backup and after it
    await c.backup.run();
    // An end record under job-2 of another submission (an id given again by an older version).
    writeFileSync(
      join(c.objectsDir, jobArchiveKeys('prod', 'job-2').end),
      JSON.stringify({
        version: 1,
        id: 'job-2',
        state: 'cancelled',
        reason: 'withdrawn at submission',
        finishedAtSeconds: live.submittedAtSeconds - 50,
        submittedAtSeconds: live.submittedAtSeconds - 100,
      }),
    );
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.getJob('job-2')?.state).toBe('queued');
    restored.close();
  });

  it('keeps a rerun of one job of an array, submitted alone, and replaces a key the backup holds for a withdrawn job', async () => {
    const c = new RestoreCluster(scratch);
    const first = jobSpec('flaky', CPU_SMALL);
    const withdrawn = await c.submit('flaky', first, 'flaky-key'); // job-1, its key in the backup
    await c.backup.run();
    // After the backup job-1 is withdrawn (its key freed) and the retry, another spec, takes the key.
    await c.withdraw(withdrawn.id);
    forgetSubmissionKey(c.state, 'research', 'flaky-key'); // as the API frees it
    const retried = { ...jobSpec('flaky', CPU_SMALL), description: 'the retry' };
    const retry = await c.submit('flaky', retried, 'flaky-key'); // job-2
    // A rerun of index 3 of an array of 10, alone (as fleetwise resubmit makes it): no array around it.
    const rerun = c.state.submitJob({
      ...jobSpec('sweep', CPU_SMALL),
      arrayProperties: { size: 10, index: 3 },
    });
    await c.archive.keepSubmitted(rerun, { key: 'resubmit/job-40', requestHash: 'h' }, { ofArray: false });
    c.state.close();

    const { dir } = await c.restore(c.objectsDir);
    const restored = new SqliteStateStore(join(dir, 'state.db'));
    expect(restored.getJob(rerun.id)?.state).toBe('queued');
    expect(findSubmission(restored, 'research', 'resubmit/job-40')?.jobIds).toEqual([rerun.id]);
    expect(findSubmission(restored, 'research', 'flaky-key')).toMatchObject({
      jobIds: [retry.id],
      requestHash: requestHashOf(retried),
    });
    restored.close();
  });

  /** A cluster whose archive holds `spec` as job-7's, accepted after its backup: what restoring it does. */
  async function restoreArchived(spec: unknown): Promise<unknown> {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    await c.objects.put(
      jobArchiveKeys('prod', 'job-7').spec,
      Buffer.from(JSON.stringify({ version: 1, id: 'job-7', submittedAtSeconds: 1, spec })),
    );
    c.state.close();
    return c.restore(c.objectsDir);
  }

  it('refuses an archived spec that no longer validates, naming the job and what to do', async () => {
    const odd = { name: 'odd', team: 'x', tasks: [{ name: 'main', demand: { zz9: [0, 1, 1] } }] };
    await expect(restoreArchived(odd)).rejects.toThrow(/archived spec of job-7.*--catalog/s);
  });

  it('says another version, not another catalog, when an archived spec fails for anything but its demands', async () => {
    const refused = restoreArchived({ ...jobSpec('odd', CPU_SMALL), gpuSharing: true });
    await expect(refused).rejects.toThrow(
      /archived spec of job-7: gpuSharing: unknown field.*another version/s,
    );
    await expect(refused).rejects.not.toThrow(/--catalog/);
  });

  it('backs the secrets document with what the state directory holds', async () => {
    const c = new RestoreCluster(scratch);
    await c.backup.run();
    expect(await readJson(c.objects, backupSecretsKey('prod'))).toEqual({
      version: 1,
      workerToken: 'the-worker-token',
      adminToken: 'the-admin-token',
      metricsToken: 'the-metrics-token',
    });
    c.state.close();
  });
});

describe('--restore-from locations', () => {
  it('tells an object store from one backup in it', () => {
    expect(parseRestoreSource('s3://bucket/prefix')).toEqual({ location: 's3://bucket/prefix' });
    expect(parseRestoreSource('/var/backups')).toEqual({ location: '/var/backups' });
    expect(parseRestoreSource('s3://bucket/prefix/backups/prod/state-0000000042.db.gz')).toEqual({
      location: 's3://bucket/prefix',
      key: 'backups/prod/state-0000000042.db.gz',
      cluster: 'prod',
    });
    expect(parseRestoreSource('s3://bucket/backups/prod/state-0000000042.json')).toEqual({
      location: 's3://bucket',
      key: 'backups/prod/state-0000000042.json',
      cluster: 'prod',
    });
    expect(parseRestoreSource('/srv/objects/backups/prod/latest.json')).toEqual({
      location: '/srv/objects',
      cluster: 'prod',
    });
    expect(parseRestoreSource('/backups/prod/state-1.db.gz')).toMatchObject({ location: '/' });
    expect(parseRestoreSource('backups/prod/state-1.db.gz')).toMatchObject({ location: '.' });
    expect(() => parseRestoreSource('  ')).toThrow(/--restore-from is empty/);
  });
});

describeWithMoto(
  'restore from S3 when the download breaks',
  (moto) => {
    let proxy: S3FaultProxy;
    let client: S3Client;
    let proxied: S3Client;

    beforeAll(async () => {
      proxy = await startS3FaultProxy(moto.endpoint);
      client = createS3Client(moto.clientOptions);
      proxied = createS3Client({ ...moto.clientOptions, endpoint: proxy.url });
      await client.send(new CreateBucketCommand({ Bucket: 'restore-faults' }));
    });
    afterAll(async () => {
      client.destroy();
      proxied.destroy();
      await proxy.close();
    });

    it('says the store failed, to try again, rather than that the backup is corrupt', async () => {
      const dir = join(scratch, `s3-${++counter}`);
      mkdirSync(dir);
      const state = new SqliteStateStore(join(dir, 'source.db'));
      for (let i = 0; i < 50; i++) state.submitJob(jobSpec(`job-${i}`, CPU_SMALL));
      const manifest = await new StateBackup({
        source: state,
        objectStore: new S3ObjectStore(client, 'restore-faults', 'c/'),
        cluster: 'prod',
        workDir: join(dir, 'backup-tmp'),
        keep: 3,
        nowSeconds: () => Date.now() / 1000,
      }).run();
      state.close();
      expect(manifest.sizeBytes).toBeGreaterThan(2000);
      proxy.cutDownloadsAfter(1000);
      const restore = (): Promise<RestoreSummary> =>
        restoreState({
          from: 's3://restore-faults/c/',
          cluster: 'prod',
          dbFile: join(dir, 'state.db'),
          secretFiles: secretFilesIn(dir),
          openObjectStore: () => new S3ObjectStore(proxied, 'restore-faults', 'c/'),
          catalog,
        });
      const attempt = restore();
      await expect(attempt).rejects.toThrow(RestoreError);
      await expect(attempt).rejects.toThrow(
        /^cannot read backup s3:\/\/restore-faults\/c\/ backups\/prod\/state-0000000001\.db\.gz: object store .* failed.*; try again$/,
      );
      expect(existsSync(join(dir, 'state.db'))).toBe(false);
      proxy.cutDownloadsAfter(undefined);
      await expect(restore()).resolves.toMatchObject({ manifest });
    });
  },
  { resetBeforeEach: false },
);
