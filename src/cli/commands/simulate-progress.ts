import cliProgress from 'cli-progress';
import type { RunPoolListener } from '../../sim/run-pool.js';
import { stopOnSignal } from '../terminal-restore.js';

/** What `simulate` shows of its runs while they run; `stop` ends the display. */
export interface Progress extends RunPoolListener {
  stop(): void;
}

/** A bar per run on a terminal (stderr); otherwise one line per finished run on stderr. stdout stays clean. */
export function progressDisplay(names: readonly string[]): Progress {
  if (process.stderr.isTTY !== true) {
    return {
      onDone: (index, result) =>
        process.stderr.write(
          `${names[index] ?? index}: done in ${result.summary.wallSeconds.toFixed(1)} s\n`,
        ),
      stop: () => undefined,
    };
  }
  const width = Math.max(...names.map((n) => n.length));
  const multibar = new cliProgress.MultiBar(
    {
      stream: process.stderr,
      format: '{name} [{bar}] {percentage}% | {duration_formatted}',
      hideCursor: true,
      clearOnComplete: false,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  const bars = new Map<number, cliProgress.SingleBar>();
  const releaseSignals = stopOnSignal(() => multibar.stop());
  return {
    onStart: (index) =>
      bars.set(index, multibar.create(100, 0, { name: (names[index] ?? '').padEnd(width) })),
    onProgress: (index, fraction) => bars.get(index)?.update(Math.round(fraction * 100)),
    onDone: (index) => {
      // Stopping a finished bar freezes its elapsed time at the run's own duration.
      bars.get(index)?.update(100);
      bars.get(index)?.stop();
    },
    stop: () => {
      releaseSignals();
      multibar.stop();
    },
  };
}
