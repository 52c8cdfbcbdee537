/**
 * Progress bars hide the cursor and turn off line wrapping until they stop. A signal ends the process without
 * running `finally` blocks, so without this the shell is left with no cursor and no wrapping after Ctrl-C.
 */

/** The shell's convention: 128 + the signal's number. */
const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;

/**
 * Until the returned function is called, SIGINT and SIGTERM run `stop` (which restores the terminal) and exit with
 * 130 or 143, as the signal's default action would have ended the process.
 */
export function stopOnSignal(stop: () => void): () => void {
  const handlers = (Object.keys(SIGNAL_EXIT_CODES) as (keyof typeof SIGNAL_EXIT_CODES)[]).map((signal) => {
    const handler = (): void => {
      stop();
      process.exit(SIGNAL_EXIT_CODES[signal]);
    };
    process.once(signal, handler);
    return [signal, handler] as const;
  });
  return () => {
    for (const [signal, handler] of handlers) process.removeListener(signal, handler);
  };
}
