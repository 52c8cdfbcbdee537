import { typesByName, type Catalog, type InstanceType } from '../../core/catalog.js';
import type { FamilyDemand } from '../../core/resources.js';
import type { QueueCaps } from '../../queue/caps.js';
import { PriceBook } from '../../scheduler/reservation-price.js';
import type { CloudInstance, CloudProvider } from '../../cloud/provider.js';
import type { Clock } from '../clock.js';
import type { BarrierIdleHook } from '../co-start-records.js';
import type { OrphanPolicy } from '../config.js';
import type { FaultInjector, FaultPoint } from '../faults.js';
import { expandTasks } from '../job-spec/tasks.js';
import { silentLogger, type ControllerLogger, type TaskControl } from '../seams.js';
import type { IntentRecord, JobRecord, StateStore, TaskRecord } from '../state-store.js';
import type { RoundCause } from '../service.js';

export interface ReconcilerSettings {
  readonly clusterName: string;
  readonly orphanPolicy: OrphanPolicy;
  readonly vanishGraceSeconds: number;
  readonly registrationTimeoutSeconds: number;
  readonly registrationBackoffBaseSeconds: number;
  readonly registrationBackoffMaxSeconds: number;
  /** Caps every launch keeps, counting the fleet in transit (round/gates.ts `launchGate`). */
  readonly caps: QueueCaps;
  /** Extra tags on launched instances. */
  readonly tags?: Readonly<Record<string, string>>;
  /** Retry delays for launches that failed for another reason than capacity (throttling, API errors). */
  readonly launchRetryBaseSeconds?: number;
  readonly launchRetryMaxSeconds?: number;
  /** A co-started job some of whose tasks are still unready this long after the first was is planned again. */
  readonly coStartTimeoutSeconds?: number | undefined;
  /** A moving job works on until the instances it moves to are ready (round/gates.ts `moveStopGate`). */
  readonly makeBeforeBreak?: boolean | undefined;
}

export interface ReconcilerDeps {
  readonly store: StateStore;
  /**
   * The controller's current catalog, read at each use: a price refresh (Controller.applyCatalog) reaches the launch
   * gate, the fallback's cheapest type and the fleet in transit as it reaches the plan, or the gate would refuse at
   * the old prices what the plan chose at the new ones.
   */
  readonly catalog: () => Catalog;
  /** Undefined in dry-run: nothing here may call the cloud then. */
  readonly provider: CloudProvider | undefined;
  readonly tasks: TaskControl;
  readonly clock: Clock;
  readonly settings: ReconcilerSettings;
  readonly faults?: FaultInjector | undefined;
  readonly logger?: ControllerLogger | undefined;
  /** A job reached a final state (its cost report is due) or the fleet changed enough to plan again. */
  readonly onJobEnded?: (job: JobRecord) => void;
  /**
   * A move or a return to the queue counted, once per move: the first of the job's tasks that leaves its instance was
   * reported stopped (a task restarted on its own instance, or whose instance is gone, moved nothing).
   */
  readonly onMoveBegun?: (jobId: string) => void;
  /**
   * Holds at the co-start barrier ended without a release (a co-start timeout, a drained or lost instance of the
   * job): what they newly cost, as they end (co-start-records.ts `writeUnreleasedCoStart`).
   */
  readonly onBarrierIdle?: BarrierIdleHook;
  readonly requestRound?: (reason: string, cause?: RoundCause) => void;
  /** After every comparison with the cloud: the orphans the keep policy left running (reported, never touched). */
  readonly onOrphansKept?: (instances: readonly CloudInstance[]) => void;
}

/** Instances that cost money or may still: counted by the launch gate and compared with the cloud by the sync. */
export const LIVE_INSTANCE_STATES = ['requested', 'launching', 'running', 'draining', 'terminating'] as const;

/** What every step of the reconciler shares: its dependencies and the store look-ups they all make. */
export class ReconcileContext {
  readonly store: StateStore;
  readonly settings: ReconcilerSettings;
  readonly log: ControllerLogger;
  /** The price book of the catalog last read, rebuilt only when a price refresh replaces the catalog. */
  private prices: PriceBook | undefined;

  constructor(readonly deps: ReconcilerDeps) {
    this.store = deps.store;
    this.settings = deps.settings;
    this.log = deps.logger ?? silentLogger;
  }

  /** The controller's current catalog (ReconcilerDeps.catalog). */
  get catalog(): Catalog {
    return this.deps.catalog();
  }

  get book(): PriceBook {
    const catalog = this.catalog;
    if (this.prices?.catalog !== catalog) this.prices = new PriceBook(catalog);
    return this.prices;
  }

  fault(point: FaultPoint, detail: string): void {
    this.deps.faults?.hit(point, detail);
  }

  now(): number {
    return this.deps.clock.nowSeconds();
  }

  /** The cloud; throws in dry-run, so no code path can reach it then. */
  get provider(): CloudProvider {
    if (this.deps.provider === undefined)
      throw new Error('no cloud provider (dry-run): refusing a cloud call');
    return this.deps.provider;
  }

  get dryRun(): boolean {
    return this.deps.provider === undefined;
  }

  requestRound(reason: string, cause?: RoundCause): void {
    this.deps.requestRound?.(reason, cause);
  }

  typeOf(typeName: string): InstanceType | undefined {
    return typesByName(this.catalog).get(typeName);
  }

  demandOf(task: TaskRecord): FamilyDemand {
    const job = this.store.getJob(task.jobId) as JobRecord;
    const expanded = expandTasks(job.spec).find((t) => t.index === task.index);
    if (expanded === undefined) throw new Error(`task ${task.id}: no such task in its job's spec`);
    return expanded.template.demand;
  }

  pendingStartsOf(taskIds: ReadonlySet<string>): IntentRecord[] {
    return this.store
      .listIntents({ states: ['pending'], kind: 'start-task' })
      .filter((i) => i.kind === 'start-task' && taskIds.has(i.payload.taskId));
  }

  /** Whether one of these tasks still runs with a checkpoint-stop pending: a move waiting for its new instances. */
  moveWaiting(tasks: readonly TaskRecord[]): boolean {
    const running = new Set(tasks.filter((t) => t.state === 'running').map((t) => t.id));
    return (
      running.size > 0 &&
      this.store
        .listIntents({ states: ['pending'], kind: 'stop-task' })
        .some((i) => i.kind === 'stop-task' && i.payload.checkpoint && running.has(i.payload.taskId))
    );
  }

  pendingIntentsFor(kind: 'launch' | 'terminate', instanceId: string): IntentRecord[] {
    return this.store
      .listIntents({ states: ['pending'], kind })
      .filter((i) => (i.kind === 'launch' || i.kind === 'terminate') && i.payload.instanceId === instanceId);
  }
}
