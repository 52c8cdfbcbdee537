import type { CommandIssuer } from './commands.js';
import type { SpotEngine } from './spot-world.js';
import { RANK_EFFECT, RANK_ROUND, type WorldState } from './world-state.js';

/**
 * The engine as the spot world acts on it (spot-world.ts `SpotEngine`): its clock and events, the commands that call
 * off moves and starts and drain an instance, and a reclaimed instance's end (its bill stops, the fleet drops it).
 */
export function spotEngine(state: WorldState, commands: CommandIssuer): SpotEngine {
  return {
    get now() {
      return state.now;
    },
    schedule: (event) => state.queue.push({ ...event, rank: RANK_EFFECT }),
    callOffMove: (job, inst) => commands.callOffMove(job, inst),
    stopMovesOff: (inst) => commands.stopMovesOff(inst),
    drain: (inst) => commands.requestTermination(inst),
    callOffStart: (job, inst) => commands.callOffStart(job, inst),
    reclaimInstance: (inst, billedNothing) => {
      if (inst.billedFromSeconds !== undefined) {
        const seconds = state.now - inst.billedFromSeconds;
        state.meter.stopBilling(inst.type, inst.pricePerHour, seconds, true, billedNothing);
        if (billedNothing) state.ledger?.forgive(inst);
      }
      inst.billedFromSeconds = undefined;
      inst.lifecycle = 'terminated';
      inst.assignable = false;
      state.launched.delete(inst);
      state.assignable.delete(inst.id);
      state.pendingTerminations = state.pendingTerminations.filter((i) => i !== inst);
      state.deferredLaunches = state.deferredLaunches.filter((i) => i !== inst);
      state.log('terminated', { instanceId: inst.id });
    },
    release: (task) => {
      if (task.occupying !== undefined) state.dirtyInstances.add(task.occupying);
      state.release(task);
    },
    touch: (job, inst) => {
      state.dirtyJobs.add(job);
      if (inst !== undefined) state.dirtyInstances.add(inst);
    },
    // The runtime reacts to a reclaim at once: Karpenter provisions, SkyPilot relaunches, fleetwise re-plans.
    requestRound: () => {
      if (state.earlyRoundAt !== undefined) return;
      state.earlyRoundAt = state.now;
      state.queue.push({ kind: 'round', timeSeconds: state.now, rank: RANK_ROUND, early: true });
    },
    liveInstances: () => [...state.instances.values()].filter((i) => i.lifecycle !== 'terminated'),
  };
}
