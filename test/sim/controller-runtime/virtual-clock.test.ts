import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../../src/sim/controller-runtime/virtual-clock.js';

describe('VirtualClock', () => {
  it('moves only when told to, and wakes sleepers when they are due', async () => {
    const clock = new VirtualClock(100);
    const woke: string[] = [];
    void clock.sleep(10).then(() => woke.push('a'));
    void clock.sleep(5).then(() => woke.push('b'));
    expect(clock.sleeping).toBe(2);
    expect(clock.nextWakeSeconds()).toBe(105);
    clock.advanceTo(104);
    expect(clock.wakeDue()).toBe(0);
    clock.advanceTo(110);
    expect(clock.nowSeconds()).toBe(110);
    expect(clock.wakeDue()).toBe(2);
    await Promise.resolve();
    expect(woke).toEqual(['b', 'a']); // earliest deadline first
    expect(clock.sleeping).toBe(0);
    expect(clock.nextWakeSeconds()).toBeUndefined();
  });

  it('ends a sleep early when its signal aborts, and at once when already aborted or zero', async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    let done = false;
    const sleeping = clock.sleep(60, controller.signal).then(() => (done = true));
    expect(clock.sleeping).toBe(1);
    controller.abort();
    await sleeping;
    expect(done).toBe(true);
    expect(clock.sleeping).toBe(0);
    expect(clock.nowSeconds()).toBe(0);
    await clock.sleep(5, controller.signal);
    await clock.sleep(0);
    expect(clock.sleeping).toBe(0);
  });

  it('wakeAll ends every sleep now (a worker report reaching the controller)', async () => {
    const clock = new VirtualClock();
    const sleeps = [clock.sleep(30), clock.sleep(300)];
    expect(clock.wakeAll()).toBe(2);
    await Promise.all(sleeps);
    expect(clock.nowSeconds()).toBe(0);
  });

  it('refuses to move backwards', () => {
    const clock = new VirtualClock(50);
    expect(() => clock.advanceTo(49)).toThrow(/backwards/);
    clock.advanceTo(50);
    expect(clock.nowSeconds()).toBe(50);
  });
});
