import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { BackupSchedule } from '../../src/controller/backup/backup-schedule.js';
import { StateBackup } from '../../src/controller/backup/state-backup.js';
import { ManualClock } from '../../src/controller/clock.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import {
  backupSecretsKey,
  latestBackupKey,
  stateBackupKeys,
  stateBackupPrefix,
} from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import {
  gunzipObject,
  keysUnder,
  readJson,
  RecordedBackupMetrics,
  recordingLogger,
  StoreWithOutage,
  until,
} from './backup-fixtures.js';
import { CPU_SMALL, jobSpec } from './controller-fixtures.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-backup-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

function setup(keep = 3): {
  dir: string;
  state: SqliteStateStore;
  objects: StoreWithOutage;
  backup: (options?: { secrets?: () => { version: 1; workerToken?: string } }) => StateBackup;
} {
  const dir = join(scratch, `case-${++counter}`);
  mkdirSync(dir);
  const state = new SqliteStateStore(join(dir, 'state.db'));
  const objects = new StoreWithOutage(new FsObjectStore(join(dir, 'objects')));
  return {
    dir,
    state,
    objects,
    backup: (options = {}) =>
      new StateBackup({
        source: state,
        objectStore: objects,
        cluster: 'prod',
        workDir: join(dir, 'backup-tmp'),
        keep,
        secrets: options.secrets,
        nowSeconds: () => Date.now() / 1000,
      }),
  };
}

/** The jobs a stored backup holds, read back from its data object. */
async function jobsInBackup(
  objects: FsObjectStore | StoreWithOutage,
  key: string,
  dir: string,
): Promise<string[]> {
  const file = join(dir, `read-${++counter}.db`);
  writeFileSync(file, await gunzipObject(objects, key));
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT id FROM jobs ORDER BY seq').pluck().all() as string[];
  } finally {
    db.close();
  }
}

describe('state backups', () => {
  it('keeps the newest N complete backups, and latest.json names the newest and checks out against its data', async () => {
    const { dir, state, objects, backup } = setup(3);
    const backups = backup();
    for (let i = 1; i <= 5; i++) {
      state.submitJob(jobSpec(`j${i}`, CPU_SMALL));
      const manifest = await backups.run();
      expect(manifest.seq).toBe(i);
    }
    expect(await keysUnder(objects, stateBackupPrefix('prod'))).toEqual([
      latestBackupKey('prod'),
      stateBackupKeys('prod', 3).data,
      stateBackupKeys('prod', 3).manifest,
      stateBackupKeys('prod', 4).data,
      stateBackupKeys('prod', 4).manifest,
      stateBackupKeys('prod', 5).data,
      stateBackupKeys('prod', 5).manifest,
    ]);
    const latest = await readJson(objects, latestBackupKey('prod'));
    expect(latest).toEqual(await readJson(objects, stateBackupKeys('prod', 5).manifest));
    expect(latest).toMatchObject({
      version: 1,
      cluster: 'prod',
      seq: 5,
      key: stateBackupKeys('prod', 5).data,
    });
    const data = await objects.getBuffer(stateBackupKeys('prod', 5).data);
    expect(latest['sha256']).toBe(createHash('sha256').update(data).digest('hex'));
    expect(latest['sizeBytes']).toBe(data.length);
    expect(latest['databaseBytes']).toBe(
      (await gunzipObject(objects, stateBackupKeys('prod', 5).data)).length,
    );
    // Each backup holds the state as of its snapshot.
    expect(await jobsInBackup(objects, stateBackupKeys('prod', 3).data, dir)).toEqual([
      'job-1',
      'job-2',
      'job-3',
    ]);
    expect(await jobsInBackup(objects, stateBackupKeys('prod', 5).data, dir)).toHaveLength(5);
    // No snapshot is left in the state directory.
    expect(readdirSync(join(dir, 'backup-tmp'))).toEqual([]);
    state.close();
  });

  it('writes the pointer last: a failed upload leaves latest.json on the previous backup, and the next one takes the next seq', async () => {
    const { state, objects, backup } = setup();
    const backups = backup();
    await backups.run();
    const one = stateBackupKeys('prod', 1);
    expect(objects.puts.slice(0, 3)).toEqual([one.data, one.manifest, latestBackupKey('prod')]);

    state.submitJob(jobSpec('after', CPU_SMALL));
    // A failed write may have landed all the same: its seq is never written again.
    for (const failingKey of [stateBackupKeys('prod', 2).data, stateBackupKeys('prod', 3).manifest]) {
      objects.failing = (key) => key === failingKey;
      await expect(backups.run()).rejects.toThrow(/injected outage/);
      expect((await readJson(objects, latestBackupKey('prod')))['seq']).toBe(1);
      expect(await objects.exists(stateBackupKeys('prod', 3).manifest)).toBe(false);
    }
    objects.failing = () => false;
    expect((await backups.run()).seq).toBe(4);
    expect((await readJson(objects, latestBackupKey('prod')))['seq']).toBe(4);
    // Only the pointer failing: that backup is complete, and the next one follows it (never taken for another writer).
    objects.failing = (key) => key === latestBackupKey('prod');
    await expect(backups.run()).rejects.toThrow(/injected outage/);
    objects.failing = () => false;
    expect((await backups.run()).seq).toBe(6);
    expect((await readJson(objects, latestBackupKey('prod')))['seq']).toBe(6);
    // The data the failed manifest write left is rotated away with the backups older than the newest 3.
    expect(await keysUnder(objects, stateBackupPrefix('prod'))).toEqual([
      latestBackupKey('prod'),
      stateBackupKeys('prod', 4).data,
      stateBackupKeys('prod', 4).manifest,
      stateBackupKeys('prod', 5).data,
      stateBackupKeys('prod', 5).manifest,
      stateBackupKeys('prod', 6).data,
      stateBackupKeys('prod', 6).manifest,
    ]);
    state.close();
  });

  it('completes a backup whose manifest was stored though the store answered a failure (its reply lost)', async () => {
    const { dir, state, objects, backup } = setup();
    const backups = backup();
    await backups.run();
    state.submitJob(jobSpec('after', CPU_SMALL));
    const two = stateBackupKeys('prod', 2);
    objects.losingReplies = (key) => key === two.manifest;
    const manifest = await backups.run();
    objects.losingReplies = () => false;
    expect(manifest.seq).toBe(2);
    // Its data kept, matching the manifest stored, and the pointer on it.
    const data = await objects.getBuffer(two.data);
    expect(await readJson(objects, two.manifest)).toEqual({ ...manifest });
    expect(createHash('sha256').update(data).digest('hex')).toBe(manifest.sha256);
    expect(await readJson(objects, latestBackupKey('prod'))).toEqual({ ...manifest });
    expect(await jobsInBackup(objects, two.data, dir)).toEqual(['job-1']);
    // The next backup takes the next seq, no conflict.
    state.submitJob(jobSpec('later', CPU_SMALL));
    expect((await backups.run()).seq).toBe(3);
    state.close();
  });

  it('takes the next seq after data stored though the store answered a failure, never calling it a conflict', async () => {
    const { dir, state, objects, backup } = setup();
    const backups = backup();
    await backups.run();
    state.submitJob(jobSpec('after', CPU_SMALL));
    objects.losingReplies = (key) => key === stateBackupKeys('prod', 2).data;
    await expect(backups.run()).rejects.toThrow(/injected lost reply/);
    objects.losingReplies = () => false;
    state.submitJob(jobSpec('later', CPU_SMALL));
    const three = await backups.run();
    expect(three.seq).toBe(3);
    expect(await jobsInBackup(objects, three.key, dir)).toEqual(['job-1', 'job-2']);
    // A new controller (a restart) lists the store: it too passes the leftover data.
    expect((await backup().run()).seq).toBe(4);
    state.close();
  });

  it("moves past another writer's data that has no manifest (a backup under way or one that failed)", async () => {
    const { state, objects, backup } = setup();
    const backups = backup();
    expect((await backups.run()).seq).toBe(1);
    const two = stateBackupKeys('prod', 2);
    await objects.put(two.data, Buffer.from('another writer, mid-backup'));
    state.submitJob(jobSpec('after', CPU_SMALL));
    const manifest = await backups.run();
    expect(manifest.seq).toBe(3);
    expect((await objects.getBuffer(two.data)).toString()).toBe('another writer, mid-backup');
    expect(await readJson(objects, latestBackupKey('prod'))).toEqual({ ...manifest });
    state.close();
  });

  it('continues after the highest seq in the store when a new controller (a restart, a restored box) backs up', async () => {
    const { dir, state, objects, backup } = setup();
    await backup().run();
    // A snapshot a killed process left behind is cleared by the next process's first backup.
    writeFileSync(join(dir, 'backup-tmp', 'backup-99999-7.db'), 'secrets');
    await backup().run();
    expect((await readJson(objects, latestBackupKey('prod')))['seq']).toBe(2);
    // A pointer lost (its write failed, or deleted): the listing still finds seq 2.
    await objects.delete(latestBackupKey('prod'));
    expect((await backup().run()).seq).toBe(3);
    expect(readdirSync(join(dir, 'backup-tmp'))).toEqual([]);
    state.close();
  });

  it('refuses to overwrite the backup another controller of the same cluster stored, says so, then takes the next seq', async () => {
    const { dir, state, objects, backup } = setup();
    const other = new SqliteStateStore(join(dir, 'other.db'));
    const otherBackup = new StateBackup({
      source: other,
      objectStore: objects,
      cluster: 'prod',
      workDir: join(dir, 'other-tmp'),
      keep: 3,
      nowSeconds: () => Date.now() / 1000,
    });
    const ours = backup();
    expect((await ours.run()).seq).toBe(1);
    const theirs = await otherBackup.run();
    expect(theirs.seq).toBe(2);
    // Ours still counts from its own last backup: seq 2 is taken, and is left as the other controller stored it.
    await expect(ours.run()).rejects.toThrow(
      /state backup 2 of cluster prod was not stored: .* was written by another controller meanwhile\. Two controllers are writing backups of cluster prod/,
    );
    expect(await readJson(objects, stateBackupKeys('prod', 2).manifest)).toEqual(theirs);
    expect(await readJson(objects, latestBackupKey('prod'))).toEqual(theirs);
    // The next backup lists the store again.
    expect((await ours.run()).seq).toBe(3);
    state.close();
    other.close();
  });

  it("stores the state directory's tokens once, and again when they change", async () => {
    const { state, objects, backup } = setup();
    let workerToken = 'worker-secret-1';
    const backups = backup({ secrets: () => ({ version: 1, workerToken }) });
    await backups.run();
    await backups.run();
    expect(objects.puts.filter((k) => k === backupSecretsKey('prod'))).toHaveLength(1);
    workerToken = 'worker-secret-2';
    await backups.run();
    expect(objects.puts.filter((k) => k === backupSecretsKey('prod'))).toHaveLength(2);
    expect(await readJson(objects, backupSecretsKey('prod'))).toEqual({
      version: 1,
      workerToken: 'worker-secret-2',
    });
    state.close();
  });
});

describe('backup schedule', () => {
  it('backs up at start and every period, skips an unchanged state, runs one backup at a time, and logs failures', async () => {
    const { state, objects, backup } = setup(100);
    const clock = new ManualClock();
    const log = recordingLogger();
    const metrics = new RecordedBackupMetrics();
    const backups = backup();
    let runs = 0;
    const schedule = new BackupSchedule({
      backup: () => {
        runs += 1;
        return backups.run();
      },
      changeMark: () => state.changeMark(),
      everySeconds: 60,
      clock,
      log,
      metrics,
    });
    schedule.start();
    await until('the first backup', () => (metrics.stored.length === 1 ? true : undefined));
    await until('the loop to sleep', () => (clock.pendingSleeps > 0 ? true : undefined));

    // Nothing changed: the period passes without a new backup, and the state counts as covered.
    clock.advance(60);
    await until('the unchanged period', () => (metrics.current.length === 1 ? true : undefined));
    expect(runs).toBe(1);

    // A change is backed up at the next period, not before.
    state.submitJob(jobSpec('new', CPU_SMALL));
    await until('the loop to sleep', () => (clock.pendingSleeps > 0 ? true : undefined));
    expect(runs).toBe(1);
    clock.advance(60);
    await until('the second backup', () => (metrics.stored.length === 2 ? true : undefined));

    // Asked twice while one runs: both get the same backup.
    state.submitJob(jobSpec('newer', CPU_SMALL));
    const [a, b] = await Promise.all([schedule.backupNow(), schedule.backupNow()]);
    expect(a?.seq).toBe(3);
    expect(b).toBe(a);
    expect(runs).toBe(3);

    // A failure is logged and counted; the next period tries again and stores it.
    state.submitJob(jobSpec('during-outage', CPU_SMALL));
    objects.failing = () => true;
    await until('the loop to sleep', () => (clock.pendingSleeps > 0 ? true : undefined));
    clock.advance(60);
    await until('the failure', () => (metrics.failures === 1 ? true : undefined));
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        message: expect.stringContaining('state backup failed') as unknown,
        data: expect.objectContaining({ consecutiveFailures: 1 }) as unknown,
      }),
    );
    objects.failing = () => false;
    await until('the loop to sleep', () => (clock.pendingSleeps > 0 ? true : undefined));
    clock.advance(60);
    await until('the retried backup', () => (metrics.stored.length === 4 ? true : undefined));
    // Under the next seq: the failed one's write may have landed.
    expect(metrics.stored[3]?.seq).toBe(5);
    expect(await jobsInBackup(objects, stateBackupKeys('prod', 5).data, scratch)).toEqual([
      'job-1',
      'job-2',
      'job-3',
    ]);

    // A planned stop stores what changed since.
    state.submitJob(jobSpec('before-stop', CPU_SMALL));
    await schedule.stop({ finalBackup: true });
    expect(metrics.stored.map((m) => m.seq)).toEqual([1, 2, 3, 5, 6]);
    state.close();
  });
});

describe('a backup of the state as it is now (what a team token change waits for)', () => {
  it('waits out a backup whose snapshot may predate the change and takes another, so the change is in a backup', async () => {
    const { dir, state, objects, backup } = setup(100);
    const clock = new ManualClock();
    const backups = backup();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let runs = 0;
    let firstTaken = false;
    const schedule = new BackupSchedule({
      backup: async () => {
        runs += 1;
        // The first run is stored before the change below, then waits for the test to let it finish.
        if (runs === 1) {
          const manifest = await backups.run();
          firstTaken = true;
          await held;
          return manifest;
        }
        return backups.run();
      },
      changeMark: () => state.changeMark(),
      everySeconds: 60,
      clock,
      log: recordingLogger(),
    });
    const first = schedule.backupNow();
    await until('the first backup to be taken', () => (firstTaken ? true : undefined));
    state.submitJob(jobSpec('after-snapshot', CPU_SMALL));
    let covered = false;
    const current = schedule.backupCurrentState().then(() => (covered = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(covered).toBe(false); // not answered by the backup in flight
    release();
    expect((await first)?.seq).toBe(1);
    await current;
    expect(runs).toBe(2);
    expect(await jobsInBackup(objects, stateBackupKeys('prod', 1).data, dir)).toEqual([]);
    expect(await jobsInBackup(objects, stateBackupKeys('prod', 2).data, dir)).toEqual(['job-1']);
    // Nothing changed since: answered at once, no third backup.
    await schedule.backupCurrentState();
    expect(runs).toBe(2);
    state.close();
  });

  it('rejects, saying why, when the backup fails or is not stored in time; the next try stores the change', async () => {
    const { state, objects, backup } = setup(100);
    const clock = new ManualClock();
    const backups = backup();
    const metrics = new RecordedBackupMetrics();
    let hang: Promise<void> | undefined;
    const schedule = new BackupSchedule({
      backup: async () => {
        if (hang !== undefined) await hang;
        return backups.run();
      },
      changeMark: () => state.changeMark(),
      everySeconds: 60,
      clock,
      log: recordingLogger(),
      metrics,
    });
    state.submitJob(jobSpec('during-outage', CPU_SMALL));
    objects.failing = () => true;
    await expect(schedule.backupCurrentState()).rejects.toThrow(
      /^the state backup failed: injected outage: cannot store backups\/prod\//,
    );
    expect(metrics.failures).toBe(1);

    // A stuck store: the caller is answered after the timeout, and the backup goes on.
    objects.failing = () => false;
    let unstick: () => void = () => undefined;
    hang = new Promise<void>((resolve) => (unstick = resolve));
    const late = schedule.backupCurrentState({ timeoutSeconds: 20 });
    await until('the timeout to be set', () => (clock.pendingSleeps > 0 ? true : undefined));
    clock.advance(20);
    await expect(late).rejects.toThrow('the state backup was not stored within 20 s (it goes on)');
    hang = undefined;
    unstick();
    await until('the stuck backup to be stored', () => (metrics.stored.length === 1 ? true : undefined));
    await schedule.backupCurrentState();
    expect(metrics.stored).toHaveLength(1);
    state.close();
  });
});
