import { compareText } from '../core/compare.js';
import type { ClusterSnapshot } from '../core/model.js';
import type { LatencyView } from './latency-view.js';

/** How long a job has been slow: rounds in a row, and since when. */
interface SlowSpell {
  readonly rounds: number;
  readonly sinceSeconds: number;
}

/**
 * Which jobs Eva considers moving because their network got worse (NoMora §5.3 with the paper's own caution, research
 * digest §10.4): a latency-sensitive job whose measured P_job stayed below the threshold for `persistRounds` rounds
 * in a row. Whether it moves is then Eva's decision rule's call, like any move: the saving (its TNRP at the better
 * P_job) against the migration cost, `paybackMargin` times. A job moved, launched or not measured starts counting
 * again, which also keeps it in place for `persistRounds` rounds after a move.
 */
export class SlowJobTracker {
  private spells = new Map<string, SlowSpell>();

  /** Count this round: every running latency-sensitive job measured below `threshold` adds a round. */
  update(snapshot: ClusterSnapshot, view: LatencyView | undefined, threshold: number): void {
    const next = new Map<string, SlowSpell>();
    if (view !== undefined)
      for (const job of snapshot.jobs) {
        if (!job.reconfigurable) continue;
        const aware = view.jobs.get(job.id);
        if (aware === undefined || !aware.sensitive) continue;
        const now = view.current(job.id);
        if (now === undefined || !now.measured || now.performance >= threshold) continue;
        const spell = this.spells.get(job.id);
        next.set(job.id, {
          rounds: (spell?.rounds ?? 0) + 1,
          sinceSeconds: spell?.sinceSeconds ?? snapshot.nowSeconds,
        });
      }
    this.spells = next;
  }

  /** Seconds the job has been slow (since the first round of its spell), or undefined when it is not slow. */
  slowForSeconds(jobId: string, nowSeconds: number): number | undefined {
    const spell = this.spells.get(jobId);
    return spell === undefined ? undefined : Math.max(0, nowSeconds - spell.sinceSeconds);
  }

  /**
   * The jobs due for a move (slow for `persistRounds` rounds, not pinned), worst P_job first, at most
   * max(1, ⌈maxShare × running latency-sensitive jobs⌉) of them (NoMora's β = 0 run moved 7.1 % of tasks a round and
   * blew up; the digest caps moves at 5 %).
   */
  due(view: LatencyView, persistRounds: number, pinnedJobs: ReadonlySet<string>, maxShare: number): string[] {
    let running = 0;
    for (const job of view.jobs.values())
      if (job.sensitive && view.current(job.id) !== undefined) running += 1;
    const limit = Math.max(1, Math.ceil(maxShare * running));
    return [...this.spells.entries()]
      .filter(([id, spell]) => spell.rounds >= persistRounds && !pinnedJobs.has(id))
      .map(([id]) => ({ id, p: view.current(id)?.performance ?? 1 }))
      .sort((a, b) => a.p - b.p || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .slice(0, limit)
      .map((x) => x.id);
  }

  /** For the plan fingerprint: a round with other counts may plan otherwise. */
  signature(): string {
    return [...this.spells.entries()]
      .sort(([a], [b]) => compareText(a, b))
      .map(([id, s]) => `${id}:${s.rounds}:${s.sinceSeconds}`)
      .join(',');
  }

  /** `[job id, rounds, since]` per slow job. */
  toJSON(): [string, number, number][] {
    return [...this.spells.entries()].map(([id, s]) => [id, s.rounds, s.sinceSeconds]);
  }

  static fromJSON(data: readonly (readonly [string, number, number])[] | undefined): SlowJobTracker {
    const t = new SlowJobTracker();
    for (const [id, rounds, sinceSeconds] of data ?? []) t.spells.set(id, { rounds, sinceSeconds });
    return t;
  }
}
