import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ADMISSION_STATE_KEY,
  readAdmissionState,
  storedAdmissionState,
} from '../../src/controller/admission-state.js';
import { ManualClock } from '../../src/controller/clock.js';
import type { ControllerLogger } from '../../src/controller/seams.js';
import type { JobRecord, StateStore } from '../../src/controller/state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { Admission, type AdmissionState } from '../../src/queue/admission.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { parseWfqConfig, type WfqConfig } from '../../src/queue/wfq.js';
import { table3Catalog } from '../helpers/catalogs.js';
import { CPU_SMALL, FakeCloud, jobSpec, rig } from './controller-fixtures.js';

/**
 * The queue layer's state between rounds (the classes' lags, their short-round counters, what admission knows of each
 * job) is kept in the state store: a controller started again on the SQLite file the last one left owes each class
 * what the last one did.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-admission-state-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Two team classes of equal weight, alpha listed first: with no lag to go by, alpha wins a tie. */
const TEAMS: WfqConfig = parseWfqConfig({
  classifyBy: 'team',
  classes: [
    { id: 'alpha', weight: 1, teams: ['alpha'], ordering: 'fifo' },
    { id: 'beta', weight: 1, teams: ['beta'], ordering: 'fifo' },
  ],
  // Beta's claim must go by lag alone, not by stopping alpha's job.
  preemption: { enabled: false },
});

/** One CPU_SMALL job (4 vCPUs) fills the quota: a job is bigger than either class's half, so lags decide. */
const ONE_JOB: QueueCaps = { quotas: [{ group: 'standard', maxVcpus: 4 }] };

interface Warning {
  readonly message: string;
  readonly data?: Record<string, unknown> | undefined;
}

function capturingLogger(): ControllerLogger & { readonly warnings: Warning[] } {
  const warnings: Warning[] = [];
  return { warnings, info() {}, error() {}, warn: (message, data) => warnings.push({ message, data }) };
}

/** Controllers one after another on one SQLite file, over the same cloud and clock (a process restarted). */
function cluster(name: string, queue: WfqConfig = TEAMS) {
  const dbPath = join(scratch, `${name}.db`);
  const clock = new ManualClock();
  const cloud = new FakeCloud();
  const open = (): StateStore => new SqliteStateStore(dbPath, { nowSeconds: () => clock.nowSeconds() });
  return {
    clock,
    cloud,
    open,
    start(store: StateStore, config: WfqConfig = queue) {
      const logger = capturingLogger();
      const { controller } = rig(
        { caps: ONE_JOB, queue: config },
        { store, cloud, clock, predict: false, logger },
      );
      return { controller, logger };
    },
  };
}

const submit = (
  controller: { submit(spec: ReturnType<typeof jobSpec>, team: string): JobRecord },
  name: string,
  team: string,
): JobRecord => controller.submit(jobSpec(name, CPU_SMALL, { team }), team);

describe('the admission state across controller restarts', () => {
  it('a class owed capacity before a restart wins the next freed room after it', async () => {
    const c = cluster('owed');
    let store = c.open();
    const first = c.start(store).controller;
    const a0 = submit(first, 'a0', 'alpha');
    await first.runRound('test');
    expect(store.getJob(a0.id)?.state).toBe('running');
    // Alpha's next job comes first, then beta's: neither arrival order nor the config's order favours beta.
    c.clock.advance(10);
    const a1 = submit(first, 'a1', 'alpha');
    c.clock.advance(10);
    const b0 = submit(first, 'b0', 'beta');
    // Beta waits while alpha holds all the room: for 20 minutes it is owed half of it.
    for (let i = 0; i < 4; i++) {
      c.clock.advance(300);
      const round = await first.runRound('period');
      expect(round.queue?.result.admitted).toEqual([]);
    }
    await first.stop();
    store.close();

    c.clock.advance(30);
    store = c.open();
    const second = c.start(store);
    // The room frees: the class owed capacity takes it, as it would have with no restart.
    second.controller.cancel(a0.id);
    const round = await second.controller.runRound('a0 cancelled');
    expect(round.queue?.result.admitted).toEqual([b0.id]);
    expect(store.getJob(a1.id)?.state).toBe('queued');
    expect(second.logger.warnings).toEqual([]);
    await second.controller.stop();
    store.close();
  });

  it('writes the state only when a round changed it', async () => {
    const c = cluster('unchanged');
    const store = c.open();
    const writes: unknown[] = [];
    const setValue = store.setValue.bind(store);
    store.setValue = (key, value) => {
      if (key === ADMISSION_STATE_KEY) writes.push(value);
      setValue(key, value);
    };
    const { controller } = c.start(store);
    submit(controller, 'a0', 'alpha');
    await controller.runRound('test');
    // Nothing waits: the same state round after round.
    for (let i = 0; i < 3; i++) {
      c.clock.advance(300);
      await controller.runRound('period');
    }
    expect(writes).toHaveLength(1);
    // A job waiting moves its class's lag: every round is written.
    submit(controller, 'b0', 'beta');
    for (let i = 0; i < 2; i++) {
      c.clock.advance(300);
      await controller.runRound('period');
    }
    expect(writes).toHaveLength(3);
    await controller.stop();
    store.close();
  });

  it('an unreadable saved state is dropped with a warning saying why, and the queue starts from defaults', async () => {
    const c = cluster('unreadable');
    const store = c.open();
    store.setValue(ADMISSION_STATE_KEY, { version: 1, jobs: 'not a list', preempting: [] });
    const { controller, logger } = c.start(store);
    expect(logger.warnings).toHaveLength(1);
    expect(logger.warnings[0]?.message).toMatch(/saved queue state is unreadable \(jobs: .*\)/);
    expect(controller.admission.exportState()).toEqual({
      memory: [],
      shortRounds: undefined,
      preempting: [],
    });

    // With no lags the config's order breaks the tie: alpha's job goes first, though beta's came first.
    const b0 = submit(controller, 'b0', 'beta');
    c.clock.advance(10);
    const a0 = submit(controller, 'a0', 'alpha');
    const round = await controller.runRound('test');
    expect(round.queue?.result.admitted).toEqual([a0.id]);
    expect(store.getJob(b0.id)?.state).toBe('queued');
    // The round saved a readable state over it.
    expect(readAdmissionState(store.getValue(ADMISSION_STATE_KEY), TEAMS, () => true).problems).toEqual([]);
    await controller.stop();
    store.close();
  });

  it('a renamed class starts at 0 and the warning names the class dropped; the other keeps its lag', async () => {
    const c = cluster('renamed');
    let store = c.open();
    const first = c.start(store).controller;
    submit(first, 'a0', 'alpha');
    await first.runRound('test');
    c.clock.advance(10);
    submit(first, 'a1', 'alpha');
    submit(first, 'b0', 'beta');
    c.clock.advance(300);
    await first.runRound('period');
    await first.stop();
    store.close();

    const renamed = parseWfqConfig({
      ...TEAMS,
      classes: [
        { id: 'alpha', weight: 1, teams: ['alpha'], ordering: 'fifo' },
        { id: 'beta-team', weight: 1, teams: ['beta'], ordering: 'fifo' },
      ],
    });
    store = c.open();
    const second = c.start(store, renamed);
    expect(second.logger.warnings.map((w) => w.message)).toEqual([
      expect.stringMatching(/partly out of date \(classes no longer configured: beta /),
    ]);
    const lag = second.controller.admission.exportState().lag;
    expect(lag?.classes.map(([id]) => id)).toEqual(['alpha']);
    expect(lag?.classes[0]?.[1]).toBe(0);
    expect(lag?.classes[0]?.[2]).toBeLessThan(0); // alpha held the room: it accrues debt
    await second.controller.stop();
    store.close();
  });
});

describe('the stored form of the admission state', () => {
  it('is the same text round after round while no class is owed or owing (a lone class waiting)', () => {
    const at = (atSeconds: number): AdmissionState => ({
      memory: [],
      shortRounds: undefined,
      preempting: [],
      lag: { atSeconds, classes: [['all', 0, 0]] },
    });
    expect(JSON.stringify(storedAdmissionState(at(300)))).toBe(JSON.stringify(storedAdmissionState(at(600))));
    expect(storedAdmissionState(at(300))).not.toHaveProperty('lag');
    // A class accruing is kept with its time.
    const owed: AdmissionState = {
      ...at(300),
      lag: {
        atSeconds: 300,
        classes: [
          ['a', 0, 0.5],
          ['b', 0, -0.5],
        ],
      },
    };
    expect(storedAdmissionState(owed)).toHaveProperty('lag.atSeconds', 300);
  });

  // Table 3's d.x ($0.40/h) hosts one [0, 4, 12] task; under $0.50/h one job runs at a time.
  const catalog = table3Catalog();
  const settings = (config: WfqConfig) => ({ caps: { maxCostPerHour: 0.5 }, config });
  const three = parseWfqConfig({
    classifyBy: 'team',
    classes: ['alpha', 'beta', 'gamma'].map((id) => ({ id, weight: 1, teams: [id], ordering: 'fifo' })),
    preemption: { enabled: true, marginShare: 0.05, minShortRounds: 3 },
  });
  const teamOf = (id: string): string => ({ a: 'alpha', b: 'beta', g: 'gamma' })[id[0] as 'a' | 'b' | 'g'];

  /** `running` holds its room on one d.x each; the others wait. */
  function snapshot(now: number, waiting: readonly string[], running: readonly string[]): ClusterSnapshot {
    const ids = [...running, ...waiting];
    return {
      nowSeconds: now,
      jobs: ids.map((id, i) => ({
        id,
        taskIds: [`${id}.0`],
        reconfigurable: true,
        arrivalSeconds: i,
        migrationDelaySeconds: 0,
        expectedRemainingSeconds: 600,
      })),
      tasks: ids.map((id) => ({
        id: `${id}.0`,
        jobId: id,
        key: id,
        demand: { any: [0, 4, 12] },
        instanceId: running.includes(id) ? `i-${id}` : undefined,
      })),
      instances: running.map((id) => ({
        id: `i-${id}`,
        typeName: 'd.x',
        state: 'running' as const,
        taskIds: [`${id}.0`],
      })),
    };
  }

  /** Alpha holds the room for three rounds while beta and gamma wait: both are owed, alpha is in debt. */
  function admissionOwingBetaAndGamma(): Admission {
    const admission = new Admission(catalog, settings(three));
    for (const now of [0, 60, 120])
      admission.decide(snapshot(now, ['b0', 'g0', 'a1'], ['a0']), (id) => ({ team: teamOf(id) }));
    return admission;
  }

  /** Through JSON text, as every store keeps a value. */
  const throughStore = (state: AdmissionState): unknown =>
    JSON.parse(JSON.stringify(storedAdmissionState(state))) as unknown;

  it('round-trips through JSON: the restored admission decides as the one that never stopped', () => {
    const kept = admissionOwingBetaAndGamma();
    const read = readAdmissionState(throughStore(kept.exportState()), three, () => true);
    expect(read.problems).toEqual([]);
    const restored = Admission.restore(catalog, settings(three), read.state as AdmissionState);
    // Not kept: footprints (the first round prices them again) and the simulator's fairness counts; `cutFromPlan:
    // false` and absent mean the same.
    const asKept = (s: AdmissionState) => ({
      ...s,
      memory: s.memory.map(([id, m]) => [
        id,
        { ...m, footprint: undefined, liveSum: 0, rounds: 0, cutFromPlan: m.cutFromPlan === true },
      ]),
    });
    expect(asKept(restored.exportState())).toEqual(asKept(kept.exportState()));
    expect(kept.exportState().shortRounds?.length).toBeGreaterThan(0);
    // a0 ends: beta, owed as much as gamma and listed first, takes the room in both.
    const next = snapshot(180, ['b0', 'g0', 'a1'], []);
    const info = (id: string) => ({ team: teamOf(id) });
    expect(restored.decide(next, info).result.admitted).toEqual(['b0']);
    expect(kept.decide(next, info).result.admitted).toEqual(['b0']);
    expect(restored.exportState().lag).toEqual(kept.exportState().lag);
  });

  it('drops a removed class, keeps the others, forgets ended jobs, and starts an added class at 0', () => {
    const kept = admissionOwingBetaAndGamma();
    const before = kept.exportState();
    const withoutBeta = parseWfqConfig({
      ...three,
      classes: [
        { id: 'alpha', weight: 1, teams: ['alpha'], ordering: 'fifo' },
        { id: 'gamma', weight: 1, teams: ['gamma'], ordering: 'fifo' },
        { id: 'delta', weight: 1, teams: ['beta'], ordering: 'fifo' },
      ],
    });
    const read = readAdmissionState(throughStore(before), withoutBeta, (id) => id !== 'a0');
    expect(read.problems).toEqual([expect.stringContaining('classes no longer configured: beta')]);
    const state = read.state as AdmissionState;
    const lagOf = (s: AdmissionState | undefined, id: string) => s?.lag?.classes.find(([c]) => c === id);
    expect(state.lag?.classes.map(([c]) => c).sort()).toEqual(['alpha', 'gamma']);
    expect(lagOf(state, 'gamma')).toEqual(lagOf(before, 'gamma'));
    expect(lagOf(state, 'alpha')).toEqual(lagOf(before, 'alpha'));
    expect(state.shortRounds?.map(([c]) => c).sort()).toEqual(
      before.shortRounds
        ?.map(([c]) => c)
        .filter((c) => c !== 'beta')
        .sort(),
    );
    expect(state.memory.map(([id]) => id).sort()).toEqual(['a1', 'b0', 'g0']);

    // b0's team is now delta's, a class with no lag: gamma, owed for three rounds, wins the freed room.
    const restored = Admission.restore(catalog, settings(withoutBeta), state);
    const decided = restored.decide(snapshot(180, ['b0', 'g0', 'a1'], []), (id) => ({ team: teamOf(id) }));
    expect(decided.result.admitted).toEqual(['g0']);
  });

  it('drops a state of another form whole, naming the field', () => {
    for (const saved of [
      'text',
      { version: 2, jobs: [], preempting: [] },
      { version: 1, jobs: [{ id: 'j', sizeSeconds: -1 }], preempting: [] },
      { version: 1, jobs: [{ id: 'j', sizeSeconds: 1, footprint: {} }], preempting: [] },
      { version: 1, jobs: [], preempting: [], lag: { atSeconds: 0, classes: [['alpha', 'NaN', 0]] } },
    ]) {
      const read = readAdmissionState(saved, three, () => true);
      expect(read.state).toBeUndefined();
      expect(read.problems.length).toBeGreaterThan(0);
    }
    expect(readAdmissionState(undefined, three, () => true)).toEqual({ state: undefined, problems: [] });
  });
});
