/**
 * What the long benchmarks (`bench controller`, `bench costs`, `bench arms`) share about their own process: progress
 * lines on stderr that cannot fail the benchmark, and the signals that stop it.
 */

/** The signals a benchmark stops on in order, ending what it started: Ctrl-C, `timeout`, a terminal that hung up. */
export const BENCH_STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Call `stop` on each of `BENCH_STOP_SIGNALS`; returns the function that stops listening. */
export function onBenchStopSignals(stop: (signal: NodeJS.Signals) => void): () => void {
  for (const signal of BENCH_STOP_SIGNALS) process.on(signal, stop);
  return () => {
    for (const signal of BENCH_STOP_SIGNALS) process.off(signal, stop);
  };
}

/** Errors on stderr are ignored: there is nowhere left to tell them, and the benchmark has its own work to finish. */
function ignoreStderrError(): void {}

/**
 * From now on a write to stderr that fails (EPIPE once the reader of `2>&1 | head` has gone, EIO once a terminal hung
 * up) is ignored: it would otherwise be an uncaught error that ends the benchmark at once, before it has stopped its
 * processes and removed its temporary state.
 */
export function ignoreStderrErrors(): void {
  if (!process.stderr.listeners('error').includes(ignoreStderrError))
    process.stderr.on('error', ignoreStderrError);
}

/** `bench <name> [12.3 s]: message` on stderr, the seconds counted from this call; a failed write is ignored. */
export function benchProgress(name: string): (message: string) => void {
  ignoreStderrErrors();
  const started = performance.now();
  return (message) => {
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    process.stderr.write(`${name} [${seconds} s]: ${message}\n`);
  };
}
