import type { Catalog, InstanceType, LaunchDelays } from '../../src/core/catalog.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { Resources } from '../../src/core/resources.js';
import type { SpotMarket, SpotOffering } from '../../src/core/spot.js';
import type { Configuration, Plan, Scheduler, ThroughputObservation } from '../../src/scheduler/types.js';
import type { SimLogEntry, SimLogKind } from '../../src/world/simulation-types.js';
import type { Trace, TraceJob, TraceTask } from '../../src/world/trace.js';

/** Small hand-checkable worlds for the engine's tests. */

export function instanceType(
  name: string,
  capacity: Resources,
  costPerHour: number,
  delays: Partial<LaunchDelays> = {},
): InstanceType {
  return {
    name,
    family: name.split('.')[0] as string,
    capacity,
    costPerHour,
    delays: {
      instantiateSeconds: 10,
      workerStartSeconds: 20,
      workerRegisterSeconds: 30,
      terminateSeconds: 5,
      ...delays,
    },
  };
}

/** `small.x` $3.6/h = $0.001/s (setup 10 + 20 + 30 s, terminate 5 s); `big.x` four times the room at $10.8/h. */
export function testCatalog(extra: readonly InstanceType[] = []): Catalog {
  return {
    provider: 'test',
    region: 'test',
    types: [instanceType('small.x', [1, 8, 32], 3.6), instanceType('big.x', [4, 32, 128], 10.8), ...extra],
  };
}

/** A catalog's spot section for tests: these offerings, from a fixed test snapshot. */
export function testSpotMarket(...offerings: SpotOffering[]): SpotMarket {
  return { snapshotDate: '2026-11-24', source: 'test', offerings };
}

export function traceTask(name: string, overrides: Partial<TraceTask> = {}): TraceTask {
  return {
    name,
    demand: { any: [1, 4, 8] },
    shmSizeGiB: 1,
    imageId: 'img-a',
    fetchDelaySeconds: 2,
    buildImageDelaySeconds: 3,
    killDelaySeconds: 1,
    uploadDelaySeconds: 4,
    ...overrides,
  };
}

export interface JobOptions {
  readonly arrivalSeconds?: number;
  readonly iterations?: number;
  readonly fullThroughput?: number;
  readonly initDelaySeconds?: number;
  readonly workload?: string;
  readonly tasks?: readonly TraceTask[];
}

export function traceJob(id: string, o: JobOptions = {}): TraceJob {
  const fullThroughput = o.fullThroughput ?? 1;
  const iterations = o.iterations ?? 1000;
  const workload = o.workload ?? 'a';
  return {
    id,
    name: `${workload}[${id}]`,
    workload,
    arrivalSeconds: o.arrivalSeconds ?? 0,
    durationSeconds: iterations / fullThroughput,
    initDelaySeconds: o.initDelaySeconds ?? 7,
    fullThroughput,
    totalIterations: iterations,
    tasks: o.tasks ?? [traceTask('node0')],
  };
}

export function trace(...jobs: TraceJob[]): Trace {
  return { name: 'test', jobs: [...jobs].sort((a, b) => a.arrivalSeconds - b.arrivalSeconds) };
}

/**
 * A scheduler driven by a script: `decide` returns the configuration for each round (or undefined to keep the
 * current one). It records what it was shown.
 */
export class ScriptedScheduler implements Scheduler {
  readonly snapshots: ClusterSnapshot[] = [];
  readonly observations: (readonly ThroughputObservation[])[] = [];

  constructor(
    readonly name: string,
    private readonly decide: (snapshot: ClusterSnapshot, round: number) => Configuration | undefined,
  ) {}

  observe(snapshot: ClusterSnapshot, observations: readonly ThroughputObservation[]): void {
    this.observations.push(observations);
  }

  plan(snapshot: ClusterSnapshot): Plan {
    this.snapshots.push(snapshot);
    const configuration = this.decide(snapshot, this.snapshots.length - 1) ?? currentConfiguration(snapshot);
    return {
      configuration,
      decision: {
        scheduler: this.name,
        nowSeconds: snapshot.nowSeconds,
        candidates: [],
        chosen: 'baseline',
        reason: 'scripted',
        waiting: [],
        pinned: [],
      },
    };
  }
}

/** The snapshot's committed configuration, unchanged (empty instances dropped). */
export function currentConfiguration(snapshot: ClusterSnapshot): Configuration {
  const byInstance = new Map<string, string[]>();
  for (const t of snapshot.tasks)
    if (t.instanceId !== undefined)
      byInstance.set(t.instanceId, [...(byInstance.get(t.instanceId) ?? []), t.id]);
  return {
    instances: snapshot.instances
      .filter((i) => byInstance.has(i.id))
      .map((i) => ({
        id: i.id,
        typeName: i.typeName,
        isNew: false,
        taskIds: byInstance.get(i.id) as string[],
      })),
  };
}

/** Collects the engine's lifecycle log; `time(kind, filter)` finds when something happened. */
export class EventLog {
  readonly entries: SimLogEntry[] = [];
  readonly record = (e: SimLogEntry): void => {
    this.entries.push(e);
  };

  all(kind: SimLogKind, filter: Partial<SimLogEntry> = {}): SimLogEntry[] {
    return this.entries.filter(
      (e) => e.kind === kind && Object.entries(filter).every(([k, v]) => e[k as keyof SimLogEntry] === v),
    );
  }

  times(kind: SimLogKind, filter: Partial<SimLogEntry> = {}): number[] {
    return this.all(kind, filter).map((e) => e.timeSeconds);
  }

  /** The single time `kind` happened (throws if it did not happen exactly once). */
  time(kind: SimLogKind, filter: Partial<SimLogEntry> = {}): number {
    const ts = this.times(kind, filter);
    if (ts.length !== 1)
      throw new Error(`expected one ${kind} ${JSON.stringify(filter)}, got ${ts.length}: ${ts.join(', ')}`);
    return ts[0] as number;
  }
}
