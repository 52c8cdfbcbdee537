import type { CommandIssuer } from '../../src/world/commands.js';
import type { SimInstance } from '../../src/world/entities.js';
import type { SpotEngine } from '../../src/world/spot-world.js';
import { RANK_EFFECT, type WorldState } from '../../src/world/world-state.js';

/**
 * A spot world's engine over an engine world's `state` and `commands`, wired as the simulation wires them, without
 * billing or rates: a reclaim ends the instance and tells `onReclaim` whether it was billed nothing.
 */
export function spotEngineOver(
  state: WorldState,
  commands: CommandIssuer,
  onReclaim: (instance: SimInstance, billedNothing: boolean) => void = () => undefined,
): SpotEngine {
  return {
    get now() {
      return state.now;
    },
    schedule: (e) => state.queue.push({ ...e, rank: RANK_EFFECT }),
    reclaimInstance: (inst, billedNothing) => {
      onReclaim(inst, billedNothing);
      inst.lifecycle = 'terminated';
    },
    release: () => undefined,
    touch: () => undefined,
    requestRound: () => undefined,
    callOffMove: (job, inst) => commands.callOffMove(job, inst),
    stopMovesOff: (inst) => commands.stopMovesOff(inst),
    drain: (inst) => commands.requestTermination(inst),
    callOffStart: (job, inst) => commands.callOffStart(job, inst),
    liveInstances: () => [...state.instances.values()].filter((i) => i.lifecycle !== 'terminated'),
  };
}
