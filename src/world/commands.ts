import { setupSeconds, type Catalog } from '../core/catalog.js';
import type { Admission } from '../queue/admission.js';
import { hasAnyCap, type BoughtType } from '../queue/caps.js';
import {
  launchGate,
  makesBeforeBreak,
  moveStopGate,
  startGate,
  terminateGate,
  WAIT_INSTANCE_READY,
} from '../round/gates.js';
import type { Action } from '../scheduler/actions.js';
import type { InstancePlacement } from '../core/network.js';
import type { Market } from '../core/market.js';
import { offeringsOf, spotOffering, type SpotOffering } from '../core/spot.js';
import { taskDemandOn, type SimInstance, type SimJob, type SimTask } from './entities.js';
import { RANK_EFFECT, type WorldState } from './world-state.js';

/**
 * The commands a round issues to the simulated cloud and executor (Eva's master): a checkpoint-stop or a launch
 * goes out at once, a start or a termination when its gate opens, a launch that would break a cap when room frees.
 * Each command's effect arrives later as an event (src/world/effects.ts).
 */
export class CommandIssuer {
  private readonly state: WorldState;
  private readonly catalog: Catalog;
  /** Its caps gate launches. */
  private readonly admission: Admission;

  /** Start a multi-task job's tasks so that they are all ready at once (round/co-start.ts). */
  private readonly coStart: boolean;

  /** A move's checkpoint-stop waits for the instances the job moves to (round/gates.ts `moveStopGate`). */
  private readonly makeBeforeBreak: boolean;

  /** When each job's current run began: its last start out of the queue (a move continues the run). */
  private readonly runsBegan = new Map<SimJob, number>();

  constructor(
    state: WorldState,
    catalog: Catalog,
    admission: Admission,
    coStart = false,
    makeBeforeBreak = false,
  ) {
    this.state = state;
    this.catalog = catalog;
    this.admission = admission;
    this.coStart = coStart;
    this.makeBeforeBreak = makeBeforeBreak;
  }

  /**
   * Carry out a round's actions: launches are issued now, then stops (a move's once its targets are ready, with make
   * before break), while starts and terminations wait for their gates.
   */
  apply(actions: readonly Action[]): void {
    const newInstances = new Map<string, SimInstance>();
    const instanceFor = (planId: string): SimInstance => {
      const inst = newInstances.get(planId) ?? this.state.instances.get(planId);
      if (inst === undefined) throw new Error(`plan refers to unknown instance ${planId}`);
      return inst;
    };
    // Launches first: a move's stop asks whether the instances it moves to are on their way.
    for (const a of actions)
      if (a.kind === 'launch-instance')
        newInstances.set(a.instanceId, this.launchInstance(a.typeName, a.placement, a.market ?? 'on-demand'));
    const stopsLater: SimTask[] = [];
    for (const a of actions) {
      switch (a.kind) {
        case 'checkpoint-stop': {
          const task = this.task(a.jobId, a.taskId);
          const job = task.job;
          job.status = 'migrating';
          job.requeueAfterStop = a.then === 'queue';
          task.committed?.committed.delete(task);
          task.committed = undefined;
          if (a.then === 'move' && makesBeforeBreak(this.makeBeforeBreak, this.admission.caps))
            stopsLater.push(task);
          else this.issueStop(task);
          break;
        }
        case 'launch-instance': // issued above
          break;
        case 'start-task': {
          const task = this.task(a.jobId, a.taskId);
          const inst = instanceFor(a.instanceId);
          task.committed?.committed.delete(task);
          task.committed = inst;
          inst.committed.add(task);
          task.pendingStart = true;
          if (task.job.status === 'queued') this.runsBegan.set(task.job, this.state.now);
          task.job.status = 'migrating';
          task.job.firstPlacedSeconds ??= this.state.now;
          // A start called off and planned again before the gates are next issued (a spot notice and the round it
          // asks for, in the same second) still has its entry: one entry per task, or co-start counts its demand
          // twice against its instance and the job's gate never opens.
          if (!this.state.pendingStarts.includes(task)) this.state.pendingStarts.push(task);
          break;
        }
        case 'terminate-instance':
          this.requestTermination(instanceFor(a.instanceId));
          break;
      }
    }
    // After the starts: the gate reads where each task of the job is headed.
    for (const task of stopsLater)
      if (this.moveStopWait(task) === undefined) this.issueStop(task);
      else this.state.pendingStops.push(task);
  }

  /**
   * When the job's current run began: when a plan or a placement between rounds last started it out of the queue (the
   * controller dates it by the job's move out of `queued`). Undefined if this issuer never did (a prediction's world).
   */
  runBeganSeconds(job: SimJob): number | undefined {
    return job.status === 'queued' ? undefined : this.runsBegan.get(job);
  }

  /**
   * A job moving to `instance`, which is gone (a spot reclaim): the move is called off, as the controller's is when a
   * destination vanishes. Still working where it was (its stop waits for the instance), its tasks checkpoint now; already
   * checkpointing there, they finish; either way it returns to the queue once they have stopped, losing no work. False
   * when the job is not moving so (it runs on the instance, or has stopped).
   */
  callOffMove(job: SimJob, instance: SimInstance): boolean {
    if (job.tasks.some((t) => t.occupying === instance)) return false;
    const waiting = this.state.pendingStops.filter((t) => t.job === job);
    // A stop already under way (its target was ready when the move began) checkpoints where the job was.
    const stopping = job.tasks.some((t) => t.state === 'killing' || t.state === 'uploading');
    if (waiting.length === 0 && !stopping) return false;
    job.requeueAfterStop = true;
    uncommit(job);
    this.state.pendingStops = this.state.pendingStops.filter((t) => t.job !== job);
    for (const t of waiting) this.issueStop(t);
    return true;
  }

  /**
   * A job none of whose tasks works yet, headed to `instance`, which is going away (a spot notice drains it): its
   * starts are called off and it returns to the queue, as the controller's are when it drains an instance. False when
   * the job is not so placed (a task of it works or is stopping).
   */
  callOffStart(job: SimJob, instance: SimInstance): boolean {
    if (!job.tasks.some((t) => t.committed === instance)) return false;
    if (!job.tasks.every((t) => t.state === 'queued' || t.state === 'stopped')) return false;
    uncommit(job);
    job.status = 'queued';
    return true;
  }

  /** Moves waiting to leave `instance` (a spot notice: its two minutes are for the checkpoint) stop now. */
  stopMovesOff(instance: SimInstance): void {
    const leaving = this.state.pendingStops.filter((t) => t.job.tasks.some((s) => s.occupying === instance));
    if (leaving.length === 0) return;
    this.state.pendingStops = this.state.pendingStops.filter((t) => !leaving.includes(t));
    for (const t of leaving) this.issueStop(t);
  }

  /** The checkpoint-stop of a task leaving its instance: it stops working once the kill is done. */
  private issueStop(task: SimTask): void {
    // A move (or a return to the queue) counts when its job's first task stops working, once: a stop that waits for
    // its targets (make before break) and is called off or asked for again by the next round counts when it happens,
    // as the controller runtime's simulated workers count it.
    const job = task.job;
    if (!job.tasks.some((t) => t.state === 'killing' || t.state === 'uploading')) {
      job.migrations += 1;
      this.state.meter.countMigration();
    }
    task.state = 'killing';
    this.state.log('checkpoint-issued', {
      jobId: task.job.spec.id,
      taskId: task.id,
      instanceId: task.occupying?.id,
    });
    this.state.at(task.spec.killDelaySeconds, { kind: 'killed', task });
  }

  /** What a move's stop still waits for: the instances its job's tasks are headed to (round/gates.ts). */
  private moveStopWait(task: SimTask): string | undefined {
    const targets = task.job.tasks.flatMap((t) => {
      const to = t.pendingStart ? t.committed : undefined;
      return to === undefined
        ? []
        : [{ launched: this.state.launched.has(to), ready: to.lifecycle === 'running' }];
    });
    return moveStopGate(targets);
  }

  private task(jobId: string, taskId: string): SimTask {
    const task = this.state.liveJobs.get(jobId)?.tasks.find((t) => t.id === taskId);
    if (task === undefined) throw new Error(`plan refers to unknown task ${taskId} of job ${jobId}`);
    return task;
  }

  private launchInstance(
    typeName: string,
    placement: InstancePlacement | undefined,
    asked: Market,
  ): SimInstance {
    const type = this.catalog.types.find((t) => t.name === typeName);
    if (type === undefined) throw new Error(`unknown instance type ${typeName}`);
    this.state.instanceCounter += 1;
    const id = `i-${this.state.instanceCounter}`;
    const pool = asked === 'spot' ? this.spotPool(typeName, placement) : undefined;
    const market: Market = pool === undefined ? 'on-demand' : 'spot';
    const where = pool === undefined ? placement : this.spotPlacement(placement, pool.zone);
    const inst: SimInstance = {
      id,
      type,
      lifecycle: 'instantiating',
      assignable: true,
      committed: new Set(),
      occupants: new Set(),
      used: [0, 0, 0],
      images: new Set(),
      billedFromSeconds: undefined,
      // The simulated cloud honours the plan's zone and placement group (as the EC2 provider launches with them).
      placement: this.state.network?.place(id, where) ?? where,
      market,
      pricePerHour: pool?.pricePerHour ?? type.costPerHour,
    };
    this.state.instances.set(inst.id, inst);
    this.state.assignable.set(inst.id, inst);
    if (this.launchFitsCaps(inst)) this.issueLaunch(inst);
    else this.state.deferredLaunches.push(inst);
    return inst;
  }

  /**
   * The pool a spot launch lands in: the one of the zone the launch will land in (its placement group's once the group
   * has one, which wins over the zone asked, as EC2 places a cluster group's instances in one zone; a zone asked that
   * the simulated network lacks is not one it lands in), else the price-capacity-optimized one among the zones the
   * simulated network has (every zone without one). Undefined, so the cloud launches on demand as the EC2 provider
   * falls back, when spot is off or that zone has no pool of the type. A pool closed after a notice (spot-world.ts
   * `poolOpen`) is passed over for the type's next open pool in that order, else the launch goes on demand, as the
   * controller's launch goes through EC2Provider and the simulated cloud.
   */
  private spotPool(typeName: string, placement: InstancePlacement | undefined): SpotOffering | undefined {
    const market = this.catalog.spot;
    if (market === undefined) return undefined;
    const network = this.state.network;
    const spot = this.state.spot;
    const zone = network === undefined ? placement?.zone : network.settledZone(placement);
    if (zone !== undefined) {
      const asked = spotOffering(market, typeName, zone);
      if (asked === undefined || spot === undefined || spot.poolOpen(typeName, zone)) return asked;
    }
    return offeringsOf(market, typeName).find(
      (o) =>
        (network === undefined || network.config.zones.includes(o.zone)) &&
        (spot === undefined || spot.poolOpen(typeName, o.zone)),
    );
  }

  /**
   * Where a spot launch bought in `zone` goes: there, in its placement group, unless the group already has instances
   * in another zone (whose pool was closed): EC2 refuses a cluster group's instance outside the group's zone, and
   * EC2Provider then launches it without the group.
   */
  private spotPlacement(placement: InstancePlacement | undefined, zone: string): InstancePlacement {
    const group = placement?.placementGroup;
    const groupZone =
      group === undefined ? undefined : this.state.network?.settledZone({ placementGroup: group });
    return groupZone === undefined || groupZone === zone ? { ...placement, zone } : { zone };
  }

  private issueLaunch(inst: SimInstance): void {
    this.state.launched.add(inst);
    inst.readyAtSeconds = this.state.now + setupSeconds(inst.type);
    this.state.log('instance-launch', { instanceId: inst.id, typeName: inst.type.name });
    this.state.at(inst.type.delays.instantiateSeconds, { kind: 'instantiated', instance: inst });
  }

  /** The launch gate (round/gates.ts): the fleet in transit plus this instance keeps the caps. */
  private launchFitsCaps(inst: SimInstance): boolean {
    const caps = this.admission.caps;
    if (!hasAnyCap(caps)) return true;
    return launchGate(billedType(inst), [...this.state.launched].map(billedType), caps) === undefined;
  }

  /** The instance leaves the plan; it terminates once empty. */
  requestTermination(inst: SimInstance): void {
    if (!inst.assignable) return;
    inst.assignable = false;
    this.state.assignable.delete(inst.id);
    this.state.pendingTerminations.push(inst);
  }

  /**
   * Issue the commands whose gates are open (Eva reference: the master's prerequisite-gated commands, synced
   * after each event tick): a start needs its task stopped or queued, every task of its job stopped (gang),
   * and its instance registered with room for it; a termination needs its instance empty.
   */
  issueGated(): void {
    if (this.state.deferredLaunches.length > 0) {
      const waiting: SimInstance[] = [];
      for (const inst of this.state.deferredLaunches) {
        if (inst.lifecycle !== 'instantiating') continue; // dropped before it could launch
        if (!inst.assignable) {
          inst.lifecycle = 'terminated'; // never launched: nothing to terminate
          this.state.assignable.delete(inst.id);
          continue;
        }
        if (this.launchFitsCaps(inst)) this.issueLaunch(inst);
        else waiting.push(inst);
      }
      this.state.deferredLaunches = waiting;
    }
    // After the held-back launches: a target launched just now is on its way.
    if (this.state.pendingStops.length > 0) {
      const waiting: SimTask[] = [];
      for (const task of this.state.pendingStops) {
        // Finished, or reclaimed with its instance, meanwhile: nothing left to stop.
        if (task.state !== 'running' || task.job.status !== 'migrating') continue;
        if (this.moveStopWait(task) === undefined) this.issueStop(task);
        else waiting.push(task);
      }
      this.state.pendingStops = waiting;
    }
    if (this.state.pendingStarts.length > 0) {
      const waiting: SimTask[] = [];
      const gangs = new Map<SimJob, SimTask[]>();
      for (const task of this.state.pendingStarts) {
        if (!task.pendingStart) continue; // finished meanwhile
        if (this.coStart && task.job.tasks.length > 1) {
          const gang = gangs.get(task.job);
          if (gang === undefined) gangs.set(task.job, [task]);
          else gang.push(task);
        } else if (!this.tryStart(task)) waiting.push(task);
      }
      for (const gang of gangs.values()) waiting.push(...this.tryCoStart(gang));
      this.state.pendingStarts = waiting;
    }
    if (this.state.pendingTerminations.length > 0) {
      const waiting: SimInstance[] = [];
      for (const inst of this.state.pendingTerminations) {
        // A noticed spot instance EC2 takes back free in its first hour is left to it (spot-world.ts `leftForEc2`).
        if (terminateGate(inst.occupants.size, 0) !== undefined || this.state.spot?.leftForEc2(inst) === true)
          waiting.push(inst);
        else if (inst.lifecycle !== 'terminating' && inst.lifecycle !== 'terminated') {
          inst.lifecycle = 'terminating';
          this.state.log('terminate-issued', { instanceId: inst.id });
          this.state.at(inst.type.delays.terminateSeconds, { kind: 'terminated', instance: inst });
        }
      }
      this.state.pendingTerminations = waiting;
    }
  }

  /**
   * Co-start (round/co-start.ts, Murmuration digest §7.2): the job's pending tasks are started so that they are all
   * prepared at S_job, the latest of their expected ready times (each task's expected gate opening, from the
   * expected-start index: now, or its instance's expected registration, plus its fetch and build). A task whose gate
   * is open starts preparing at S_job − its own preparation; until then its slot stays free. While some task's
   * opening is unknown (room its instance has yet to free, a sibling still checkpointing) none starts. Returns the
   * tasks still waiting.
   */
  private tryCoStart(gang: readonly SimTask[]): SimTask[] {
    const now = this.state.now;
    const used = new Map<SimInstance, [number, number, number]>();
    const opens: (number | undefined)[] = [];
    const preps: number[] = [];
    for (const task of gang) {
      const inst = task.committed as SimInstance;
      const before = used.get(inst) ?? [0, 0, 0];
      const d = taskDemandOn(task, inst);
      const wait = this.gateWait(task, before);
      used.set(inst, [before[0] + d[0], before[1] + d[1], before[2] + d[2]]);
      preps.push(
        task.spec.fetchDelaySeconds +
          (inst.images.has(task.spec.imageId) ? 0 : task.spec.buildImageDelaySeconds),
      );
      if (wait === undefined) opens.push(now);
      else if (wait === WAIT_INSTANCE_READY && inst.readyAtSeconds !== undefined)
        opens.push(Math.max(now, inst.readyAtSeconds));
      else opens.push(undefined);
    }
    if (opens.some((o) => o === undefined)) return [...gang];
    const jobStart = gang.reduce((m, _, i) => Math.max(m, (opens[i] as number) + (preps[i] as number)), 0);
    const waiting: SimTask[] = [];
    gang.forEach((task, i) => {
      const at = jobStart - (preps[i] as number);
      if (opens[i] === now && at <= now + 1e-9) {
        if (this.tryStart(task)) return;
      } else if (opens[i] === now && task.wakeAtSeconds !== at) {
        task.wakeAtSeconds = at;
        this.state.queue.push({ kind: 'co-start-wake', timeSeconds: at, rank: RANK_EFFECT });
      }
      waiting.push(task);
    });
    return waiting;
  }

  /** What the start gate still waits for, with `extra` of the target already taken by sibling starts. */
  private gateWait(task: SimTask, extra: readonly [number, number, number] = [0, 0, 0]): string | undefined {
    const inst = task.committed as SimInstance;
    return startGate({
      taskStopped: task.state === 'queued' || task.state === 'stopped',
      jobTasksStopping: task.job.tasks.filter((t) => t.state === 'killing' || t.state === 'uploading').length,
      instanceReady: inst.lifecycle === 'running',
      freeCapacity: [
        inst.type.capacity[0] - inst.used[0] - extra[0],
        inst.type.capacity[1] - inst.used[1] - extra[1],
        inst.type.capacity[2] - inst.used[2] - extra[2],
      ],
      demand: taskDemandOn(task, inst),
    });
  }

  private tryStart(task: SimTask): boolean {
    const inst = task.committed as SimInstance;
    const d = taskDemandOn(task, inst);
    const wait = this.gateWait(task);
    if (wait !== undefined) return false;
    task.pendingStart = false;
    task.state = 'launching';
    task.occupying = inst;
    inst.occupants.add(task);
    this.state.addUsage(inst, d, 1);
    this.state.log('start-issued', { jobId: task.job.spec.id, taskId: task.id, instanceId: inst.id });
    const build = inst.images.has(task.spec.imageId) ? 0 : task.spec.buildImageDelaySeconds;
    this.state.at(task.spec.fetchDelaySeconds + build, { kind: 'launched', task });
    return true;
  }
}

/** The instance's type as bought: caps count a spot instance at its pool's price, against its spot quota. */
function billedType(inst: SimInstance): BoughtType {
  return inst.market === 'on-demand'
    ? inst.type
    : { ...inst.type, costPerHour: inst.pricePerHour, market: inst.market };
}

/** The job's tasks are headed nowhere: commitments and pending starts dropped. */
function uncommit(job: SimJob): void {
  for (const t of job.tasks) {
    t.committed?.committed.delete(t);
    t.committed = undefined;
    t.pendingStart = false;
  }
}
