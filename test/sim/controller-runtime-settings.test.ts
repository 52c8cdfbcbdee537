import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { controllerSettingsFor, executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import type { RunRequest } from '../../src/sim/run-request.js';

/** `simulate --runtime controller` without a config: the controller gets the queue flags the engine's queue layer gets. */
describe('controller runtime settings from flags', () => {
  const request = (queue: RunRequest['queue']): RunRequest => ({ queue }) as unknown as RunRequest;

  it('passes the caps and how jobs are sized against them', () => {
    const settings = controllerSettingsFor(
      request({ kind: 'srpt', caps: { maxCostPerHour: 40 }, predict: false, admitBy: 'plan-cost' }),
      [3600],
    );
    expect(settings.caps).toEqual({ maxCostPerHour: 40 });
    expect(settings.admitBy).toBe('plan-cost');
  });

  it('leaves the sizing to the controller default when the flags do not say', () => {
    const settings = controllerSettingsFor(request({ kind: 'fifo', caps: {}, predict: false }), [3600]);
    expect(settings.admitBy).toBeUndefined();
    expect(controllerSettingsFor(request(undefined), []).caps).toEqual({});
  });

  it('passes placement between rounds and binding as the flags ask, over a config', () => {
    const withStarts = (starts: RunRequest['starts'], config?: object): RunRequest =>
      ({
        queue: { kind: 'fifo', caps: {}, predict: false },
        starts,
        ...(config === undefined ? {} : { controllerSettings: config }),
      }) as unknown as RunRequest;
    const on = controllerSettingsFor(withStarts({ placeBetweenRounds: true, bind: false }), []);
    expect(on).toMatchObject({ placeBetweenRounds: true, bindBetweenRounds: false });
    const off = controllerSettingsFor(
      withStarts(
        { placeBetweenRounds: false, bind: false },
        { caps: {}, placeBetweenRounds: true, bindBetweenRounds: true },
      ),
      [],
    );
    expect(off).toMatchObject({ placeBetweenRounds: false, bindBetweenRounds: false });
    // Not named: the engine's default (off) without a config, the config's own choice with one.
    expect(controllerSettingsFor(withStarts(undefined), []).placeBetweenRounds).toBeUndefined();
    const fromConfig = controllerSettingsFor(
      withStarts(undefined, { caps: {}, placeBetweenRounds: true }),
      [],
    );
    expect(fromConfig.placeBetweenRounds).toBe(true);
  });

  it('runs at the round period the request asks for, with a config or without', () => {
    const round = (config?: object): number | undefined =>
      controllerSettingsFor(
        {
          roundSeconds: 60,
          ...(config === undefined ? {} : { controllerSettings: config }),
        } as unknown as RunRequest,
        [],
      ).roundSeconds;
    expect(round()).toBe(60);
    expect(round({ caps: {}, roundSeconds: 300, pollSeconds: 300 })).toBe(60);
    expect(controllerSettingsFor({} as unknown as RunRequest, []).roundSeconds).toBeUndefined();
  });

  it("takes the request's queue ordering and caps over a config that names none", () => {
    const settings = controllerSettingsFor(
      {
        queue: { kind: 'srpt', caps: { maxInstances: 3 }, predict: false, admitBy: 'standalone' },
        controllerSettings: { caps: {}, admitBy: 'plan-cost' },
      } as unknown as RunRequest,
      [3600],
    );
    expect(settings.queue?.classes.map((c) => c.ordering)).toEqual(['srpt']);
    expect(settings.caps).toEqual({ maxInstances: 3 });
    expect(settings.admitBy).toBe('standalone');
  });

  it('refuses the simulated network, which only the engine runs, naming the flags', async () => {
    const request = (over: Partial<RunRequest>): RunRequest => ({
      scheduler: 'eva',
      runtime: 'controller',
      trace: { format: 'eva', jobs: 1 },
      ...over,
    });
    await expect(executeControllerRun(request({ network: {} }))).rejects.toThrow(
      /^--latency-config: the simulated network runs in the engine runtime only/,
    );
    await expect(
      executeControllerRun(request({ trace: { format: 'eva', jobs: 1, latencySensitiveShare: 0.5 } })),
    ).rejects.toThrow(/^--latency-sensitive: /);
  });

  it('refuses a trace whose jobs declare a network that matters, which this runtime would ignore', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetwise-ctlrt-net-'));
    try {
      const run = (network: Record<string, unknown>) => {
        const path = join(dir, 'net.json');
        const job = (id: string, declared: boolean) => ({
          id,
          name: id,
          arrivalSeconds: 0,
          durationSeconds: 600,
          ...(declared ? { network } : {}),
          tasks: ['a', 'b'].map((name) => ({ name, workload: 'w', demand: { c7i: [0, 4, 8] } })),
        });
        writeFileSync(
          path,
          JSON.stringify({
            format: 'fleetwise-trace/v1',
            name: 'net',
            jobs: [job('j1', true), job('j2', false), job('j3', true)],
          }),
        );
        return executeControllerRun({
          scheduler: 'karpenter',
          runtime: 'controller',
          trace: { path, format: 'fleetwise' },
        });
      };
      const refused = (path: string) =>
        new RegExp(
          `^${path.replaceAll('.', '\\.')}: network \\(job "j1", "j3"\\): the simulated network runs in the engine runtime only`,
        );
      await expect(run({ sensitivity: 'memcached', pattern: 'star', gibPerHour: 0 })).rejects.toThrow(
        refused(join(dir, 'net.json')),
      );
      // Traffic alone is billed across zones by the engine: ignored here, the costs would differ.
      await expect(run({ sensitivity: 'none', pattern: 'star', gibPerHour: 10 })).rejects.toThrow(
        refused(join(dir, 'net.json')),
      );
      // A declaration of no sensitivity and no traffic changes nothing in either runtime.
      const result = await run({ sensitivity: 'none', pattern: 'star', gibPerHour: 0 });
      expect(result.summary.jobs).toBe(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
