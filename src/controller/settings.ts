import type { FamilyGroupQuota } from '../core/quota-groups.js';
import type { QueueCaps } from '../queue/caps.js';
import type { AdmitBy } from '../queue/admission.js';
import type { WfqConfig } from '../queue/wfq.js';
import { evaTunables, type EvaOptions } from '../scheduler/eva.js';
import { DEFAULT_CONTEXT_LIMITS, type ContextLimits } from '../protocol/context-limits.js';
import type { ControllerConfig, OrphanPolicy } from './config.js';
import type { ReconcilerSettings } from './reconcile/context.js';

/** What the controller loop runs with, from the controller configuration (settingsFromConfig) or a test. */
export interface ControllerSettings {
  readonly clusterName: string;
  readonly roundSeconds: number;
  readonly pollSeconds: number;
  /** $/hour and instance count (Eva enforces them on its plans) and quotas per family group (admission does). */
  readonly caps: QueueCaps;
  /** WFQ classes, orderings and preemption policy of the queue layer; default one FIFO class. */
  readonly queue?: WfqConfig | undefined;
  /** How waiting jobs are sized against a $/hour cap (queue/admission.ts); default `standalone` here, `plan-cost` from a config. */
  readonly admitBy?: AdmitBy | undefined;
  /** Eva's options besides the caps (the config's `scheduler:` section); default: Eva's defaults. */
  readonly eva?: Omit<EvaOptions, 'caps' | 'variant' | 'exact'> | undefined;
  readonly dryRun: boolean;
  readonly orphanPolicy: OrphanPolicy;
  readonly vanishGraceSeconds: number;
  readonly registrationTimeoutSeconds: number;
  readonly registrationBackoffBaseSeconds: number;
  readonly registrationBackoffMaxSeconds: number;
  readonly reportEverySeconds: number;
  /** A worker silent this long is lost; a task's exit it reports may be heard this late (default 0: tests). */
  readonly workerHeartbeatTimeoutSeconds?: number | undefined;
  /** Cost reports kept in the object store, the newest (default report-retention.ts's 168). */
  readonly reportsKept?: number | undefined;
  readonly tags?: Readonly<Record<string, string>>;
  /**
   * Plan early on submissions, completions, drains and lost capacity (default true). False: those wait for the period,
   * as Eva's reference simulator plans (the simulator's `--early-rounds` off); capacity lost or about to be (a spot
   * notice or recommendation, an instance or its worker gone) is still planned for at once, as the engine does.
   */
  readonly earlyRounds?: boolean | undefined;
  /** Early rounds are at least this far apart, so a burst of submissions is planned together. */
  readonly minRoundGapSeconds?: number;
  /** Rounds (plans and decisions) kept in the store (default history-retention.ts's 5,000). */
  readonly roundsKept?: number;
  /** Days `task.checkpoint` events are kept (default history-retention.ts's 30); 0 keeps them all. */
  readonly checkpointEventDays?: number | undefined;
  /** Days a finished job's checkpoints stay in the object store (default finished-checkpoint-retention.ts's 30); 0 keeps them. */
  readonly finishedCheckpointDays?: number | undefined;
  /** A loop pass running longer than this makes `/healthz` answer 503 (default loop-health.ts's 60 s). */
  readonly loopStuckSeconds?: number | undefined;
  /** How far ahead a completion-time prediction simulates (default 30 days): later completions read "beyond". */
  readonly predictionHorizonSeconds?: number | undefined;
  /** Wall-clock seconds one prediction may take (default 10); it runs in a worker thread, off the loop. */
  readonly predictionBudgetSeconds?: number | undefined;
  /** A co-started job whose tasks are not all ready this long after the first was is planned again (default 900 s). */
  readonly coStartTimeoutSeconds?: number | undefined;
  /**
   * While the caps hold jobs back, place a job that fits on capacity already paid for at its submission (or when a job
   * ends) instead of at the next round (round/place-waiting.ts). Absent: off (as the simulator's default).
   */
  readonly placeBetweenRounds?: boolean | undefined;
  /** That placement may also wait for an instance still coming up, when it is ready no later than a launch would be. */
  readonly bindBetweenRounds?: boolean | undefined;
  /**
   * A job moving to instances still coming up works on until they are ready, then checkpoints (round/gates.ts
   * `moveStopGate`). Absent: off (as the simulator's default); a config turns it on.
   */
  readonly makeBeforeBreak?: boolean | undefined;
}

export function settingsFromConfig(config: ControllerConfig): ControllerSettings {
  return {
    clusterName: config.cluster,
    roundSeconds: config.roundSeconds,
    pollSeconds: config.pollSeconds,
    caps: capsOf(config.caps, config.file),
    queue: config.queue,
    admitBy: admitByOf(config),
    eva: evaTunables(config.scheduler),
    dryRun: config.dryRun,
    orphanPolicy: config.orphans,
    vanishGraceSeconds: config.vanishGraceSeconds,
    registrationTimeoutSeconds: config.workerRegistration.timeoutSeconds,
    registrationBackoffBaseSeconds: config.workerRegistration.backoffBaseSeconds,
    registrationBackoffMaxSeconds: config.workerRegistration.backoffMaxSeconds,
    reportEverySeconds: config.reportEverySeconds,
    workerHeartbeatTimeoutSeconds: config.workerHeartbeatTimeoutSeconds,
    tags: config.ec2.tags,
    loopStuckSeconds: config.loopStuckSeconds,
    predictionHorizonSeconds: config.predictions.horizonDays * 86_400,
    predictionBudgetSeconds: config.predictions.budgetSeconds,
    coStartTimeoutSeconds: config.coStartTimeoutSeconds,
    placeBetweenRounds: config.placeBetweenRounds,
    bindBetweenRounds: config.bindBetweenRounds,
    makeBeforeBreak: config.makeBeforeBreak,
    checkpointEventDays: config.checkpointEventDays,
    finishedCheckpointDays: config.finishedCheckpointDays,
    reportsKept: config.reportsKept,
  };
}

/** The part of the settings the reconciler works with. */
export function reconcilerSettings(settings: ControllerSettings): ReconcilerSettings {
  return {
    clusterName: settings.clusterName,
    orphanPolicy: settings.orphanPolicy,
    vanishGraceSeconds: settings.vanishGraceSeconds,
    registrationTimeoutSeconds: settings.registrationTimeoutSeconds,
    registrationBackoffBaseSeconds: settings.registrationBackoffBaseSeconds,
    registrationBackoffMaxSeconds: settings.registrationBackoffMaxSeconds,
    caps: settings.caps,
    tags: settings.tags ?? {},
    coStartTimeoutSeconds: settings.coStartTimeoutSeconds,
    makeBeforeBreak: settings.makeBeforeBreak,
  };
}

/**
 * The build context limits of an upload or a job by `team` (undefined: the admin, who gets the cluster's): the team's
 * own configured limits, else the cluster's, else the defaults, field by field.
 */
export function contextLimitsFrom(
  section: ControllerConfig['buildContexts'],
): (team: string | undefined) => ContextLimits {
  const { teams, ...cluster } = section;
  return (team) => {
    const own = team === undefined ? {} : (teams[team] ?? {});
    return {
      maxArchiveBytes:
        own.maxArchiveBytes ?? cluster.maxArchiveBytes ?? DEFAULT_CONTEXT_LIMITS.maxArchiveBytes,
      maxExpandedBytes:
        own.maxExpandedBytes ?? cluster.maxExpandedBytes ?? DEFAULT_CONTEXT_LIMITS.maxExpandedBytes,
      maxExpansionRatio:
        own.maxExpansionRatio ?? cluster.maxExpansionRatio ?? DEFAULT_CONTEXT_LIMITS.maxExpansionRatio,
    };
  };
}

/** How a config sizes waiting jobs against its $/hour cap: as it says, else by the plan's cost. */
export function admitByOf(config: ControllerConfig): AdmitBy {
  return config.caps.admitBy ?? 'plan-cost';
}

/**
 * The caps of a config without the admission setting that sits beside them, each quota named by its entry
 * (`fleetwise.yaml: caps.quotas.0 (group p, maxGpus 2)`, with `file`, the config file's path, when it came from one):
 * a message about a quota (a job that never fits under it) then names the field to change, not a command-line flag.
 */
export function capsOf(caps: ControllerConfig['caps'], file?: string): QueueCaps {
  const { admitBy: _admitBy, quotas, ...rest } = caps;
  if (quotas === undefined) return rest;
  return {
    ...rest,
    quotas: quotas.map((q, i) => ({
      ...q,
      source: `${file === undefined ? '' : `${file}: `}caps.quotas.${i} (${quotaEntry(q)})`,
    })),
  };
}

/** A config's quota entry as its fields read, e.g. `group p, maxGpus 2`. */
function quotaEntry(q: FamilyGroupQuota): string {
  return [
    `group ${q.group}`,
    ...(q.maxVcpus === undefined ? [] : [`maxVcpus ${q.maxVcpus}`]),
    ...(q.maxGpus === undefined ? [] : [`maxGpus ${q.maxGpus}`]),
  ].join(', ');
}
