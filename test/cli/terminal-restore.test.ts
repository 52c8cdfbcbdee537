import { spawn, spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';

/**
 * Progress bars hide the cursor (ESC[?25l) and turn off line wrapping (ESC[?7l) while they are drawn; Ctrl-C must
 * give both back (ESC[?25h, ESC[?7h) and end the command with 130, as the shell expects. The built CLI runs under
 * a pseudo-terminal made by script(1), and Ctrl-C is typed into it, so the terminal driver sends SIGINT.
 */

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const WRAP_ON = '\x1b[?7h';

const hasScript = spawnSync('script', ['--version']).status === 0;

/** Run `args` on a terminal, type Ctrl-C as soon as the bars are drawn; the exit code and all the terminal saw. */
function interruptedOnTerminal(args: readonly string[]): Promise<{ code: number | null; output: string }> {
  const command = ['exec', process.execPath, CLI, ...args].join(' ');
  // -e: script exits with the command's code; -f: output flushed as written.
  const child = spawn('script', ['-qfec', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  let output = '';
  let typed = false;
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (!typed && output.includes(HIDE_CURSOR)) {
      typed = true;
      child.stdin.write('\x03');
    }
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, output })));
}

/** What the terminal is left with: everything after the bars were last hidden/drawn. */
function afterLastHide(output: string): string {
  return output.slice(output.lastIndexOf(HIDE_CURSOR));
}

// A run of many seconds: still going when Ctrl-C arrives, well under a second after the bars appear.
const LONG = ['--format', 'alibaba', '--jobs', '3000'];

describe('Ctrl-C during progress bars on a terminal', () => {
  beforeAll(() => {
    // No silent skip: without script(1) (Debian's bsdutils) there is no terminal to test on.
    if (!hasScript) throw new Error('script(1) is missing: apt-get install bsdutils');
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  }, 180_000);

  it('simulate restores the cursor and line wrapping and exits 130', async () => {
    const { code, output } = await interruptedOnTerminal([
      'simulate',
      ...LONG,
      '--scheduler',
      'eva,no-packing',
    ]);
    expect(output).toContain(HIDE_CURSOR);
    const after = afterLastHide(output);
    expect(after).toContain(SHOW_CURSOR);
    expect(after).toContain(WRAP_ON);
    expect(code).toBe(130);
    // Stopped, not run to the end: no summary table.
    expect(output).not.toContain('no-packing      ');
  }, 30_000);

  it("tune's batch bar restores them too", async () => {
    const { code, output } = await interruptedOnTerminal([
      'tune',
      ...LONG,
      '--samples',
      '3',
      '--cap-instances',
      '3',
    ]);
    expect(output).toContain(HIDE_CURSOR);
    const after = afterLastHide(output);
    expect(after).toContain(SHOW_CURSOR);
    expect(after).toContain(WRAP_ON);
    expect(code).toBe(130);
  }, 30_000);
});
