import type { ClusterSnapshot } from '../core/model.js';
import {
  EventHistory,
  horizonSeconds,
  type EventHistoryState,
  type LegacyEventHistoryState,
} from './decision-rule.js';

/** What JobEvents keeps between rounds, as EvaScheduler.exportState names it. */
export interface JobEventsState {
  /** A fixed-size summary of the events: the saved state does not grow with the jobs run. */
  readonly history: EventHistoryState;
  /**
   * Jobs whose arrival was counted and which have not finished. State saved before departures were told apart held
   * the jobs of the last round's snapshot here, which were counted too: it loads as it is.
   */
  readonly knownJobs: readonly string[];
}

/**
 * The events behind Eva's horizon T (§4.5, reference `update_event_arrival_times`): job arrivals and completions give
 * λ, the rounds that chose a Full Reconfiguration give p.
 *
 * A job leaves the snapshot a round plans from without finishing: admission holds it back (a cap, its class's
 * share), a preemption sends it back to the queue, a runtime leaves out a job bound for no instance. Counting its
 * return as an arrival and its absence as a completion would raise λ with every such flip and shorten T. So an
 * arrival is counted the first round a job is shown, and a completion once the runtime no longer has the job live
 * (PlanContext.liveJobIds); a runtime that does not say has absence from the snapshot taken as a completion. A
 * finished job's id is dropped, so what is kept is bounded by the live jobs.
 */
export class JobEvents {
  private constructor(
    private readonly history: EventHistory,
    /** Jobs whose arrival was counted and which have not finished. */
    private readonly known: Set<string>,
  ) {}

  static empty(): JobEvents {
    return new JobEvents(new EventHistory(), new Set());
  }

  /** Its saved state, or one saved by a version that kept every event time (`history.times`). */
  static fromJSON(
    state: Omit<JobEventsState, 'history'> & {
      readonly history: EventHistoryState | LegacyEventHistoryState;
    },
  ): JobEvents {
    return new JobEvents(EventHistory.fromJSON(state.history), new Set(state.knownJobs));
  }

  toJSON(): JobEventsState {
    return { history: this.history.toJSON(), knownJobs: [...this.known] };
  }

  /** Count this round's arrivals (at their arrival time) and completions (now, when the round first sees them). */
  track(snapshot: ClusterSnapshot, liveJobIds: readonly string[] | undefined): void {
    const events: number[] = [];
    for (const job of snapshot.jobs)
      if (!this.known.has(job.id)) {
        this.known.add(job.id);
        events.push(job.arrivalSeconds);
      }
    // A job the round shows is live whatever the runtime's list says.
    const live = new Set(snapshot.jobs.map((j) => j.id));
    for (const id of liveJobIds ?? []) live.add(id);
    for (const id of this.known)
      if (!live.has(id)) {
        this.known.delete(id);
        events.push(snapshot.nowSeconds);
      }
    this.history.addEvents(events);
  }

  recordFull(): void {
    this.history.recordFull();
  }

  get eventRatePerSecond(): number | undefined {
    return this.history.eventRatePerSecond;
  }

  get fullFraction(): number {
    return this.history.fullFraction;
  }

  /** T at `nowSeconds`; before any Full Reconfiguration, the time since the first event (the reference's bootstrap). */
  horizonSeconds(nowSeconds: number): number {
    const elapsed = nowSeconds - (this.history.firstEventSeconds ?? nowSeconds);
    return horizonSeconds(this.history.eventRatePerSecond, this.history.fullFraction, elapsed);
  }
}
