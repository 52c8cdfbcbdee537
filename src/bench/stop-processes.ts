import type { ChildProcess } from 'node:child_process';

/**
 * Stop child processes as a benchmark ends or is stopped: SIGTERM each one still running (a controller writes its
 * CPU profile, a run exits), SIGKILL it if it has not exited within `graceMs`, and resolve once all have exited.
 */
export async function stopProcesses(children: Iterable<ChildProcess>, graceMs: number): Promise<void> {
  await Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) {
            done();
            return;
          }
          const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
          child.once('exit', () => {
            clearTimeout(kill);
            done();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}
