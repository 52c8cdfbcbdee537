import { describe, expect, it } from 'vitest';
import { controllerSettingsFor } from '../../src/sim/controller-runtime/execute.js';
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
});
