import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BackupManifest } from '../backup/backup-documents.js';
import type { BackupMetrics } from '../backup/backup-schedule.js';
import type { JobArchiveMetrics } from '../backup/job-archive.js';
import { JOB_STATES, TASK_STATES } from '../state-store.js';
import { LIVE_INSTANCE_STATES } from '../reconcile/context.js';
import type { LatencyPair } from '../latency-matrix.js';
import { waitingCapName } from '../../round/round.js';
import type { JobRule } from '../round-recorder.js';
import type { ApiControllerService } from './routing.js';
import { instanceMarket } from '../instance-market.js';
import { NO_INSTANCE_TYPE } from '../../queue/admission-views.js';
import { hasAnyCap, type QueueCaps } from '../../queue/caps.js';
import { isFinalJobState } from '../state/lifecycle.js';

/** The rules a controller ends jobs as failed by (every JobRule: the compiler checks the list is whole). */
const JOB_RULES = Object.keys({ 'run-limit': true, dependency: true } satisfies Record<
  JobRule,
  true
>) as JobRule[];

type ArchivePart = Parameters<JobArchiveMetrics['jobArchiveFailed']>[0];
const ARCHIVE_PARTS = Object.keys({ spec: true, end: true } satisfies Record<
  ArchivePart,
  true
>) as ArchivePart[];

/**
 * Every name `fleetwise_caps_hit_total` can count a cap under with these caps and queue classes: the caps as
 * `capViolations` and a refused plan name them, a queue class's share and maxShare, `caps` (held behind another
 * class's reservation), and `no instance type`. Without a $ or resource cap nothing is queued for a share.
 */
export function capNames(caps: QueueCaps, classIds: readonly string[]): string[] {
  const names = [NO_INSTANCE_TYPE];
  if (caps.maxCostPerHour !== undefined) names.push('maxCostPerHour');
  if (caps.maxInstances !== undefined) names.push('maxInstances');
  if (caps.maxMigrationsPerRound !== undefined) names.push('maxMigrationsPerRound');
  for (const q of caps.quotas ?? []) {
    if (q.maxVcpus !== undefined) names.push(`quota ${q.group} maxVcpus`);
    if (q.maxGpus !== undefined) names.push(`quota ${q.group} maxGpus`);
  }
  if (hasAnyCap(caps))
    names.push('caps', ...classIds.flatMap((id) => [`class ${id} share`, `class ${id} maxShare`]));
  return [...new Set(names)];
}

/**
 * Prometheus metrics of a controller. Counters (rounds, their duration, migrations, caps hit) are incremented by
 * the controller loop through this object; gauges (cost rate, instances, jobs) are read from the state store at
 * scrape time, so they can never drift from what the store says.
 */
export class ControllerMetrics implements BackupMetrics, JobArchiveMetrics {
  readonly registry = new Registry();
  /** When the object store last held the whole state (epoch seconds); undefined before the first backup. */
  private backupCoveredAtSeconds: number | undefined;
  private readonly rounds = new Counter({
    name: 'fleetwise_rounds_total',
    help: 'Scheduling rounds completed',
    registers: [this.registry],
  });
  private readonly roundDuration = new Histogram({
    name: 'fleetwise_round_duration_seconds',
    help: 'Wall time of a scheduling round (snapshot, plan, actions)',
    // Rounds plan in milliseconds for small clusters and up to tens of seconds when the ILP runs (digest §5).
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  private readonly lastRoundDuration = new Gauge({
    name: 'fleetwise_last_round_duration_seconds',
    help: 'Wall time of the latest scheduling round',
    registers: [this.registry],
  });
  private readonly migrations = new Counter({
    name: 'fleetwise_migrations_total',
    help: 'Jobs moved or returned to the queue (their tasks checkpointed and stopped), counted as the first task that leaves its instance stops',
    registers: [this.registry],
  });
  private readonly capsHit = new Counter({
    name: 'fleetwise_caps_hit_total',
    help: 'Times a cap ($/hour, instances, a quota, migrations per round, a class share) kept a plan or a job back: a job kept waiting counts once a round',
    labelNames: ['cap'] as const,
    registers: [this.registry],
  });

  private readonly backupCovered = new Gauge({
    name: 'fleetwise_backup_last_success_timestamp_seconds',
    help: 'When the object store last held the whole state: the newest backup was taken then, or nothing changed since',
    registers: [this.registry],
  });
  private readonly backupAge = new Gauge({
    name: 'fleetwise_backup_age_seconds',
    help: 'Seconds of state changes the loss of the controller machine would lose now (-1 before the first backup)',
    registers: [this.registry],
    collect: () => {
      const covered = this.backupCoveredAtSeconds;
      this.backupAge.set(covered === undefined ? -1 : Math.max(0, Date.now() / 1000 - covered));
    },
  });
  private readonly backupSize = new Gauge({
    name: 'fleetwise_backup_size_bytes',
    help: 'Size of the newest state backup as stored (gzip-compressed)',
    registers: [this.registry],
  });
  private readonly backupDuration = new Gauge({
    name: 'fleetwise_backup_duration_seconds',
    help: 'Wall time of the newest state backup (snapshot, compression, uploads, rotation)',
    registers: [this.registry],
  });
  private readonly backupFailures = new Counter({
    name: 'fleetwise_backup_failures_total',
    help: 'State backups that failed (each is logged; the next period tries again)',
    registers: [this.registry],
  });
  private readonly jobArchiveFailures = new Counter({
    name: 'fleetwise_job_archive_failures_total',
    help: 'Job archive writes that failed: spec (the submission was refused with a 503) or end (retried)',
    labelNames: ['part'] as const,
    registers: [this.registry],
  });

  private readonly startSkew = new Histogram({
    name: 'fleetwise_job_start_skew_seconds',
    help: "Multi-task jobs: the spread of their tasks' starts (latest − earliest, as heard from the workers)",
    // Co-started tasks start within a heartbeat of each other; uncoordinated ones up to an instance's boot apart.
    buckets: [1, 2, 5, 10, 30, 60, 120, 300, 600, 1800],
    registers: [this.registry],
  });
  private readonly barrierIdle = new Counter({
    name: 'fleetwise_barrier_idle_cost_dollars_total',
    help: "Multi-task jobs: paid capacity their tasks held while waiting for their siblings (Σ (job start − task start) × the task's share of its instance's $/h), and holds that ended without a start (a co-start timeout, a drained or lost instance, the job's end)",
    registers: [this.registry],
  });

  private readonly endedByRule = new Counter({
    name: 'fleetwise_jobs_failed_by_rule_total',
    help: 'Jobs the controller ended as failed by a rule of their spec: run-limit (past maxRunSeconds), dependency (a job they depend on ended without success)',
    labelNames: ['rule'] as const,
    registers: [this.registry],
  });

  constructor() {
    // Every label value known now starts at 0: a series that first appears at its first increment has no sample
    // before it, so Prometheus' increase() and rate() miss that first event after every start.
    for (const rule of JOB_RULES) this.endedByRule.inc({ rule }, 0);
    for (const part of ARCHIVE_PARTS) this.jobArchiveFailures.inc({ part }, 0);
    this.capsHit.inc({ cap: NO_INSTANCE_TYPE }, 0);
  }

  /** Start a series at 0 for every cap name these caps and queue classes can be counted under (`capNames`). */
  expectCaps(caps: QueueCaps, classIds: readonly string[]): void {
    for (const cap of capNames(caps, classIds)) this.capsHit.inc({ cap }, 0);
  }

  countJobsFailedByRule(rule: JobRule, jobs: number): void {
    if (jobs > 0) this.endedByRule.inc({ rule }, jobs);
  }

  /**
   * A multi-task job's start, measured once all its tasks were heard running (co-start-records.ts). Its holds that
   * ended without a release (`unreleasedIdleCost`) were counted as they ended (observeBarrierIdle).
   */
  observeStart(measured: {
    readonly startSkewSeconds: number;
    readonly barrierIdleCost: number;
    readonly unreleasedIdleCost?: number;
  }): void {
    this.startSkew.observe(measured.startSkewSeconds);
    this.observeBarrierIdle(measured.barrierIdleCost - (measured.unreleasedIdleCost ?? 0));
  }

  /** Barrier-idle cost of holds that ended without a release (a re-plan, a drained or lost instance, the job's end). */
  observeBarrierIdle(dollars: number): void {
    if (Number.isFinite(dollars) && dollars > 0) this.barrierIdle.inc(dollars);
  }

  backupStored(manifest: BackupManifest, durationSeconds: number): void {
    this.backupCoveredAtSeconds = manifest.takenAtSeconds;
    this.backupCovered.set(manifest.takenAtSeconds);
    this.backupSize.set(manifest.sizeBytes);
    this.backupDuration.set(durationSeconds);
  }

  backupStillCurrent(atSeconds: number): void {
    this.backupCoveredAtSeconds = atSeconds;
    this.backupCovered.set(atSeconds);
  }

  backupFailed(): void {
    this.backupFailures.inc();
  }

  jobArchiveFailed(part: ArchivePart): void {
    this.jobArchiveFailures.inc({ part });
  }

  /** One finished round and how long it took. */
  observeRound(durationSeconds: number): void {
    this.rounds.inc();
    this.roundDuration.observe(durationSeconds);
    this.lastRoundDuration.set(durationSeconds);
  }

  countMigrations(jobs = 1): void {
    if (jobs > 0) this.migrations.inc(jobs);
  }

  countCapHit(cap: string, times = 1): void {
    if (times > 0) this.capsHit.inc({ cap }, times);
  }
}

/** Gauges computed from the service's store at scrape time, in a registry of their own. */
export function storeGaugeRegistry(service: ApiControllerService): Registry {
  const registry = new Registry();
  new Gauge({
    name: 'fleetwise_cost_per_hour_dollars',
    help: 'Cost rate of the instances launched and not yet terminated, as billed: spot ones at their pool spot price, on-demand ones at their list price ($/hour)',
    registers: [registry],
    collect() {
      this.set(service.cluster().costPerHour);
    },
  });
  new Gauge({
    name: 'fleetwise_instances',
    help: 'Instances not yet terminated, by instance type, state and market (spot, on-demand)',
    labelNames: ['type', 'state', 'market'] as const,
    registers: [registry],
    collect() {
      this.reset();
      // Terminated instances are most of them on a long-running controller: not read at every scrape. The market
      // at most doubles the series (two values), and says why the fleet's $/hour is below its types' list prices.
      for (const i of service.store.listInstances({ states: [...LIVE_INSTANCE_STATES] }))
        this.inc({ type: i.typeName, state: i.state, market: instanceMarket(service.store, i.id) });
    },
  });
  new Gauge({
    name: 'fleetwise_jobs',
    help: 'Jobs by state',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const counted = service.store.countByState?.().jobs;
      const counts = new Map<string, number>(JOB_STATES.map((s) => [s, counted?.[s] ?? 0]));
      if (counted === undefined)
        for (const j of service.store.listJobs()) counts.set(j.state, (counts.get(j.state) ?? 0) + 1);
      for (const [state, n] of counts) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'fleetwise_tasks',
    help: 'Tasks by state',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const counted = service.store.countByState?.().tasks;
      const counts = new Map<string, number>(TASK_STATES.map((s) => [s, counted?.[s] ?? 0]));
      if (counted === undefined)
        for (const t of service.store.listTasks()) counts.set(t.state, (counts.get(t.state) ?? 0) + 1);
      for (const [state, n] of counts) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'fleetwise_jobs_waiting_on_cap',
    help: 'Jobs the latest round kept off the plan, by what kept them: a cap ($/hour, instances, a quota) or a class share',
    labelNames: ['cap'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const waiting = service.latestWaiting?.() ?? service.store.latestRound()?.decision.waiting ?? [];
      // A job ended since (cancelled while it waited) waits no more, though no round has run to say so.
      for (const w of waiting) {
        const job = service.store.getJob(w.jobId);
        if (job !== undefined && !isFinalJobState(job.state)) this.inc({ cap: waitingCapName(w) });
      }
    },
  });
  new Gauge({
    name: 'fleetwise_value_of_time_dollars_per_job_hour',
    help: "Eva's value of an hour of a job's completion time in the latest round: fixed, or learned from the target slowdown (0: dollars only)",
    registers: [registry],
    collect() {
      this.set(service.store.latestRound()?.decision.valueOfTimePerJobHour ?? 0);
    },
  });
  // Round trips between instances, as the workers measured them (one series per measured pair; the max is what
  // latency-aware placement uses).
  const rttGauge = (name: string, help: string, pick: (p: LatencyPair) => number | undefined): void => {
    new Gauge({
      name,
      help,
      labelNames: ['from', 'to'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const p of service.latency?.().pairs ?? []) {
          const value = pick(p);
          if (value !== undefined) this.set({ from: p.fromInstanceId, to: p.toInstanceId }, value);
        }
      },
    });
  };
  rttGauge(
    'fleetwise_instance_rtt_max_seconds',
    "Largest round trip from one instance to another over the measuring worker's window",
    (p) => (p.maxMicroseconds === undefined ? undefined : p.maxMicroseconds / 1e6),
  );
  rttGauge(
    'fleetwise_instance_rtt_p99_seconds',
    "99th percentile round trip from one instance to another over the measuring worker's window",
    (p) => (p.p99Microseconds === undefined ? undefined : p.p99Microseconds / 1e6),
  );
  rttGauge(
    'fleetwise_instance_rtt_probe_failures',
    "Probes from one instance to another that got no answer in the measuring worker's window",
    (p) => p.failures,
  );
  new Gauge({
    name: 'fleetwise_orphan_instances',
    help: 'Instances tagged with the cluster that the state does not know, kept running (orphan policy keep)',
    registers: [registry],
    collect() {
      this.set(service.cluster().orphans.length);
    },
  });
  const readMonthToDate = service.monthToDateCosts?.bind(service);
  if (readMonthToDate !== undefined) {
    // Both month gauges from one read a scrape: read apart, the clock moves between them and a team's share of the
    // month could exceed the fleet's bill.
    const monthToDate = oncePerScrape(readMonthToDate);
    new Gauge({
      name: 'fleetwise_month_cost_dollars',
      help: "The fleet's bill in the current UTC month so far (idle and migration time included; every hour at the current prices, as a report over the month), $",
      registers: [registry],
      collect() {
        this.set(monthToDate().totalCost);
      },
    });
    new Gauge({
      name: 'fleetwise_month_team_cost_dollars',
      help: "Each team's jobs' share of the bill in the current UTC month so far, $",
      labelNames: ['team'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const t of monthToDate().byTeam) this.set({ team: t.id }, t.cost);
      },
    });
  }
  const readWorkAtRisk = service.workAtRisk?.bind(service);
  if (readWorkAtRisk !== undefined) {
    // Both gauges from one read of the store per scrape (a read held over to the next scrape would show old figures).
    const workAtRisk = oncePerScrape(readWorkAtRisk);
    new Gauge({
      name: 'fleetwise_work_at_risk_seconds',
      help: "Running tasks' work since their newest checkpoint (or their run's start), summed, by the market of their instances: what losing those instances now would redo",
      labelNames: ['market'] as const,
      registers: [registry],
      collect() {
        for (const m of workAtRisk()) this.set({ market: m.market }, m.totalSeconds);
      },
    });
    new Gauge({
      name: 'fleetwise_work_at_risk_max_seconds',
      help: 'The most work any one running task would redo if its instance were lost now, by market',
      labelNames: ['market'] as const,
      registers: [registry],
      collect() {
        for (const m of workAtRisk()) this.set({ market: m.market }, m.maxSeconds);
      },
    });
  }
  new Gauge({
    name: 'fleetwise_last_round_timestamp_seconds',
    help: 'When the latest recorded round ran (store clock; 0 before the first round)',
    registers: [registry],
    collect() {
      this.set(service.store.latestRound()?.atSeconds ?? 0);
    },
  });
  return registry;
}

/**
 * `read` at most once per scrape: a registry collects every gauge in one synchronous pass (prom-client calls each
 * `collect` before awaiting any), so the first call's figures serve the rest of that pass and are dropped after it.
 */
function oncePerScrape<T>(read: () => T): () => T {
  let held: { readonly value: T } | undefined;
  return () => {
    if (held === undefined) {
      held = { value: read() };
      queueMicrotask(() => (held = undefined));
    }
    return held.value;
  };
}

/** One registry for /metrics: the scrape-time gauges plus the controller's counters. */
export function metricsRegistry(service: ApiControllerService, metrics: ControllerMetrics): Registry {
  return Registry.merge([storeGaugeRegistry(service), metrics.registry]);
}
