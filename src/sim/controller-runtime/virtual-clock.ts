import { ManualClock } from '../../controller/clock.js';

/**
 * The controller's Clock on simulated time, starting at the trace's zero: it moves only when the driver says so
 * (`advanceTo`), and a sleep ends when the driver wakes it (`wakeDue`, or `wakeAll` when a simulated worker reports
 * something the controller should act on, as a worker's request reaches the real controller between its polls) or
 * when its signal aborts. A run is therefore deterministic and as fast as the controller's code.
 */
export class VirtualClock extends ManualClock {
  constructor(startSeconds = 0) {
    super(startSeconds);
  }

  /** How many sleeps are pending (the driver waits until the controller's loop is parked again). */
  get sleeping(): number {
    return this.pendingSleeps;
  }
}
