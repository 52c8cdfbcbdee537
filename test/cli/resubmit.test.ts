import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import {
  catalog,
  CPU_SMALL,
  jobSpec,
  rig,
  RUNS_ON,
  ScriptedExits,
  type Rig,
} from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise resubmit` as users run it (a subprocess) against a real controller's API over a socket: a failed step of
 * a pipeline and the step that never started because of it run again, the second waiting for the new first; the
 * jobs of an array that did not succeed run again, each with its index; a job not ended, a kept dependency that
 * failed, and what is not a job id are refused, with nothing submitted.
 */

const ADMIN = 'admin-token-cli-resubmit-0123456789abcdef';

let r: Rig;
let server: ApiServer;

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN });
}

/** Rounds until every named job has ended (each round polls the tasks' scripted exits). */
async function untilEnded(ids: readonly string[]): Promise<void> {
  for (let round = 0; round < 20; round++) {
    if (
      ids.every((id) =>
        ['succeeded', 'failed', 'cancelled', 'unsuccessful'].includes(r.store.getJob(id)?.state ?? ''),
      )
    )
      return;
    r.clock.advance(30);
    await r.controller.runRound(`round ${round}`);
  }
  throw new Error(`not ended: ${ids.map((id) => `${id} ${r.store.getJob(id)?.state}`).join(', ')}`);
}

const jobCount = (): number => r.store.listJobs().length;

/** An array of `size` small jobs of team research, submitted to the controller directly. */
function submitArray(name: string, size: number): void {
  const spec = {
    name,
    team: 'research',
    tasks: [{ name: 'main', image: 'busybox:latest', demand: CPU_SMALL }],
    arrayProperties: { size },
  };
  r.controller.submitArray(validateJobSpec(spec, name, catalog), 'research');
}

beforeAll(async () => {
  ensureBuiltCli();
  // job-1 (prepare) fails, so job-2 (train), which waits for it, fails without starting; job-3 (serve) keeps running;
  // of the array job-4 … job-7, indexes 1 and 3 fail.
  const control = new ScriptedExits(
    new Map([
      ['job-1.0', [3]],
      ['job-3.0', [RUNS_ON]],
      ['job-4.0', [0]],
      ['job-5.0', [3]],
      ['job-6.0', [0]],
      ['job-7.0', [137]],
      ['job-8.0', [0]],
      ['job-10.0', [0]],
      ['job-13.0', [0]],
      ['job-14.0', [0]],
    ]),
  );
  r = rig({}, { tasks: control });
  control.store = r.store;
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  const prepare = r.controller.submit(jobSpec('prepare', CPU_SMALL), 'research');
  r.controller.submit({ ...jobSpec('train', CPU_SMALL), dependsOn: [prepare.id] }, 'research');
  r.controller.submit(jobSpec('serve', CPU_SMALL), 'research');
  submitArray('sweep', 4);
  // collect (job-8 … job-11): job i waits for sweep's job i, so indexes 1 and 3 fail without starting.
  const collect = await fetch(`${server.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'collect',
      team: 'research',
      tasks: [{ name: 'main', image: 'busybox:latest', demand: CPU_SMALL }],
      arrayProperties: { size: 4 },
      dependsOn: [{ jobId: 'job-4', type: 'N_TO_N' }],
    }),
  });
  expect(collect.status, await collect.clone().text()).toBe(201);
  // gather (job-12) waits for all of sweep, so it fails without starting.
  r.controller.submit(
    { ...jobSpec('gather', CPU_SMALL), dependsOn: ['job-4', 'job-5', 'job-6', 'job-7'] },
    'research',
  );
  // tidy (job-13, job-14): an array whose jobs all succeed.
  submitArray('tidy', 2);
  await untilEnded(['job-1', 'job-2', ...[4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14].map((n) => `job-${n}`)]);
}, 240_000);

afterAll(async () => {
  await server?.close();
});

it('runs a failed step and the step it kept from starting again, the second waiting for the new first', async () => {
  expect([r.store.getJob('job-1')?.state, r.store.getJob('job-2')?.state]).toEqual(['failed', 'failed']);
  const before = jobCount();
  // Named in any order: submitted in the order the jobs were.
  const result = await cli(['resubmit', 'job-2', 'job-1']);
  expect(result.code, result.stderr).toBe(0);
  const first = `job-${before + 1}`;
  const second = `job-${before + 2}`;
  expect(result.stdout).toBe(
    `job-1 (prepare, failed) → ${first}: queued\njob-2 (train, failed) → ${second}: queued\n`,
  );
  const old = r.store.getJob('job-2')?.spec;
  expect(r.store.getJob(first)?.spec).toEqual(r.store.getJob('job-1')?.spec);
  expect(r.store.getJob(second)?.spec).toEqual({ ...old, dependsOn: [first] });
  // Run again (a second try after a lost answer, or by mistake), it answers the reruns it made: nothing runs twice.
  const again = await cli(['resubmit', 'job-1', 'job-2']);
  expect(again.code, again.stderr).toBe(0);
  expect(again.stdout).toBe(
    `job-1 (prepare, failed) → ${first}: queued (resubmitted before)\n` +
      `job-2 (train, failed) → ${second}: queued (resubmitted before)\n`,
  );
  expect(jobCount()).toBe(before + 2);

  // The reruns end without succeeding (the first cancelled, so the second can never start): run once more, the
  // command reruns them in their turn, the new step waiting for the new first.
  r.controller.cancel(first);
  await untilEnded([second]);
  const third = await cli(['resubmit', 'job-1', 'job-2']);
  expect(third.code, third.stderr).toBe(0);
  const [newFirst, newSecond] = [`job-${before + 3}`, `job-${before + 4}`];
  expect(third.stdout).toBe(
    `job-1 (prepare, failed) → ${newFirst}: queued (its earlier rerun ${first} ended without succeeding)\n` +
      `job-2 (train, failed) → ${newSecond}: queued\n`,
  );
  expect(r.store.getJob(newSecond)?.spec.dependsOn).toEqual([newFirst]);
  expect(jobCount()).toBe(before + 4);
});

it('refuses a job that waits for one not run again with it, naming it, and a job not ended; nothing submitted', async () => {
  const before = jobCount();
  // Checked before anything is sent: with job-1 first in the order, job-1 would otherwise go and job-2 be refused.
  const kept = await cli(['resubmit', 'job-2', 'job-12']);
  expect(kept.code).toBe(2);
  expect(kept.stderr).toContain(
    'job-2 waits for job-1, which ended without succeeding and is not resubmitted with it: name it too to run it again first',
  );
  expect(kept.stderr).toContain(
    'job-12 waits for job-5, job-7, which ended without succeeding and are not resubmitted with it',
  );
  const running = await cli(['resubmit', 'job-3', 'job-1']);
  expect(running.code).toBe(2);
  expect(running.stderr).toContain(
    'job-3 (serve) is running: it runs again once it has ended (or cancel it first)',
  );
  const notId = await cli(['resubmit', 'prepare']);
  expect(notId.code).toBe(2);
  expect(notId.stderr).toContain('"prepare": not a job id (job-<n>)');
  expect(jobCount()).toBe(before);
});

it('runs the jobs of arrays that did not succeed again, each with its index, the next step waiting for the new ones', async () => {
  expect([4, 5, 6, 7, 8, 9, 10, 11].map((n) => r.store.getJob(`job-${n}`)?.state)).toEqual([
    'succeeded',
    'failed',
    'succeeded',
    'failed',
    'succeeded',
    'failed',
    'succeeded',
    'failed',
  ]);
  const before = jobCount();
  // Two ids of one array name it once; an id of no array is that job.
  const result = await cli(['resubmit', 'job-4', 'job-10', 'job-6', 'job-12', '--array', '--json']);
  expect(result.code, result.stderr).toBe(0);
  const lines = result.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { from: string; id: string; array?: unknown });
  const next = (k: number): string => `job-${before + k}`;
  expect(lines.map((l) => [l.from, l.id, l.array])).toEqual([
    ['job-5', next(1), { index: 1, size: 4 }],
    ['job-7', next(2), { index: 3, size: 4 }],
    ['job-9', next(3), { index: 1, size: 4 }],
    ['job-11', next(4), { index: 3, size: 4 }],
    ['job-12', next(5), undefined],
  ]);
  // gather waits for the new sweep[1] and sweep[3], and still for the sweep jobs that succeeded.
  expect(r.store.getJob(next(5))?.spec.dependsOn).toEqual(['job-4', next(1), 'job-6', next(2)]);
  expect(r.store.getJob(next(2))?.spec.tasks).toEqual(r.store.getJob('job-7')?.spec.tasks);
  expect(r.store.getJob(next(2))?.spec.arrayProperties).toEqual({ size: 4, index: 3 });
  // collect[1] waited for sweep[1] (N_TO_N): its new job waits for sweep[1]'s new one.
  expect(r.store.getJob('job-9')?.spec.dependsOn).toEqual(['job-5']);
  expect(r.store.getJob(next(3))?.spec.dependsOn).toEqual([next(1)]);
  expect(r.store.getJob(next(4))?.spec.dependsOn).toEqual([next(2)]);

  // The same command again reruns nothing more: each job's rerun is the one made above.
  const again = await cli(['resubmit', 'job-4', 'job-10', 'job-6', 'job-12', '--array', '--json']);
  expect(again.code, again.stderr).toBe(0);
  expect(
    again.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { from: string; id: string; replayed?: boolean })
      .map((l) => [l.from, l.id, l.replayed]),
  ).toEqual(lines.map((l) => [l.from, l.id, true]));

  // A job run again is a job of its own, with its index: not an array to take whole.
  const lone = await cli(['resubmit', next(1), '--array']);
  expect(lone.code).toBe(1);
  expect(lone.stderr).toContain(
    `${next(1)} says it is index 1 of an array of 4, but ${next(0)} … ${next(3)} are not that array`,
  );
  expect(jobCount()).toBe(before + 5);

  // An array whose every job succeeded has nothing to run again: --json prints nothing, on stderr neither; text says
  // so on stderr.
  const none = await cli(['resubmit', 'job-13', '--array', '--json']);
  expect(none.code, none.stderr).toBe(0);
  expect(none.stdout).toBe('');
  expect(none.stderr).toBe('');
  const noneText = await cli(['resubmit', 'job-13', '--array']);
  expect(noneText.code, noneText.stderr).toBe(0);
  expect(noneText.stdout).toBe('');
  expect(noneText.stderr).toBe('nothing to resubmit: no job of these arrays ended without succeeding\n');
  expect(jobCount()).toBe(before + 5);
});
