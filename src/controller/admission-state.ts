import { z } from 'zod';
import type { Catalog } from '../core/catalog.js';
import { describeIssues } from '../core/validation.js';
import {
  Admission,
  type AdmissionSettings,
  type AdmissionState,
  type JobMemory,
} from '../queue/admission.js';
import { FIFO_CONFIG, type WfqConfig } from '../queue/wfq.js';
import type { ControllerLogger } from './seams.js';
import { isFinalJobState } from './state/lifecycle.js';
import type { JsonValue, StateStore } from './state-store.js';

/** KV key of the queue layer's state between rounds (the admission's), saved after every round. */
export const ADMISSION_STATE_KEY = 'queue.admission';

/** Bumped when the stored form changes: a state of another form is dropped, never misread. */
const STORED_VERSION = 1;

/** How many of a saved state's problems a warning names. */
const MAX_PROBLEMS_SAID = 3;

const finite = z.number().finite();

/**
 * The admission's state as the store keeps it. Left out: footprints, priced from the catalog, the caps and the spot
 * market, any of which a restart may change (the first round prices them again), and the fairness counts (live jobs
 * seen per round), which only the simulator's unfairness figure reads. So a cluster where nothing waits keeps the same
 * state round after round, and its store is not written (nor backed up) again for it.
 */
const storedAdmissionSchema = z.strictObject({
  version: z.literal(STORED_VERSION),
  jobs: z.array(
    z.strictObject({
      id: z.string().min(1),
      sizeSeconds: finite.nonnegative(),
      admittedSeconds: finite.optional(),
      cutFromPlan: z.boolean().optional(),
    }),
  ),
  shortRounds: z.array(z.tuple([z.string(), z.number().int().nonnegative()])).optional(),
  preempting: z.array(z.tuple([z.string().min(1), z.string()])),
  lag: z
    .strictObject({
      atSeconds: finite,
      classes: z.array(z.tuple([z.string(), finite, finite])),
    })
    .optional(),
});

type StoredAdmission = z.infer<typeof storedAdmissionSchema>;

/** `Admission.exportState` in the form the store keeps (plain JSON: no undefined). */
export function storedAdmissionState(state: AdmissionState): JsonValue {
  const stored: StoredAdmission = {
    version: STORED_VERSION,
    jobs: state.memory.map(([id, m]) => ({
      id,
      sizeSeconds: m.sizeSeconds,
      ...(m.admittedSeconds === undefined ? {} : { admittedSeconds: m.admittedSeconds }),
      ...(m.cutFromPlan === true ? { cutFromPlan: true } : {}),
    })),
    ...(state.shortRounds === undefined ? {} : { shortRounds: state.shortRounds.map(([c, n]) => [c, n]) }),
    preempting: state.preempting.map(([job, forClass]) => [job, forClass]),
    // With no class owed or owing (none backlogged, or one class alone, always even) every lag is 0 whenever the round
    // was: no lag at all says the same, and the text stays the same round after round.
    ...(state.lag === undefined || state.lag.classes.every(([, lag, rate]) => lag === 0 && rate === 0)
      ? {}
      : {
          lag: {
            atSeconds: state.lag.atSeconds,
            classes: state.lag.classes.map(([c, lag, rate]) => [c, lag, rate]),
          },
        }),
  };
  return stored as JsonValue;
}

export interface ReadAdmissionState {
  /** Undefined: nothing saved, or nothing readable (then `problems` says why). */
  readonly state: AdmissionState | undefined;
  /** Why the saved state, or part of it, was dropped; empty when all of it was kept. */
  readonly problems: readonly string[];
}

/**
 * A saved state (`storedAdmissionState`) checked against what the controller runs with now: one that does not parse
 * is dropped whole; of one that does, the lags, short-round counters and preemptions of classes `config` no longer
 * has are dropped (a class it adds starts at 0, as a class with no lag does), and the jobs `isLive` says have ended
 * (while no controller ran) are forgotten.
 */
export function readAdmissionState(
  saved: unknown,
  config: WfqConfig,
  isLive: (jobId: string) => boolean,
): ReadAdmissionState {
  if (saved === undefined) return { state: undefined, problems: [] };
  const parsed = storedAdmissionSchema.safeParse(saved);
  if (!parsed.success) return { state: undefined, problems: describeIssues(parsed.error) };
  const stored = parsed.data;
  const configured = new Set(config.classes.map((c) => c.id));
  const gone = new Set<string>();
  const known = (classId: string): boolean => {
    if (configured.has(classId)) return true;
    gone.add(classId);
    return false;
  };
  const memory = stored.jobs
    .filter((j) => isLive(j.id))
    .map((j): readonly [string, JobMemory] => [
      j.id,
      {
        sizeSeconds: j.sizeSeconds,
        footprint: undefined,
        admittedSeconds: j.admittedSeconds,
        liveSum: 0,
        rounds: 0,
        ...(j.cutFromPlan === true ? { cutFromPlan: true } : {}),
      },
    ]);
  const state: AdmissionState = {
    memory,
    shortRounds: stored.shortRounds?.filter(([classId]) => known(classId)),
    preempting: stored.preempting.filter(([jobId, forClassId]) => known(forClassId) && isLive(jobId)),
    ...(stored.lag === undefined
      ? {}
      : {
          lag: {
            atSeconds: stored.lag.atSeconds,
            classes: stored.lag.classes.filter(([classId]) => known(classId)),
          },
        }),
  };
  const problems =
    gone.size === 0
      ? []
      : [
          `classes no longer configured: ${[...gone].sort().join(', ')} (their lags and counters are dropped)`,
        ];
  return { state, problems };
}

/**
 * The controller's admission and its state between rounds: the classes' lags (service owed, class-lag.ts), their
 * short-round counters (preemption's hysteresis), preemptions still checkpointing and what it knows of each live job.
 * Loaded from the store when built, so a restarted controller, or a standby taking over, owes each class what the
 * last one did; saved after every round.
 */
export class AdmissionStateKeeper {
  readonly admission: Admission;
  /** The JSON text the store holds: a round that changed nothing writes nothing. */
  private saved: string | undefined;

  constructor(
    private readonly deps: {
      readonly store: StateStore;
      readonly log: ControllerLogger;
      readonly catalog: Catalog;
      readonly settings: AdmissionSettings;
      /** False: `save` writes nothing (ControllerDeps.saveSchedulerState: a store never read back). */
      readonly save: boolean;
    },
  ) {
    this.admission = this.load();
  }

  save(): void {
    if (!this.deps.save) return;
    const stored = storedAdmissionState(this.admission.exportState());
    const text = JSON.stringify(stored);
    if (text === this.saved) return;
    this.deps.store.setValue(ADMISSION_STATE_KEY, stored);
    this.saved = text;
  }

  private load(): Admission {
    const { store, log, catalog, settings } = this.deps;
    const saved = store.getValue(ADMISSION_STATE_KEY);
    this.saved = saved === undefined ? undefined : JSON.stringify(saved);
    const isLive = (jobId: string): boolean => {
      const job = store.getJob(jobId);
      return job !== undefined && !isFinalJobState(job.state);
    };
    const read = readAdmissionState(saved, settings.config ?? FIFO_CONFIG, isLive);
    if (read.problems.length > 0) {
      // A few reasons name the fault; a state of thousands of jobs could give as many.
      const why = read.problems.slice(0, MAX_PROBLEMS_SAID).join('; ');
      const more =
        read.problems.length > MAX_PROBLEMS_SAID
          ? ` and ${read.problems.length - MAX_PROBLEMS_SAID} more`
          : '';
      log.warn(
        read.state === undefined
          ? `saved queue state is unreadable (${why}${more}); every class starts with no lag`
          : `saved queue state is partly out of date (${why}); the rest is kept`,
        { key: ADMISSION_STATE_KEY, problems: read.problems.slice(0, MAX_PROBLEMS_SAID) },
      );
    }
    return read.state === undefined
      ? new Admission(catalog, settings)
      : Admission.restore(catalog, settings, read.state);
  }
}
