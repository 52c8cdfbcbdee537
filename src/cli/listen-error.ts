/**
 * A failure to bind the API's `--listen` address as one line that says what to change: the active controller's and a
 * standby's alike.
 */
export function listenError(error: unknown, listen: string): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE')
    return new Error(
      `cannot serve the API on ${listen}: the address is in use (another controller?); choose another with --listen HOST:PORT`,
    );
  if (code === 'EACCES')
    return new Error(
      `cannot serve the API on ${listen}: permission denied (ports below 1024 need privileges); choose another with --listen HOST:PORT`,
    );
  if (code === 'EADDRNOTAVAIL')
    return new Error(
      `cannot serve the API on ${listen}: no such address on this machine; choose another with --listen HOST:PORT`,
    );
  return error instanceof Error ? error : new Error(String(error));
}
