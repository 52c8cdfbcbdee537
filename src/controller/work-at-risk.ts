import { MARKETS, type Market } from '../core/market.js';

/**
 * Work at risk: what losing the instances now would make running tasks redo. A task resumes from its newest
 * checkpoint, so it stands to lose the time since that checkpoint, or since its run began when the checkpoint is
 * older (a restored task starts from it) or there is none. The quantity the round prices a spot instance's
 * interruption by (scheduler/spot-cost.ts, which counts a run's work from the end of its init), shown per market so an
 * operator sees what a reclaim would cost right now.
 */

export interface RunningTaskCheckpoint {
  readonly market: Market;
  /**
   * When the task's job entered `running` last: each move starts a new run once its tasks stop where they were, and
   * until then (a move waiting for its new instances) they go on with this one.
   */
  readonly runningSinceSeconds: number;
  readonly lastCheckpointAtSeconds?: number | undefined;
}

export interface MarketWorkAtRisk {
  readonly market: Market;
  readonly runningTasks: number;
  /** Σ over the running tasks of the seconds each would redo. */
  readonly totalSeconds: number;
  /** The most any one task would redo. */
  readonly maxSeconds: number;
}

export function workAtRisk(nowSeconds: number, tasks: readonly RunningTaskCheckpoint[]): MarketWorkAtRisk[] {
  return MARKETS.map((market) => {
    const atRisk = tasks
      .filter((t) => t.market === market)
      .map((t) =>
        Math.max(0, nowSeconds - Math.max(t.runningSinceSeconds, t.lastCheckpointAtSeconds ?? -Infinity)),
      );
    return {
      market,
      runningTasks: atRisk.length,
      totalSeconds: atRisk.reduce((sum, s) => sum + s, 0),
      maxSeconds: atRisk.reduce((max, s) => Math.max(max, s), 0),
    };
  });
}

/**
 * The running tasks of a round's inputs (snapshot.ts), each with its instance's market. Those of migrating jobs too:
 * a move waiting for its new instances leaves its tasks running where they were, on an instance that may be going
 * away (drained, or reclaimed: a spot notice drains it), and a loss then redoes their run as it would a running job's.
 */
export function runningTaskCheckpoints(inputs: {
  readonly tasks: readonly {
    readonly jobId: string;
    readonly state: string;
    readonly instanceId?: string | undefined;
    readonly lastCheckpointAtSeconds?: number | undefined;
  }[];
  readonly runningSince: ReadonlyMap<string, number>;
  /**
   * Running job → when its tasks were all prepared (snapshot.ts): before that nothing of its run is done, so nothing
   * is at risk. Absent: a running job counts from when it entered `running`.
   */
  readonly preparedSince?: ReadonlyMap<string, number> | undefined;
  readonly migratingSince?: ReadonlyMap<string, number> | undefined;
  readonly spotInstances?: ReadonlySet<string> | undefined;
}): RunningTaskCheckpoint[] {
  const running: RunningTaskCheckpoint[] = [];
  for (const t of inputs.tasks) {
    const since = inputs.runningSince.has(t.jobId)
      ? (inputs.preparedSince ?? inputs.runningSince).get(t.jobId)
      : inputs.migratingSince?.get(t.jobId);
    if (t.state !== 'running' || t.instanceId === undefined || since === undefined) continue;
    running.push({
      market: inputs.spotInstances?.has(t.instanceId) === true ? 'spot' : 'on-demand',
      runningSinceSeconds: since,
      lastCheckpointAtSeconds: t.lastCheckpointAtSeconds,
    });
  }
  return running;
}
