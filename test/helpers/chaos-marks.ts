/**
 * What a chaos run's tasks did, from the marks they leave: every run of a task appends `<run> start <resumedAt> <t>`
 * when it starts, `<run> <iteration> <t>` after each iteration, and `<run> finished <n> <t>` or `<run> stopped <n>
 * <t>` when it ends, `t` in centiseconds of /proc/uptime (one clock for every process on the host, the test's too).
 * `<run>` is `<task>/<attempt>/<instance>/<pid>`: one execution of the task's command.
 *
 * From the marks: whether two runs of a job ever executed at the same time, how many times a job finished, and how
 * much work each restart redid (iterations a run had reached before it could no longer save them, minus where the next
 * run resumed).
 */

export interface Run {
  readonly id: string;
  readonly instance: string;
  readonly resumedAt: number;
  readonly startCs: number;
  /** Every iteration mark, in order. */
  readonly iterations: readonly { readonly n: number; readonly cs: number }[];
  readonly end?: { readonly kind: 'finished' | 'stopped'; readonly n: number; readonly cs: number };
}

export interface JobMarks {
  readonly runs: readonly Run[];
  /** Lines that did not parse. */
  readonly malformed: number;
}

/** A worker SIGKILLed by the test: work its tasks did after this could never be saved (no agent to upload it). */
export interface WorkerKill {
  readonly instance: string;
  readonly atCs: number;
}

export interface Restart {
  readonly from: string;
  readonly to: string;
  /** The furthest iteration any earlier run reached while its work could still be saved. */
  readonly reached: number;
  readonly resumedAt: number;
  /** Iterations redone: reached − resumedAt. */
  readonly lost: number;
  /** The time the earlier run spent on them: from its mark of `resumedAt` (or its start) to its mark of `reached`. */
  readonly lostSeconds: number;
}

export interface JobAnalysis {
  readonly runs: number;
  /** Runs that finished and whose end reached the controller, or could have (see `unreportedFinishes`). */
  readonly finished: number;
  /**
   * Runs that finished where no one could report it: after the test had killed their worker (the task outlives its
   * worker, in its own process group, with no agent left to see the exit), or before the kill but with no exit record
   * in the store yet (worker/exit-record.ts: the worker stores the exit, then reports it; killed in between, it took
   * the exit with it). The controller then reschedules the task from its last checkpoint and the job's tail runs
   * again: at least once, as promised, not a second finish.
   */
  readonly unreportedFinishes: number;
  readonly lastIteration: number;
  /** Pairs of runs that executed at the same time (`a` still marking progress after `b` started). */
  readonly overlaps: readonly { readonly a: string; readonly b: string; readonly seconds: number }[];
  readonly restarts: readonly Restart[];
}

const LINE = /^(\S+) (?:(start|finished|stopped) )?(\d+) (\d+)$/;

export function parseMarks(text: string): JobMarks {
  const runs = new Map<
    string,
    {
      id: string;
      resumedAt: number;
      startCs: number;
      iterations: { n: number; cs: number }[];
      end?: Run['end'];
    }
  >();
  let malformed = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const m = LINE.exec(line.trim());
    if (m === null) {
      malformed += 1;
      continue;
    }
    const [, id = '', kind, nText = '', csText = ''] = m;
    const n = Number(nText);
    const cs = Number(csText);
    let run = runs.get(id);
    if (run === undefined) {
      // A run whose start line is missing (cut off) starts at its first mark.
      run = { id, resumedAt: kind === 'start' ? n : Math.max(0, n - 1), startCs: cs, iterations: [] };
      runs.set(id, run);
    }
    if (kind === 'start') {
      run.resumedAt = n;
      run.startCs = cs;
    } else if (kind === 'finished' || kind === 'stopped') run.end = { kind, n, cs };
    else run.iterations.push({ n, cs });
  }
  const list: Run[] = [...runs.values()]
    .map((r) => ({ ...r, instance: r.id.split('/')[2] ?? '' }))
    .sort((a, b) => a.startCs - b.startCs);
  return { runs: list, malformed };
}

function lastCs(run: Run): number {
  return Math.max(run.startCs, run.end?.cs ?? 0, run.iterations[run.iterations.length - 1]?.cs ?? 0);
}

/** The furthest iteration a run reached by `cs` (its resume point when it reached none). */
function reachedBy(run: Run, cs: number): number {
  let reached = run.resumedAt;
  for (const i of run.iterations) if (i.cs <= cs) reached = Math.max(reached, i.n);
  return reached;
}

/**
 * `unrecordedFinishes`: runs that had finished when their worker was killed, but whose exit was not in the store a
 * second after the kill (the test reads it from the store).
 */
export function analyzeJob(
  marks: JobMarks,
  kills: readonly WorkerKill[],
  unrecordedFinishes: ReadonlySet<string> = new Set(),
): JobAnalysis {
  const runs = marks.runs;
  const overlaps: { a: string; b: string; seconds: number }[] = [];
  for (let i = 0; i < runs.length; i += 1)
    for (let j = i + 1; j < runs.length; j += 1) {
      const a = runs[i] as Run;
      const b = runs[j] as Run;
      // b starts after a (sorted); they overlap when a was still marking progress once b had started.
      const seconds = (Math.min(lastCs(a), lastCs(b)) - b.startCs) / 100;
      if (seconds > 0) overlaps.push({ a: a.id, b: b.id, seconds });
    }
  // An instance has one worker, and nothing starts on it once that worker is dead: every run on it is that worker's,
  // even one whose first mark comes after the kill (the worker started the task, then died before the task's shell,
  // slow to start on a loaded host, wrote its start mark).
  const killOf = (run: Run): WorkerKill | undefined => kills.find((x) => x.instance === run.instance);
  const restarts: Restart[] = [];
  for (let k = 1; k < runs.length; k += 1) {
    const run = runs[k] as Run;
    let reached = 0;
    let lostSeconds = 0;
    for (const earlier of runs.slice(0, k)) {
      // Once its worker was killed, a run's further work could not be uploaded: count it only up to the kill.
      const kill = killOf(earlier);
      const byKill = kill === undefined ? Infinity : kill.atCs;
      const furthest = reachedBy(earlier, byKill);
      if (furthest < reached) continue;
      reached = furthest;
      const redone = earlier.iterations.filter(
        (i) => i.cs <= byKill && i.n > run.resumedAt && i.n <= furthest,
      );
      const from = earlier.iterations.find((i) => i.n === run.resumedAt)?.cs ?? earlier.startCs;
      const to = redone[redone.length - 1]?.cs;
      lostSeconds = to === undefined ? 0 : Math.max(0, to - from) / 100;
    }
    restarts.push({
      from: (runs[k - 1] as Run).id,
      to: run.id,
      reached,
      resumedAt: run.resumedAt,
      lost: Math.max(0, reached - run.resumedAt),
      lostSeconds,
    });
  }
  function unreported(r: Run): boolean {
    const kill = killOf(r);
    return (
      r.end?.kind === 'finished' &&
      kill !== undefined &&
      (r.end.cs >= kill.atCs || unrecordedFinishes.has(r.id))
    );
  }
  const all = runs.flatMap((r) => [...r.iterations.map((i) => i.n), r.end?.n ?? 0]);
  return {
    runs: runs.length,
    finished: runs.filter((r) => r.end?.kind === 'finished' && !unreported(r)).length,
    unreportedFinishes: runs.filter(unreported).length,
    lastIteration: all.length === 0 ? 0 : Math.max(...all),
    overlaps,
    restarts,
  };
}

/** One line per run, for a failure message: where it ran, where it started and ended, and when. */
export function describeRuns(marks: JobMarks): string[] {
  return marks.runs.map((r) => {
    const last = r.iterations[r.iterations.length - 1];
    const end = r.end === undefined ? 'no end mark' : `${r.end.kind} at ${r.end.n} (t ${r.end.cs / 100} s)`;
    return `${r.id}: from ${r.resumedAt} (t ${r.startCs / 100} s) to ${last?.n ?? '-'} (t ${(last?.cs ?? r.startCs) / 100} s), ${end}`;
  });
}
