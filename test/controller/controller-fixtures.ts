/**
 * Shared pieces of the controller tests: an in-memory CloudProvider with error injection (the provider seam, like
 * Karpenter's fake cloud provider: industry-anchors.md §1.7), job specs, and a controller wired to a manual clock.
 */
import type { Catalog } from '../../src/core/catalog.js';
import type { Market } from '../../src/core/market.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import {
  CloudProviderError,
  InsufficientCapacityError,
  TAG_CLUSTER,
  TAG_INSTANCE_KEY,
  TAG_LAUNCH_TOKEN,
  TAG_PLACEMENT_GROUP,
  TAG_PLAN,
  ThrottlingError,
  launchRequestSchema,
  spotFallbackReason,
  type CloudInstance,
  type CloudProvider,
  type LaunchRequest,
  type LaunchResult,
  type ListOptions,
} from '../../src/cloud/provider.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Reconciler } from '../../src/controller/reconciler.js';
import type { ReconcilerSettings } from '../../src/controller/reconcile/context.js';
import { buildSnapshot, readSnapshotInputs } from '../../src/controller/snapshot.js';
import { diffConfiguration, type ConfigurationDiff } from '../../src/scheduler/actions.js';
import type { Configuration, Plan } from '../../src/scheduler/types.js';
import { predictCompletions } from '../../src/predict/predict.js';
import { Controller, type ControllerDeps } from '../../src/controller/controller.js';
import type { ControllerSettings } from '../../src/controller/settings.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';
import {
  WorkerTaskControl,
  type WorkerTaskControlOptions,
} from '../../src/controller/worker-task-control.js';
import { InjectedCrash, type FaultInjector, type FaultPoint } from '../../src/controller/faults.js';
import type {
  TaskControl,
  TaskStartRequest,
  TaskStatus,
  TaskStopRequest,
} from '../../src/controller/seams.js';
import type { InstanceRecord, JobRecord, StateStore, TaskRecord } from '../../src/controller/state-store.js';
import type { Resources } from '../../src/core/resources.js';

export const catalog: Catalog = loadCatalogFile();

export function priceOf(typeName: string): number {
  const t = catalog.types.find((x) => x.name === typeName);
  if (t === undefined) throw new Error(`no type ${typeName}`);
  return t.costPerHour;
}

/** A one-task (or `replicas`-task) job asking for `demand` on the given families. */
export function jobSpec(
  name: string,
  demand: Record<string, Resources>,
  options: { team?: string; replicas?: number; expectedDurationSeconds?: number } = {},
): JobSpec {
  return validateJobSpec(
    {
      name,
      team: options.team ?? 'research',
      tasks: [{ name: 'main', image: 'busybox:latest', demand, replicas: options.replicas ?? 1 }],
      ...(options.expectedDurationSeconds === undefined
        ? {}
        : { expectedDurationSeconds: options.expectedDurationSeconds }),
    },
    name,
    catalog,
  );
}

/** c7i.xlarge ($0.1785/h) is the cheapest host of [0, 4, 8]; r7i.2xlarge ($0.5292/h) of [0, 8, 60] on r7i only. */
export const CPU_SMALL = { c7i: [0, 4, 8] as Resources };
export const MEM_BIG = { r7i: [0, 8, 60] as Resources };
export const GPU_ONE = { p3: [1, 4, 32] as Resources };

interface FakeInstance {
  id: string;
  typeName: string;
  state: CloudInstance['state'];
  tags: Record<string, string>;
  zone: string;
  launchedAtMs: number;
  market: Market;
  /** When it ended, as EC2's StateTransitionReason says (set by a test). */
  endedAt?: Date;
}

/**
 * An in-memory EC2: launches are idempotent by launch-token tag (as the EC2 provider's tag pre-check makes them),
 * instances run at once, and errors can be injected per call.
 */
export class FakeCloud implements CloudProvider {
  readonly instances = new Map<string, FakeInstance>();
  readonly calls = { launch: 0, list: 0, terminate: 0, runInstances: 0 };
  /** Every launch request, as validated (what the controller asked for: type, zones, placement group). */
  readonly requests: LaunchRequest[] = [];
  /** Placement groups with no room: a launch into one lands in its zone without the group. */
  readonly fullGroups = new Set<string>();
  /** Placement groups that exist (created by a launch into them), and the `keep` sets of each cleanup call. */
  readonly groups = new Set<string>();
  readonly groupCleanups: ReadonlySet<string>[] = [];
  /** The next this many TerminateInstances calls fail (termination protection, a missing permission). */
  refuseTerminations = 0;
  /**
   * Types with no spot capacity in any zone: a spot launch of one is bought on demand (EC2Provider's fallback), or
   * refused when the request does not allow that.
   */
  readonly noSpotCapacity = new Set<string>();
  /** Types for which every zone answers InsufficientInstanceCapacity. */
  readonly noCapacity = new Set<string>();
  /** The next N launches fail with a ThrottlingError (after the provider's own retries). */
  throttleNextLaunches = 0;
  /** Instances stay `pending` until `bootAll` (to test start gates). */
  bootInstantly = true;
  private seq = 0;

  constructor(private readonly zones: readonly string[] = ['us-east-1a', 'us-east-1b']) {}

  async launch(input: LaunchRequest): Promise<LaunchResult> {
    this.calls.launch += 1;
    const request = launchRequestSchema.parse(input);
    this.requests.push(request);
    const existing = [...this.instances.values()].filter(
      (i) =>
        i.tags[TAG_LAUNCH_TOKEN] === request.idempotencyToken && i.tags[TAG_CLUSTER] === request.clusterName,
    );
    if (existing.length > 0)
      return {
        instanceIds: existing.map((i) => i.id),
        availabilityZone: existing[0]?.zone,
        placementGroup: existing[0]?.tags[TAG_PLACEMENT_GROUP],
        reusedExisting: true,
        ...(existing[0]?.market === 'spot' ? { market: 'spot' as const } : {}),
      };
    if (this.throttleNextLaunches > 0) {
      this.throttleNextLaunches -= 1;
      throw new ThrottlingError('RunInstances', 5, 'RequestLimitExceeded');
    }
    if (this.noCapacity.has(request.typeName))
      throw new InsufficientCapacityError(request.typeName, [...this.zones], []);
    // As EC2Provider: spot where the type has spot capacity, else on demand with the reason, if the request allows it.
    const spotRefused = request.market === 'spot' && this.noSpotCapacity.has(request.typeName);
    if (spotRefused && !request.onDemandFallback)
      throw new InsufficientCapacityError(request.typeName, [...this.zones], []);
    this.calls.runInstances += 1;
    this.seq += 1;
    const id = `i-${this.seq.toString(16).padStart(17, '0')}`;
    const zone = request.availabilityZones.find((z) => this.zones.includes(z)) ?? (this.zones[0] as string);
    if (request.placementGroup !== undefined) this.groups.add(request.placementGroup);
    const group =
      request.placementGroup !== undefined && !this.fullGroups.has(request.placementGroup)
        ? request.placementGroup
        : undefined;
    const market: Market = request.market === 'spot' && !spotRefused ? 'spot' : 'on-demand';
    this.instances.set(id, {
      id,
      typeName: request.typeName,
      state: this.bootInstantly ? 'running' : 'pending',
      zone,
      launchedAtMs: this.seq,
      market,
      tags: {
        ...request.tags,
        [TAG_CLUSTER]: request.clusterName,
        [TAG_PLAN]: request.planId,
        [TAG_INSTANCE_KEY]: request.instanceKey,
        [TAG_LAUNCH_TOKEN]: request.idempotencyToken,
        ...(group === undefined ? {} : { [TAG_PLACEMENT_GROUP]: group }),
      },
    });
    return {
      instanceIds: [id],
      availabilityZone: zone,
      placementGroup: group,
      ...(group === undefined && request.placementGroup !== undefined
        ? { placementFallback: `placement group ${request.placementGroup} is full` }
        : {}),
      reusedExisting: false,
      ...(market === 'spot' ? { market } : {}),
      ...(spotRefused
        ? {
            // Worded as the EC2 provider words it: the event the controller records is what users read.
            marketFallback: spotFallbackReason(
              new InsufficientCapacityError(request.typeName, [...this.zones], []),
              false,
            ),
          }
        : {}),
    };
  }

  async terminate(ids: readonly string[]): Promise<void> {
    this.calls.terminate += 1;
    if (this.refuseTerminations > 0) {
      this.refuseTerminations -= 1;
      throw new CloudProviderError('termination protection is on', 'OperationNotPermitted');
    }
    for (const id of ids) {
      const inst = this.instances.get(id);
      if (inst !== undefined) inst.state = 'terminated';
    }
  }

  async list(clusterName: string, options: ListOptions = {}): Promise<CloudInstance[]> {
    this.calls.list += 1;
    return [...this.instances.values()]
      .filter(
        (i) =>
          i.tags[TAG_CLUSTER] === clusterName &&
          (options.includeTerminated === true || i.state !== 'terminated'),
      )
      .map((i) => ({
        instanceId: i.id,
        typeName: i.typeName,
        state: i.state,
        tags: { ...i.tags },
        launchTime: new Date(i.launchedAtMs),
        availabilityZone: i.zone,
        placementGroup: i.tags[TAG_PLACEMENT_GROUP],
        privateIpAddress: undefined,
        market: i.market,
        endedAt: i.endedAt,
      }));
  }

  isCapacityConstrained(typeName: string): boolean {
    return this.noCapacity.has(typeName);
  }

  /** As EC2: a group some live instance is in stays (InUse). */
  async deletePlacementGroups(_clusterName: string, keep: ReadonlySet<string>): Promise<string[]> {
    this.groupCleanups.push(new Set(keep));
    const inUse = new Set(this.live().map((i) => i.tags[TAG_PLACEMENT_GROUP]));
    const deleted = [...this.groups].filter((g) => !keep.has(g) && !inUse.has(g)).sort();
    for (const g of deleted) this.groups.delete(g);
    return deleted;
  }

  bootAll(): void {
    for (const i of this.instances.values()) if (i.state === 'pending') i.state = 'running';
  }

  /** An instance tagged with the cluster that no controller launched. */
  addForeign(clusterName: string, typeName: string, market: Market = 'on-demand'): string {
    this.seq += 1;
    const id = `i-${this.seq.toString(16).padStart(17, '0')}`;
    this.instances.set(id, {
      id,
      typeName,
      state: 'running',
      zone: this.zones[0] as string,
      launchedAtMs: this.seq,
      market,
      tags: { [TAG_CLUSTER]: clusterName },
    });
    return id;
  }

  live(): FakeInstance[] {
    return [...this.instances.values()].filter((i) => i.state !== 'terminated');
  }
}

export const BASE_SETTINGS: ControllerSettings = {
  clusterName: 'test',
  roundSeconds: 300,
  pollSeconds: 15,
  caps: {},
  dryRun: false,
  orphanPolicy: 'adopt',
  vanishGraceSeconds: 60,
  registrationTimeoutSeconds: 600,
  registrationBackoffBaseSeconds: 60,
  registrationBackoffMaxSeconds: 3600,
  reportEverySeconds: 3600,
};

export interface Rig {
  readonly clock: ManualClock;
  readonly store: StateStore;
  readonly cloud: FakeCloud;
  readonly controller: Controller;
}

export function rig(
  overrides: Partial<ControllerSettings> = {},
  deps: Partial<Omit<ControllerDeps, 'settings'>> & { clock?: ManualClock; cloud?: FakeCloud } = {},
): Rig {
  const clock = deps.clock ?? new ManualClock();
  const store = deps.store ?? new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const cloud = deps.cloud ?? new FakeCloud();
  const controller = new Controller({
    catalog,
    // Predictions in this thread (the worker thread needs the built dist/): the same simulator, deterministic.
    predict: predictCompletions,
    ...deps,
    store,
    clock,
    provider: deps.provider ?? cloud,
    settings: { ...BASE_SETTINGS, ...overrides },
  });
  return { clock, store, cloud, controller };
}

/** Throws InjectedCrash the `nth` time `point` is reached; remembers whether it fired. */
export class CrashAt implements FaultInjector {
  fired = false;
  private hits = 0;
  constructor(
    readonly point: FaultPoint,
    private readonly nth = 1,
  ) {}
  hit(point: FaultPoint): void {
    if (point !== this.point || this.fired) return;
    this.hits += 1;
    if (this.hits === this.nth) {
      this.fired = true;
      throw new InjectedCrash(point);
    }
  }
}

/** Polls until `condition` holds (the controller's loop runs on its own), failing after `timeoutMs`. */
export async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Live (not terminated) store instances. */
export function liveRecords(store: StateStore) {
  return store.listInstances({ states: ['requested', 'launching', 'running', 'draining', 'terminating'] });
}

/** In a script: this run does not exit by itself. */
export const RUNS_ON = -1;

/**
 * Tasks that exit by script: each run of a task takes the next exit code of its script (0: success) on its first
 * status poll, after "uploading" a checkpoint, as a worker does when a task exits. Every start records which attempt
 * it is and the checkpoint it resumes from.
 */
export class ScriptedExits implements TaskControl {
  readonly name = 'scripted-exits';
  readonly starts: { taskId: string; attempt: number; fromCheckpoint: string | undefined }[] = [];
  readonly stops: string[] = [];
  private readonly runs = new Map<string, number>();
  private readonly exited = new Map<string, number>();

  /** Where the runs' checkpoints are recorded (the rig's store, once made). */
  store: StateStore | undefined;

  constructor(private readonly scripts: ReadonlyMap<string, readonly number[]>) {}

  async start({ task, job }: TaskStartRequest): Promise<void> {
    this.starts.push({ taskId: task.id, attempt: job.attempts, fromCheckpoint: task.lastCheckpointKey });
    this.runs.set(task.id, (this.runs.get(task.id) ?? 0) + 1);
    this.exited.delete(task.id);
  }

  async stop({ task, checkpoint }: TaskStopRequest): Promise<'stopped'> {
    this.stops.push(`${task.id}${checkpoint ? ' (checkpoint)' : ''}`);
    return 'stopped';
  }

  async status(task: TaskRecord): Promise<TaskStatus> {
    const run = this.runs.get(task.id) ?? 0;
    const code = this.scripts.get(task.id)?.[run - 1];
    if (code === undefined || code === RUNS_ON) return 'running';
    this.store?.recordCheckpoint(task.id, `checkpoints/${task.jobId}/${task.id}/${run}/manifest.json`);
    this.exited.set(task.id, code);
    return code === 0 ? 'succeeded' : 'failed';
  }

  exitCode(task: TaskRecord): number | undefined {
    return this.exited.get(task.id);
  }

  failureReason(task: TaskRecord): string | undefined {
    const code = this.exited.get(task.id);
    return code === undefined ? undefined : `exit code ${code}; last output:\nKilled`;
  }
}

/** A reconciler on the rig's store, cloud and clock with `control` for tasks (settings: the test's own). */
export function reconcilerFor(
  r: Rig,
  control: TaskControl,
  o: {
    readonly faults?: FaultInjector;
    readonly settings?: Partial<ReconcilerSettings>;
    readonly onMoveBegun?: (jobId: string) => void;
  } = {},
): Reconciler {
  return new Reconciler({
    store: r.store,
    catalog: () => catalog,
    provider: r.cloud,
    tasks: control,
    clock: r.clock,
    faults: o.faults,
    onMoveBegun: o.onMoveBegun,
    settings: {
      clusterName: BASE_SETTINGS.clusterName,
      orphanPolicy: 'adopt',
      vanishGraceSeconds: 60,
      registrationTimeoutSeconds: 600,
      registrationBackoffBaseSeconds: 60,
      registrationBackoffMaxSeconds: 3600,
      caps: {},
      ...o.settings,
    },
  });
}

/** A hand-written plan (as a scheduler would return it) for the store's current snapshot, and its diff. */
export function handPlan(r: Rig, configuration: Configuration): { plan: Plan; diff: ConfigurationDiff } {
  const snapshot = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
  const plan: Plan = {
    configuration,
    decision: {
      scheduler: 'hand',
      nowSeconds: r.clock.nowSeconds(),
      candidates: [],
      chosen: 'baseline',
      reason: 'test',
      waiting: [],
      pinned: [],
    },
  };
  return { plan, diff: diffConfiguration(snapshot, configuration, catalog) };
}

/**
 * The controller's side of the worker protocol over `store`, with local-mode registration (no cloud identity to
 * check) and a heartbeat every second; `options` override or add settings.
 */
export function workerTaskControlFor(
  store: StateStore,
  clock: ManualClock,
  options: Partial<WorkerTaskControlOptions> = {},
): WorkerTaskControl {
  return new WorkerTaskControl({
    store,
    catalog,
    clock,
    registrar: new WorkerRegistrar({
      store,
      clusterName: 'test',
      clusterKey: 'cluster-key-0123456789',
      describeInstance: () => Promise.resolve(undefined),
      launchCredential: { kind: 'launch-secret' },
    }),
    objectStoreLocation: '/tmp/fleetwise-test-objects',
    heartbeatSeconds: 1,
    heartbeatTimeoutSeconds: 600,
    ...options,
  });
}

/** A 2-task job (CPU_SMALL) both of whose tasks are starting on one running c7i.2xlarge, for cost replays. */
export function gangStartingOnOneInstance(store: StateStore): {
  readonly job: JobRecord;
  readonly inst: InstanceRecord;
  readonly tasks: TaskRecord[];
} {
  const job = store.submitJob(jobSpec('j1', CPU_SMALL, { replicas: 2 }));
  const inst = store.createInstance({ typeName: 'c7i.2xlarge' });
  store.setInstanceState(inst.id, 'launching', { cloudId: 'c-1' });
  store.setInstanceState(inst.id, 'running');
  const tasks = store.listTasks({ jobId: job.id });
  for (const t of tasks) store.setTaskState(t.id, 'starting', inst.id);
  return { job, inst, tasks };
}
