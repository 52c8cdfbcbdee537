import cliProgress from 'cli-progress';
import { stopOnSignal } from './terminal-restore.js';
import { formatDuration, WorkEstimate } from './work-estimate.js';

/** Progress of a batch of equally sized simulation runs (tune's candidates, bench arms' runs). */
export interface BatchProgress {
  /** Run `index` has simulated `fraction` (0–1) of its trace. */
  advance(index: number, fraction: number): void;
  /** Run `index` finished; `label` names it in a log. */
  done(index: number, label: string): void;
  stop(): void;
}

/** How often a log (not a terminal) hears that the batch is still working while no run finishes. */
const QUIET_LINE_SECONDS = 30;

/**
 * Progress on stderr (stdout stays clean) with the time elapsed and an estimate of the time left, from every run's
 * share simulated: a bar on a terminal; otherwise a line per finished run, and a line every QUIET_LINE_SECONDS while
 * none finishes, so a long batch does not look stuck in a log. `prefix` starts each log line (`tune:`), `noun`
 * names the runs (`candidates`).
 */
export function batchProgress(total: number, prefix: string, noun: string): BatchProgress {
  const estimate = new WorkEstimate(total, Date.now());
  if (process.stderr.isTTY !== true) {
    let lastLine = Date.now();
    const line = (text: string): void => {
      lastLine = Date.now();
      process.stderr.write(`${prefix}: ${text}\n`);
    };
    const timer = setInterval(() => {
      if (Date.now() - lastLine >= QUIET_LINE_SECONDS * 1000) line(estimate.describe(Date.now(), noun));
    }, 1000);
    timer.unref();
    return {
      advance: (index, fraction) => estimate.progress(index, fraction),
      done: (index, label) => {
        estimate.finish(index);
        line(`${label} done; ${estimate.describe(Date.now(), noun)}`);
      },
      stop: () => clearInterval(timer),
    };
  }
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: `${noun} [{bar}] {finished}/{runs} ({percentage}%) | {elapsed} elapsed | {left}`,
      hideCursor: true,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  const STEPS = 1000;
  const payload = (): Record<string, string | number> => {
    const now = Date.now();
    const left = estimate.remainingSeconds(now);
    return {
      finished: estimate.finished,
      runs: total,
      elapsed: formatDuration(estimate.elapsedSeconds(now)),
      left: left === undefined ? 'estimating the time left' : `about ${formatDuration(left)} left`,
    };
  };
  const redraw = (): void => bar.update(Math.round(estimate.fractionDone * STEPS), payload());
  // Before start, which hides the cursor: a signal between the two would leave it hidden.
  const releaseSignals = stopOnSignal(() => bar.stop());
  bar.start(STEPS, 0, payload());
  // Elapsed time keeps moving between progress reports.
  const timer = setInterval(redraw, 1000);
  timer.unref();
  return {
    advance: (index, fraction) => {
      estimate.progress(index, fraction);
      redraw();
    },
    done: (index) => {
      estimate.finish(index);
      redraw();
    },
    stop: () => {
      releaseSignals();
      clearInterval(timer);
      bar.stop();
    },
  };
}
