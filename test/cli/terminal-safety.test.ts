import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { terminalSafe } from '../../src/cli/terminal-text.js';
import { ADMIN_TOKEN, FakeControllerService } from '../controller/api-fake-service.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { bareEnv } from '../helpers/local-controller.js';

/**
 * What the CLI prints of the controller's answers on a terminal, as users run it (a subprocess) against an API server
 * over a real socket: a failure's reason is a task's last output, so it may hold escape sequences that clear the
 * screen or rewrite what it says; names may too. They are shown as visible `\xNN`, never as the bytes a terminal acts
 * on. `--json` keeps the text as it is (JSON escapes it), and `fleetwise logs` prints a task's bytes unchanged.
 */

/** What a task could print last: clear the screen, red "job succeeded", retitle the window, return to column 0. */
const HOSTILE = '\x1b[2J\x1b[31mFAKE: job succeeded\x1b]0;owned\x07\rover\x9b2J';

class LoggingFake extends FakeControllerService {
  async jobLogs(): Promise<string> {
    return `==> run-1 <==\n${HOSTILE}\n`;
  }
}

let server: ApiServer;
let service: LoggingFake;
let jobId = '';

const spec = (name: string): JobSpec => ({
  name,
  team: 'vision',
  tasks: [
    {
      name: 'main',
      image: 'busybox',
      env: {},
      demand: { any: [0, 1, 1] },
      replicas: 1,
      shmSizeGiB: 1,
      workload: 'busybox',
    },
  ],
  checkpoint: { signal: 'SIGTERM', timeoutSeconds: 60 },
  queue: {},
});

beforeAll(async () => {
  ensureBuiltCli();
  service = new LoggingFake();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  jobId = service.submit(spec('named\x1b[8m'), 'vision').id;
  service.store.setJobState(jobId, 'starting');
  service.store.setJobState(jobId, 'running');
  service.store.setJobState(jobId, 'failed', `task main failed; last output: ${HOSTILE}`);
}, 240_000);
afterAll(() => server?.close());

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...bareEnv(), FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN_TOKEN });
}

/** No C0 control character but a line break, no DEL and no C1 one. */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

describe('text from the controller on a terminal (CLI subprocess)', { timeout: 60_000 }, () => {
  it('job, wait and jobs show a reason and a name with escape sequences as visible text', async () => {
    const shown = '\\x1b[2J\\x1b[31mFAKE: job succeeded\\x1b]0;owned\\x07\\x0dover\\x9b2J';
    const cases: [readonly string[], readonly string[]][] = [
      [
        ['job', jobId],
        [`job        ${jobId} (named\\x1b[8m)`, shown],
      ],
      [['wait', jobId], [`${jobId} (named\\x1b[8m): failed (task main failed; last output: ${shown})`]],
      [['jobs', '--all'], ['named\\x1b[8m']],
    ];
    for (const [args, expected] of cases) {
      const result = await cli(args);
      expect(result.stdout, args.join(' ')).not.toMatch(CONTROL);
      expect(result.stderr, args.join(' ')).not.toMatch(CONTROL);
      for (const text of expected) expect(result.stdout, args.join(' ')).toContain(text);
    }
  });

  it('--json keeps the text as the controller gave it; logs prints the bytes unchanged', async () => {
    const json = await cli(['job', jobId, '--json']);
    expect(json.stdout).not.toContain('\x1b');
    expect((JSON.parse(json.stdout) as { reason: string }).reason).toBe(
      `task main failed; last output: ${HOSTILE}`,
    );
    const logs = await cli(['logs', jobId]);
    expect(logs.stdout).toBe(`==> run-1 <==\n${HOSTILE}\n`);
  });

  it('terminalSafe keeps line breaks and tabs, and shows every other control character as \\xNN', () => {
    expect(terminalSafe('a\tb\nc\x00\x1b\x7f\x85é…')).toBe('a\tb\nc\\x00\\x1b\\x7f\\x85é…');
  });
});
