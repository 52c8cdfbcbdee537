import type { Catalog } from '../core/catalog.js';
import { successProgress, taskDemandOn, type SimInstance, type SimJob, type SimTask } from './entities.js';
import type { SimWorld, WorldEvent } from './world.js';
import { RANK_EFFECT, RANK_ROUND, type WorldState } from './world-state.js';

/**
 * The simulated cluster as plain data (src/world/world.ts) and back: a prediction (PCS §4) exports the world at a
 * round, events in flight included, and runs a copy forward from it; the controller builds such a world from its
 * state store.
 */

/** The world as plain data at the current round (which has been popped: it is listed first). */
export function exportWorld(state: WorldState, early: boolean): SimWorld {
  const liveIds = new Set(state.liveJobs.keys());
  const stopsWaiting = new Set(state.pendingStops);
  const instances = [...state.instances.values()].filter((i) => i.lifecycle !== 'terminated');
  const known = new Set(instances.map((i) => i.id));
  const events: WorldEvent[] = [{ kind: 'round', timeSeconds: state.now, early }];
  for (const e of state.queue.pending()) {
    switch (e.kind) {
      case 'round':
        events.push({ kind: 'round', timeSeconds: e.timeSeconds, early: e.early });
        break;
      case 'instantiated':
      case 'worker-started':
      case 'registered':
      case 'terminated':
        if (known.has(e.instance.id))
          events.push({ kind: e.kind, timeSeconds: e.timeSeconds, instanceId: e.instance.id });
        break;
      case 'launched':
      case 'killed':
      case 'uploaded':
        if (liveIds.has(e.task.job.spec.id))
          events.push({
            kind: e.kind,
            timeSeconds: e.timeSeconds,
            jobId: e.task.job.spec.id,
            taskName: e.task.spec.name,
          });
        break;
      case 'job-active':
        if (liveIds.has(e.job.spec.id))
          events.push({
            kind: 'job-active',
            timeSeconds: e.timeSeconds,
            jobId: e.job.spec.id,
            token: e.token,
          });
        break;
      case 'arrival': // no future arrivals (PCS §4)
      case 'completion': // recomputed from the rates on import
      case 'network-tick': // predictions do not model the network
      case 'co-start-wake': // nor the co-start barrier
        break;
    }
  }
  // Held jobs too (job-dependencies.ts), in arrival order with the live ones; a dependency not in the world has ended.
  const exported = [...state.liveJobs.values(), ...state.heldJobs.values()].sort((a, b) => a.index - b.index);
  return {
    nowSeconds: state.now,
    jobs: exported.map((job) => ({
      spec: knownSpec(job),
      status: job.status,
      requeueAfterStop: job.requeueAfterStop,
      active: job.active,
      activeSinceSeconds: job.activeSinceSeconds,
      completedIterations: job.completedIterations,
      startSeconds: job.startSeconds,
      migrations: job.migrations,
      activationToken: job.activationToken,
      tasks: job.tasks.map((t) => ({
        name: t.spec.name,
        state: t.state,
        committedInstanceId: t.committed?.id,
        occupyingInstanceId: t.occupying?.id,
        pendingStart: t.pendingStart,
        ...(stopsWaiting.has(t) ? { pendingStop: true } : {}),
      })),
    })),
    instances: instances.map((i) => ({
      id: i.id,
      typeName: i.type.name,
      lifecycle: i.lifecycle,
      assignable: i.assignable,
      images: [...i.images],
      launchDeferred: state.deferredLaunches.includes(i),
      ...(i.placement === undefined ? {} : { placement: i.placement }),
      ...(i.market === 'spot' ? { market: i.market, pricePerHour: i.pricePerHour } : {}),
    })),
    events,
    pendingTerminationIds: state.pendingTerminations.map((i) => i.id),
    instanceCounter: state.instanceCounter,
  };
}

/**
 * Rebuild a world exported by `exportWorld` (or built by the controller) as the starting state of a fresh `state`
 * whose jobs are the world's. Completions are not scheduled here: they follow from the rates, which the caller
 * computes with its own rate model.
 */
export function importWorld(state: WorldState, world: SimWorld, catalog: Catalog): void {
  state.advanceTo(world.nowSeconds);
  let counter = world.instanceCounter ?? 0;
  for (const wi of world.instances) {
    const type = catalog.types.find((t) => t.name === wi.typeName);
    if (type === undefined) throw new Error(`world: unknown instance type ${wi.typeName} (${wi.id})`);
    const inst: SimInstance = {
      id: wi.id,
      type,
      lifecycle: wi.lifecycle,
      assignable: wi.assignable,
      committed: new Set(),
      occupants: new Set(),
      used: [0, 0, 0],
      images: new Set(wi.images),
      billedFromSeconds: undefined, // a prediction does not bill
      placement: wi.placement,
      market: wi.market ?? 'on-demand',
      pricePerHour: wi.pricePerHour ?? type.costPerHour,
    };
    state.network?.adopt(wi.placement);
    state.instances.set(inst.id, inst);
    if (inst.assignable) state.assignable.set(inst.id, inst);
    if (wi.launchDeferred === true) state.deferredLaunches.push(inst);
    else state.launched.add(inst);
    const n = /^i-(\d+)$/.exec(inst.id);
    if (n !== null) counter = Math.max(counter, Number(n[1]));
  }
  state.instanceCounter = counter;
  const instanceOf = (id: string | undefined): SimInstance | undefined => {
    if (id === undefined) return undefined;
    const inst = state.instances.get(id);
    if (inst === undefined) throw new Error(`world: a task refers to unknown instance ${id}`);
    return inst;
  };
  const byId = new Map<string, SimJob>();
  world.jobs.forEach((wj, index) => {
    const job = state.jobs[index] as SimJob;
    byId.set(job.spec.id, job);
    job.status = wj.status;
    job.requeueAfterStop = wj.requeueAfterStop ?? false;
    job.active = wj.active;
    job.activeSinceSeconds = wj.activeSinceSeconds;
    job.activationToken = wj.activationToken ?? 0;
    job.completedIterations = wj.completedIterations;
    job.integratedToSeconds = world.nowSeconds;
    job.startSeconds = wj.startSeconds;
    job.migrations = wj.migrations;
    for (const wt of wj.tasks) {
      const task = job.tasks.find((t) => t.spec.name === wt.name);
      if (task === undefined) throw new Error(`world: job ${job.spec.id} has no task ${wt.name}`);
      task.state = wt.state;
      task.committed = instanceOf(wt.committedInstanceId);
      task.committed?.committed.add(task);
      const occupying = instanceOf(wt.occupyingInstanceId);
      if (occupying !== undefined) {
        task.occupying = occupying;
        occupying.occupants.add(task);
        state.addUsage(occupying, taskDemandOn(task, occupying), 1);
        state.dirtyInstances.add(occupying);
      }
      task.pendingStart = wt.pendingStart ?? false;
      if (task.pendingStart) state.pendingStarts.push(task);
      if (wt.pendingStop === true) state.pendingStops.push(task);
    }
    // Held while a job it waits for is in the world (earlier in it); one whose dependencies are all gone is queued.
    if (wj.status === 'held' && (wj.spec.dependsOn ?? []).some((id) => byId.has(id))) {
      state.heldJobs.set(job.spec.id, job);
      return;
    }
    if (wj.status === 'held') job.status = 'queued';
    state.liveJobs.set(job.spec.id, job);
    state.newestQueuedIndex = job.index;
    state.dirtyJobs.add(job);
  });
  state.nextArrival = state.jobs.length;
  for (const id of world.pendingTerminationIds ?? []) {
    const inst = instanceOf(id);
    if (inst !== undefined) state.pendingTerminations.push(inst);
  }
  const taskOf = (jobId: string, taskName: string): SimTask => {
    const task = byId.get(jobId)?.tasks.find((t) => t.spec.name === taskName);
    if (task === undefined) throw new Error(`world: event for unknown task ${jobId}/${taskName}`);
    return task;
  };
  for (const e of world.events) {
    switch (e.kind) {
      case 'round':
        if (e.early === true) state.earlyRoundAt = e.timeSeconds;
        state.queue.push({
          kind: 'round',
          timeSeconds: e.timeSeconds,
          rank: RANK_ROUND,
          early: e.early,
        });
        break;
      case 'instantiated':
      case 'worker-started':
      case 'registered':
      case 'terminated':
        state.queue.push({
          kind: e.kind,
          timeSeconds: e.timeSeconds,
          rank: RANK_EFFECT,
          instance: instanceOf(e.instanceId) as SimInstance,
        });
        break;
      case 'launched':
      case 'killed':
      case 'uploaded':
        state.queue.push({
          kind: e.kind,
          timeSeconds: e.timeSeconds,
          rank: RANK_EFFECT,
          task: taskOf(e.jobId, e.taskName),
        });
        break;
      case 'job-active': {
        const job = byId.get(e.jobId);
        if (job === undefined) throw new Error(`world: event for unknown job ${e.jobId}`);
        // Its activation still to come is when its current run makes progress from.
        if (e.token === job.activationToken) job.progressFromSeconds = e.timeSeconds;
        state.queue.push({
          kind: 'job-active',
          timeSeconds: e.timeSeconds,
          rank: RANK_EFFECT,
          job,
          token: e.token,
        });
        break;
      }
    }
  }
}

/**
 * The job as a predictor knows it: a job with a declared success model runs, in the prediction, for its expected
 * size given the stages it has survived (SERPT's expectation), not for the size the trace drew for it.
 */
function knownSpec(job: SimJob): SimJob['spec'] {
  const progress = successProgress(job);
  if (progress === undefined) return job.spec;
  const attained = job.completedIterations / job.spec.fullThroughput;
  const expectedSeconds = attained + progress.expectedRemainingSeconds;
  return {
    ...job.spec,
    durationSeconds: expectedSeconds,
    totalIterations: Math.max(job.completedIterations, expectedSeconds * job.spec.fullThroughput),
  };
}
