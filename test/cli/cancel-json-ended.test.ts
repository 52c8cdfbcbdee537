import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import {
  bareEnv,
  LOCAL_ADMIN_TOKEN,
  oneLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * `cancel ID… --json` prints each job as it stands after its cancel, as the text lines do: one it cancelled as
 * cancelled, one that had already ended in the state it ended in, so a script tells them apart by `state`; its help
 * says so rather than calling them all cancelled. The built CLI in a subprocess against a real local controller
 * (process executor).
 */

const controller = oneLocalController('fleetwise-cancel-json-');
let ctl: StartedController;

beforeAll(async () => {
  ensureBuiltCli();
  ctl = await controller.start();
}, 240_000);

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...bareEnv(), FLEETWISE_SERVER: ctl.url, FLEETWISE_TOKEN: LOCAL_ADMIN_TOKEN });
}

/** A job of one task running `command`, submitted through the API; its id. */
async function submit(name: string, command: readonly string[]): Promise<string> {
  const answer = await ctl.api('POST', '/v1/jobs', {
    name,
    team: 'examples',
    tasks: [{ name: 'main', command, demand: { any: [0, 0.25, 0.5] } }],
  });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

async function stateOf(id: string): Promise<string> {
  return ((await ctl.api('GET', `/v1/jobs/${id}`)).json as { state: string }).state;
}

describe('cancel --json of jobs some of which had already ended', () => {
  it('lists each job as it stands: the cancelled one cancelled, the ended one as it ended', async () => {
    const done = await submit('done', ['true']);
    const sleeper = await submit('sleeper', ['sleep', '600']);
    await until(
      `${done} to succeed`,
      async () => ((await stateOf(done)) === 'succeeded' ? true : undefined),
      60_000,
      () => ctl.diagnostics(),
    );

    const result = await cli(['cancel', sleeper, done, '--json']);
    expect(result.code, result.stderr).toBe(0);
    const printed = (JSON.parse(result.stdout) as { id: string; name: string; state: string }[]).map((j) => ({
      id: j.id,
      name: j.name,
      state: j.state,
    }));
    expect(printed).toEqual([
      { id: sleeper, name: 'sleeper', state: 'cancelled' },
      { id: done, name: 'done', state: 'succeeded' },
    ]);
    // The text mode words them alike, each in its state; a second cancel changes neither.
    const text = await cli(['cancel', done, sleeper]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toBe(`${done} (done): succeeded\n${sleeper} (sleeper): cancelled\n`);
  }, 120_000);

  it("the help says what --json's array holds", async () => {
    const help = await cli(['cancel', '--help']);
    expect(help.code).toBe(0);
    const oneLine = help.stdout.replace(/\s+/g, ' ');
    expect(oneLine).toContain(
      '--json print the jobs as they stand after the cancel as a JSON array (one already ended keeps the state it ' +
        'ended in; --array: only the jobs it cancelled)',
    );
    expect(oneLine).not.toContain('print the cancelled jobs');
  });
});
