import { describe, expect, it } from 'vitest';
import { FleetMeter } from '../../src/world/fleet-meter.js';
import { instanceType } from '../sim/sim-fixtures.js';

describe('the fleet meter', () => {
  it('takes the peak $/hour of the rates held at the end of each instant, not of the order events came in', () => {
    const small = instanceType('small.x', [1, 8, 32], 3.6);
    const big = instanceType('big.x', [4, 32, 128], 10.8);
    const meter = new FleetMeter();
    meter.startBilling(big, 10.8);
    meter.sample(0, true);
    // At 100 s a replacement's billing starts in the same second as the old instance's ends: both never ran at once.
    meter.advanceTo(100);
    meter.startBilling(small, 3.6);
    meter.startBilling(big, 10.8);
    meter.stopBilling(big, 10.8, 100, false);
    meter.sample(100, false);
    expect(meter.peakCostPerHour).toBeCloseTo(14.4, 10);
    // A later instant that holds more sets a higher peak.
    meter.advanceTo(200);
    meter.startBilling(small, 3.6);
    meter.sample(200, false);
    expect(meter.peakCostPerHour).toBeCloseTo(18, 10);
    expect(Math.max(...meter.series(100).costPerHour)).toBeCloseTo(meter.peakCostPerHour, 10);
  });
});
