import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { HistoryRetention } from '../../src/controller/history-retention.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { silentLogger } from '../../src/controller/seams.js';
import { settingsFromConfig } from '../../src/controller/settings.js';
import type { RoundInput } from '../../src/controller/state-store.js';
import { ValidationError } from '../../src/core/validation.js';
import { CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

const DAY = 86_400;
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-retention-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The controller's config from a file with these lines (local provider). */
function configFrom(lines: string): ReturnType<typeof loadControllerConfig> {
  const path = join(scratch, 'fleetwise.yaml');
  writeFileSync(path, `provider: local\ncluster: t\nregion: us-east-1\n${lines}`);
  return loadControllerConfig({ flags: { config: path, stateDir: 'state' }, cwd: scratch, env: {} });
}

function round(): RoundInput {
  return {
    plan: { instances: [], assignments: [] },
    decision: { reason: 'test', choice: 'stay', alternatives: [], waiting: [] },
  } as unknown as RoundInput;
}

describe('history retention', () => {
  it('deletes checkpoint events older than the retention, at most once an hour, and keeps the newest on the task', () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const start = clock.nowSeconds();
    const job = store.submitJob(jobSpec('long', CPU_SMALL));
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setTaskState(`${job.id}.0`, 'running', inst.id);
    // A checkpoint a day for 40 days.
    for (let d = 0; d < 40; d += 1) {
      store.recordCheckpoint(`${job.id}.0`, `ck/${d}`);
      clock.advance(DAY);
    }
    const retention = new HistoryRetention({
      store,
      clock,
      log: silentLogger,
      settings: { checkpointEventDays: 30 },
    });
    const checkpoints = (): number => store.listEvents({ kind: 'task.checkpoint' }).length;
    const others = store.listEvents().length - checkpoints();
    expect(checkpoints()).toBe(40);
    // Now is day 40: the checkpoints of days 0..9 are older than 30 days.
    retention.afterRound(7);
    expect(checkpoints()).toBe(30);
    expect(store.listEvents({ kind: 'task.checkpoint' })[0]?.atSeconds).toBe(start + 10 * DAY);
    expect(store.listEvents().length - checkpoints()).toBe(others);
    expect(store.getTask(`${job.id}.0`)?.lastCheckpointKey).toBe('ck/39');
    // A second later day 10's checkpoint is past 30 days too, but the last look was a second ago: it waits an hour.
    clock.advance(1);
    retention.afterRound(8);
    expect(checkpoints()).toBe(30);
    clock.advance(3600);
    retention.afterRound(9);
    expect(checkpoints()).toBe(29);
  });

  it('keeps every checkpoint event with 0 days, and prunes round records every 100th round', () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const job = store.submitJob(jobSpec('long', CPU_SMALL));
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setTaskState(`${job.id}.0`, 'running', inst.id);
    store.recordCheckpoint(`${job.id}.0`, 'ck/0');
    for (let r = 0; r < 12; r += 1) store.recordRound(round());
    clock.advance(400 * DAY);
    const retention = new HistoryRetention({
      store,
      clock,
      log: silentLogger,
      settings: { checkpointEventDays: 0, roundsKept: 5 },
    });
    retention.afterRound(99);
    expect(store.listRounds()).toHaveLength(12);
    retention.afterRound(100);
    expect(store.listRounds().map((r) => r.round)).toEqual([12, 11, 10, 9, 8]);
    expect(store.listEvents({ kind: 'task.checkpoint' })).toHaveLength(1);
  });

  it('deletes finished intents after a week, with checkpoint events kept for ever, and keeps launches', () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    const launch = store.recordIntent(
      {
        kind: 'launch',
        payload: { instanceId: inst.id, typeName: inst.typeName, launchToken: inst.launchToken },
      },
      { key: `launch:${inst.id}` },
    ).id;
    store.completeIntent(launch);
    // A task start finished each day for ten days, and one still pending from the first day.
    const pending = store.recordIntent({
      kind: 'start-task',
      payload: { taskId: 'job-0.0', instanceId: inst.id },
    }).id;
    for (let d = 1; d <= 10; d += 1) {
      const id = store.recordIntent({
        kind: 'start-task',
        payload: { taskId: `job-${d}.0`, instanceId: inst.id },
      }).id;
      store.completeIntent(id);
      clock.advance(DAY);
    }
    const retention = new HistoryRetention({
      store,
      clock,
      log: silentLogger,
      settings: { checkpointEventDays: 0 },
    });
    retention.afterRound(1);
    // Now is day 10 after the first: the starts finished on days 0..2 are more than 7 days old.
    const starts = store
      .listIntents({ kind: 'start-task' })
      .map((i) => (i.kind === 'start-task' ? i.payload.taskId : ''));
    expect(starts).toEqual(['job-0.0', ...Array.from({ length: 7 }, (_, i) => `job-${i + 4}.0`)]);
    expect(store.getIntent(pending)?.state).toBe('pending');
    expect(store.getIntent(launch)?.state).toBe('done');
  });

  it("deletes the round.applied events of rounds no longer kept, with the rounds' records", () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    // Rounds 1..300, each applied, a round period apart.
    for (let r = 1; r <= 300; r += 1) {
      clock.advance(300);
      store.recordRound(round());
      store.appendEvent({ kind: 'round.applied', data: { round: r } });
    }
    const retention = new HistoryRetention({
      store,
      clock,
      log: silentLogger,
      settings: { roundsKept: 120 },
    });
    retention.afterRound(300);
    expect(store.listRounds().map((r) => r.round)).toEqual(Array.from({ length: 120 }, (_, i) => 300 - i));
    // Rounds 181..300 kept: their events too, none older.
    const applied = store
      .listEvents({ kind: 'round.applied' })
      .map((e) => (e.data as { round: number }).round);
    expect(applied).toEqual(Array.from({ length: 120 }, (_, i) => 181 + i));
  });

  it('is the controller’s after each round, 30 days unless the config says otherwise', async () => {
    expect(settingsFromConfig(configFrom('')).checkpointEventDays).toBe(30);
    expect(settingsFromConfig(configFrom('checkpointEventDays: 0\n')).checkpointEventDays).toBe(0);
    expect(() => configFrom('checkpointEventDays: -1\n')).toThrow(ValidationError);
    try {
      configFrom('checkpointEventDays: -1\n');
    } catch (e) {
      expect((e as ValidationError).problems).toEqual(['checkpointEventDays (line 4): must be ≥ 0']);
    }
    const r = rig({ checkpointEventDays: 7 });
    const job = r.store.submitJob(jobSpec('long', CPU_SMALL));
    const inst = r.store.createInstance({ typeName: 'c7i.xlarge' });
    r.store.setTaskState(`${job.id}.0`, 'running', inst.id);
    r.store.recordCheckpoint(`${job.id}.0`, 'ck/0');
    r.clock.advance(8 * DAY);
    r.store.recordCheckpoint(`${job.id}.0`, 'ck/1');
    await r.controller.runRound('test');
    expect(r.store.listEvents({ kind: 'task.checkpoint' }).map((e) => e.data)).toEqual([
      expect.objectContaining({ key: 'ck/1' }),
    ]);
  });
});
