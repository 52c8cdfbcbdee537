import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * A zombie: `sh` starts a short child, then becomes `sleep`, which never waits for it, so the child stays a zombie
 * until the sleeper ends. Returns the zombie's pid once /proc shows it as one, and the sleeper to kill afterwards.
 */
export async function makeZombie(): Promise<{ readonly pid: number; readonly parent: ChildProcess }> {
  const parent = spawn('sh', ['-c', 'sleep 0.1 & echo $!; exec sleep 60'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const pid = await new Promise<number>((resolve, reject) => {
    parent.stdout?.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    parent.once('error', reject);
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (/\) Z /.test(stat)) return { pid, parent };
    if (Date.now() > deadline) throw new Error(`pid ${pid} never became a zombie: ${stat}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
