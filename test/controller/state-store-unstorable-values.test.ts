import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { StateStoreFaultError, type StateStore } from '../../src/controller/state-store.js';
import { sqlDatabasesForFile } from '../helpers/postgres.js';

/**
 * A value the state cannot hold (NaN, ±Infinity, undefined where a column wants a value) is refused by both SQL
 * stores alike, in the same words naming the column and the value, before anything is written: SQLite used to bind
 * undefined and NaN as NULL, so a checkpoint time gone wrong read back as "no checkpoint time", and a job counter
 * moved to NaN started numbering jobs from 1 again. Optional fields passed as absent stay NULL.
 */

const catalog = loadCatalogFile();
const spec = (file: string): JobSpec =>
  parseJobSpec(readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', file), 'utf8'), file, catalog);
const RESNET = spec('resnet.yaml');

// A scratch directory and one PostgreSQL server for the file; each store gets a database file or schema of its own.
const databases = sqlDatabasesForFile('unstorable');

type Factory = (nowSeconds: () => number) => StateStore;
const SQL_STORES: readonly (readonly [string, Factory])[] = [
  ['SqliteStateStore', (nowSeconds) => new SqliteStateStore(databases.sqlitePath(), { nowSeconds })],
  [
    'PostgresStateStore',
    (nowSeconds) => {
      return new PostgresStateStore(databases.postgresUrl(), { nowSeconds });
    },
  ],
];

/** Everything a reader sees of a store, to show that a refused write left it as it was. */
function contents(store: StateStore): unknown {
  return {
    jobs: store.listJobs(),
    tasks: store.listTasks(),
    instances: store.listInstances(),
    intents: store.listIntents(),
    events: store.listEvents(),
    rounds: store.listRounds(),
  };
}

const EMPTY = { jobs: [], tasks: [], instances: [], intents: [], events: [], rounds: [] };
const NON_FINITE = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];

describe.each(SQL_STORES)(
  '%s refuses a value it cannot store, as the other SQL store does',
  (_name, make) => {
    let clock: () => number = () => 1000;
    let store: StateStore;
    const open = (): StateStore => (store = make(() => clock()));
    afterEach(() => {
      store.close();
      clock = () => 1000;
    });

    it('refuses a non-finite checkpoint time by column and value, and keeps the task’s last checkpoint', () => {
      open();
      store.submitJob(RESNET);
      store.recordCheckpoint('job-1.0', 's3://ckpt/1', 900);
      const before = contents(store);
      for (const at of NON_FINITE) {
        let error: unknown;
        try {
          store.recordCheckpoint('job-1.0', 's3://ckpt/2', at);
        } catch (e) {
          error = e;
        }
        expect(error).toBeInstanceOf(StateStoreFaultError);
        expect((error as Error).message).toBe(
          `cannot store ${String(at)} as tasks.last_checkpoint_at (parameter 4 of ` +
            '`UPDATE tasks SET state = ?, instance_id = ?, last_checkpoint…`): ' +
            'the state keeps finite numbers, text and null',
        );
      }
      expect(contents(store)).toEqual(before);
      expect(store.getTask('job-1.0')).toMatchObject({
        lastCheckpointKey: 's3://ckpt/1',
        lastCheckpointAtSeconds: 900,
      });
      // A time not given is now; a field not given stays absent (NULL), as before.
      clock = () => 1005;
      expect(store.recordCheckpoint('job-1.0', 's3://ckpt/2').lastCheckpointAtSeconds).toBe(1005);
      const instance = store.createInstance({ typeName: 'p3.2xlarge' });
      expect(instance.availabilityZone).toBeUndefined();
      expect(store.getInstance(instance.id)?.launchedAtSeconds).toBeUndefined();
      const intent = store.recordIntent({ kind: 'terminate', payload: { instanceId: instance.id } });
      expect(store.getIntent(intent.id)?.round).toBeUndefined();
    });

    it('rolls back the whole transaction a refused value is part of, ids and events included', () => {
      open();
      expect(() =>
        store.transaction(() => {
          store.submitJob(RESNET);
          store.createInstance({ typeName: 'p3.2xlarge' });
          store.recordCheckpoint('job-1.0', 's3://ckpt/1', Number.NaN);
        }),
      ).toThrow(StateStoreFaultError);
      expect(contents(store)).toEqual(EMPTY);
      expect(store.submitJob(RESNET).id).toBe('job-1');
      expect(store.createInstance({ typeName: 'p3.2xlarge' }).id).toBe('inst-1');
    });

    it('undoes a store call’s earlier statements when a later one is refused', () => {
      open();
      store.submitJob(RESNET);
      const before = contents(store);
      // The job's row is written at the first reading; its event, at the second, is refused.
      let readings = 0;
      clock = () => (++readings === 1 ? 1010 : Number.NaN);
      expect(() => store.setJobState('job-1', 'starting')).toThrow(
        /^cannot store NaN as events\.at_seconds \(parameter 2 of `INSERT INTO events/,
      );
      expect(readings).toBe(2);
      clock = () => 1000;
      expect(contents(store)).toEqual(before);
      expect(store.getJob('job-1')).toMatchObject({ state: 'queued', updatedAtSeconds: 1000 });
    });

    it('refuses a clock that reads NaN, and the job number it took is given back', () => {
      open();
      clock = () => Number.NaN;
      expect(() => store.submitJob(RESNET)).toThrow(
        /^cannot store NaN as jobs\.submitted_at \(parameter 7 of `INSERT INTO jobs/,
      );
      clock = () => 1000;
      expect(contents(store)).toEqual(EMPTY);
      expect(store.submitJob(RESNET).id).toBe('job-1');
    });

    it('refuses a kept submission time that is missing or not finite, keeping the id free', () => {
      open();
      for (const submittedAtSeconds of [undefined, Number.NaN])
        expect(() =>
          store.submitJob(RESNET, {
            id: 'job-5',
            submittedAtSeconds: submittedAtSeconds as unknown as number,
          }),
        ).toThrow(
          new StateStoreFaultError(
            `cannot store ${String(submittedAtSeconds)} as jobs.submitted_at (parameter 7 of ` +
              '`INSERT INTO jobs (seq, id, name, team, spec_json, state, sub…`): ' +
              'the state keeps finite numbers, text and null',
          ),
        );
      expect(store.listJobs()).toEqual([]);
      // The kept id moved the counter in the same transaction: rolled back with it.
      expect(store.submitJob(RESNET).id).toBe('job-1');
      expect(store.submitJob(RESNET, { id: 'job-5', submittedAtSeconds: 900 }).submittedAtSeconds).toBe(900);
    });

    it('refuses to reserve job ids through NaN rather than restarting the numbering', () => {
      open();
      store.submitJob(RESNET);
      store.submitJob(RESNET);
      expect(() => store.reserveJobIds(Number.NaN)).toThrow(StateStoreFaultError);
      expect(() => store.reserveJobIds(Number.NaN)).toThrow(
        /^cannot store NaN as \w+\.(seq|value) \(parameter/,
      );
      expect(store.submitJob(RESNET).id).toBe('job-3');
    });

    it('refuses a non-finite round on an intent, and keeps one given as it is', () => {
      open();
      const payload = { instanceId: 'inst-1' };
      expect(() => store.recordIntent({ kind: 'terminate', payload }, { round: Number.NaN })).toThrow(
        /^cannot store NaN as intents\.round \(parameter 4 of `INSERT INTO intents/,
      );
      expect(store.listIntents()).toEqual([]);
      expect(store.recordIntent({ kind: 'terminate', payload }, { round: 3 })).toMatchObject({
        id: 1,
        round: 3,
      });
    });

    it('refuses a read by a NaN bound rather than answering that nothing matched', () => {
      open();
      store.recordRound({
        configuration: { instances: [] },
        decision: {
          scheduler: 'eva',
          nowSeconds: 1000,
          candidates: [],
          chosen: 'partial',
          reason: 'round 1',
          waiting: [],
          pinned: [],
        },
      });
      expect(() => store.listRounds(10, { sinceSeconds: Number.NaN })).toThrow(
        /^cannot query by NaN as plans\.at_seconds \(parameter 1 of `SELECT \* FROM plans WHERE at_seconds >= \?/,
      );
      expect(() => store.listEvents({ afterSeq: Number.NaN })).toThrow(
        /^cannot query by NaN as events\.seq /,
      );
      expect(store.listRounds(10, { sinceSeconds: 999 })).toHaveLength(1);
    });
  },
);

describe('MemoryStateStore refuses what the SQL stores refuse, so a simulation fails where a controller would', () => {
  let clock: () => number = () => 1000;
  const open = (): StateStore => new MemoryStateStore({ nowSeconds: () => clock() });
  afterEach(() => {
    clock = () => 1000;
  });

  it('refuses a non-finite checkpoint time, naming the field, and keeps the task’s last checkpoint', () => {
    const store = open();
    store.submitJob(RESNET);
    store.recordCheckpoint('job-1.0', 's3://ckpt/1', 900);
    const before = contents(store);
    for (const at of NON_FINITE)
      expect(() => store.recordCheckpoint('job-1.0', 's3://ckpt/2', at)).toThrow(
        new StateStoreFaultError(
          `cannot store ${String(at)} as lastCheckpointAtSeconds of job-1.0: ` +
            'the state keeps finite numbers, text and null',
        ),
      );
    expect(contents(store)).toEqual(before);
    expect(store.recordCheckpoint('job-1.0', 's3://ckpt/2', 950).lastCheckpointAtSeconds).toBe(950);
  });

  it('rolls back the whole transaction, ids included, and refuses a NaN clock, counter or intent round', () => {
    const store = open();
    expect(() =>
      store.transaction(() => {
        store.submitJob(RESNET);
        store.createInstance({ typeName: 'p3.2xlarge' });
        store.recordCheckpoint('job-1.0', 's3://ckpt/1', Number.NaN);
      }),
    ).toThrow(StateStoreFaultError);
    expect(contents(store)).toEqual(EMPTY);
    clock = () => Number.NaN;
    expect(() => store.submitJob(RESNET)).toThrow(StateStoreFaultError);
    expect(() => store.appendEvent({ kind: 'note', message: 'x' })).toThrow(
      /^cannot store NaN as an event time:/,
    );
    clock = () => 1000;
    expect(contents(store)).toEqual(EMPTY);
    expect(store.submitJob(RESNET).id).toBe('job-1');
    expect(store.createInstance({ typeName: 'p3.2xlarge' }).id).toBe('inst-1');
    expect(() => store.reserveJobIds(Number.NaN)).toThrow(/^cannot store NaN as the job counter:/);
    expect(store.submitJob(RESNET).id).toBe('job-2');
    const payload = { instanceId: 'inst-1' };
    expect(() => store.recordIntent({ kind: 'terminate', payload }, { round: Number.NaN })).toThrow(
      StateStoreFaultError,
    );
    expect(store.listIntents()).toEqual([]);
  });

  it('refuses a kept submission time that is missing, and a read by a NaN bound, as the SQL stores do', () => {
    const store = open();
    for (const submittedAtSeconds of [undefined, Number.NaN])
      expect(() =>
        store.submitJob(RESNET, { id: 'job-5', submittedAtSeconds: submittedAtSeconds as unknown as number }),
      ).toThrow(
        new StateStoreFaultError(
          `cannot store ${String(submittedAtSeconds)} as submittedAtSeconds of job-5: ` +
            'the state keeps finite numbers, text and null',
        ),
      );
    expect(store.listJobs()).toEqual([]);
    expect(store.submitJob(RESNET).id).toBe('job-1');
    expect(() => store.listRounds(10, { sinceSeconds: Number.NaN })).toThrow(
      /^cannot query by NaN as a round time:/,
    );
    expect(() => store.listEvents({ afterSeq: Number.NaN })).toThrow(
      /^cannot query by NaN as an event number:/,
    );
    expect(() => store.listJobs({ endedSince: Number.NaN })).toThrow(
      /^cannot query by NaN as a job end time:/,
    );
    expect(store.listEvents({ afterSeq: 0 })).toHaveLength(1);
  });
});
