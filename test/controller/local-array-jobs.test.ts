import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { runCli } from '../helpers/built-cli.js';
import { oneLocalController, until } from '../helpers/local-controller.js';

/**
 * Array jobs through a real local controller and the CLI: `fleetwise submit --array N` (or a spec's
 * `arrayProperties.size`) submits N jobs that run alike but for their index, which each task reads from
 * FLEETWISE_ARRAY_INDEX (and AWS_BATCH_JOB_ARRAY_INDEX); `--chain` after an array waits for all of it; the listing and
 * the job view name each job with its index; a bad size is refused before anything is submitted.
 */
const local = oneLocalController('fleetwise-arrays-');

function specFile(name: string, command: string, extra: readonly string[] = []): string {
  const file = join(local.scratch, `${name}.yaml`);
  writeFileSync(
    file,
    [
      `name: ${name}`,
      'team: research',
      ...extra,
      'tasks:',
      '  - name: main',
      `    command: [sh, -c, '${command}']`,
      '    demand: { any: [0, 0.25, 1] }',
      '',
    ].join('\n'),
  );
  return file;
}

interface SubmitLine {
  readonly id: string;
  readonly name: string;
  readonly state: string;
  readonly waitingFor: readonly string[];
  readonly array?: { readonly index: number; readonly size: number };
}

/** `submit --json`'s lines, one per job. */
function submitLines(stdout: string): SubmitLine[] {
  return stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as SubmitLine);
}

it('runs each job of an array with its index, lists them by index, and chains a step after the whole array', async () => {
  const controller = await local.start();
  const job = async (
    id: string,
  ): Promise<{ state: string; finishedAtSeconds?: number; startedAtSeconds?: number }> =>
    (await controller.api('GET', `/v1/jobs/${id}`)).json as {
      state: string;
      finishedAtSeconds?: number;
      startedAtSeconds?: number;
    };
  const succeeded = (id: string): Promise<{ finishedAtSeconds?: number; startedAtSeconds?: number }> =>
    until(
      `${id} to succeed`,
      async () => {
        const j = await job(id);
        if (j.state === 'failed' || j.state === 'cancelled') throw new Error(`${id} ended ${j.state}`);
        return j.state === 'succeeded' ? j : undefined;
      },
      90_000,
      controller.diagnostics,
    );

  // --array 3: three lines, one per job, each with its index.
  const point = specFile(
    'point',
    'echo "point $FLEETWISE_ARRAY_INDEX of $FLEETWISE_ARRAY_SIZE (Batch index $AWS_BATCH_JOB_ARRAY_INDEX)"',
  );
  const submitted = await runCli(['submit', point, '--array', '3', '--json'], controller.env);
  expect(submitted.code, submitted.stderr).toBe(0);
  const lines = submitLines(submitted.stdout);
  expect(lines.map((l) => [l.name, l.state, l.array])).toEqual([
    ['point', 'queued', { index: 0, size: 3 }],
    ['point', 'queued', { index: 1, size: 3 }],
    ['point', 'queued', { index: 2, size: 3 }],
  ]);
  const ids = lines.map((l) => l.id);
  for (const [index, id] of ids.entries()) {
    await succeeded(id);
    const logs = await runCli(['logs', id], controller.env);
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toContain(`point ${index} of 3 (Batch index ${index})`);
  }
  // The listing makes the array one row; --expand lists each job.
  const listing = await runCli(['jobs'], controller.env);
  expect(listing.code, listing.stderr).toBe(0);
  expect(listing.stdout).toMatch(
    new RegExp(
      `^${ids[0]}…${ids[2]} +point\\[0–2\\] +research +3 succeeded +- +0 +\\$[\\d.]+ +\\S+ \\S+ +- +-$`,
      'm',
    ),
  );
  const expanded = await runCli(['jobs', '--expand'], controller.env);
  for (const [index, id] of ids.entries())
    expect(expanded.stdout).toMatch(new RegExp(`^${id} +point\\[${index}\\] +research +succeeded`, 'm'));
  const view = await runCli(['job', ids[2] as string], controller.env);
  expect(view.stdout).toMatch(new RegExp(`^job {8}${ids[2]} \\(point\\[2\\], of an array of 3\\)$`, 'm'));

  // A pipeline: a sweep of two (its spec's arrayProperties), then a step that waits for both.
  const gate = join(local.scratch, 'sweep-may-end');
  const sweep = specFile('sweep', `while [ ! -e ${gate} ]; do sleep 0.2; done`, [
    'arrayProperties: { size: 2 }',
  ]);
  const gather = specFile('gather', 'echo gathered');
  const chained = await runCli(['submit', sweep, gather, '--chain'], controller.env);
  expect(chained.code, chained.stderr).toBe(0);
  const [sweepLine, gatherLine] = chained.stdout.trim().split('\n');
  const sweepIds = /^submitted (job-\d+) … (job-\d+), an array of 2 \(sweep, team research\): queued$/.exec(
    sweepLine as string,
  );
  expect(sweepIds, sweepLine).not.toBeNull();
  const [, firstSweep, lastSweep] = sweepIds as RegExpExecArray;
  const gatherId = new RegExp(
    `^submitted (job-\\d+) \\(gather, team research\\): queued, waiting for ${firstSweep}, ${lastSweep}$`,
  ).exec(gatherLine as string)?.[1];
  expect(gatherId, gatherLine).toBeDefined();
  writeFileSync(gate, '');
  const gathered = await succeeded(gatherId as string);
  for (const id of [firstSweep, lastSweep] as string[])
    expect(gathered.startedAtSeconds as number).toBeGreaterThanOrEqual(
      (await succeeded(id)).finishedAtSeconds as number,
    );

  // --per-index: each job of the second array waits only for the job of its index in the first (Batch's N_TO_N):
  // step-b[0] runs while step-a[1] still does.
  const aGate = join(local.scratch, 'step-a-1-may-end');
  const stepA = specFile(
    'step-a',
    `if [ "$FLEETWISE_ARRAY_INDEX" = 1 ]; then while [ ! -e ${aGate} ]; do sleep 0.2; done; fi`,
  );
  const stepB = specFile('step-b', 'echo "b $FLEETWISE_ARRAY_INDEX"');
  const piped = await runCli(
    ['submit', stepA, stepB, '--chain', '--per-index', '--array', '2'],
    controller.env,
  );
  expect(piped.code, piped.stderr).toBe(0);
  const [aLine, bLine] = piped.stdout.trim().split('\n');
  const [, a0, a1] =
    /^submitted (job-\d+) … (job-\d+), an array of 2 \(step-a, team research\): queued$/.exec(
      aLine as string,
    ) ?? [aLine];
  const [, b0, b1] = new RegExp(
    `^submitted (job-\\d+) … (job-\\d+), an array of 2 \\(step-b, team research\\): queued, each waiting for the job of its index in ${a0} … ${a1}$`,
  ).exec(bLine as string) ?? [bLine];
  expect(b1, bLine).toBeDefined();
  await succeeded(b0 as string);
  expect(['queued', 'starting', 'running']).toContain((await job(a1 as string)).state);
  expect((await job(b1 as string)).state).toBe('queued');
  writeFileSync(aGate, '');
  const b1Done = await succeeded(b1 as string);
  expect(b1Done.startedAtSeconds as number).toBeGreaterThanOrEqual(
    (await succeeded(a1 as string)).finishedAtSeconds as number,
  );
  // A SEQUENTIAL file made an array by --array: each job waits for the one before it, and says so.
  const inTurn = specFile('in-turn', 'true', ['dependsOn: [{ type: SEQUENTIAL }]']);
  const turns = submitLines(
    (await runCli(['submit', inTurn, '--array', '2', '--json'], controller.env)).stdout,
  );
  expect(turns.map((l) => l.waitingFor)).toEqual([[], [turns[0]?.id]]);
  // A step after an array waits for all of it: more than a job may wait for is refused before anything is sent.
  const big = specFile('big', 'true', ['arrayProperties: { size: 10000 }']);
  const afterBig = specFile('after-big', 'true', [`dependsOn: [${ids[0]}]`]);
  for (const [args, says] of [
    [[stepA, stepB, '--per-index', '--array', '2'], 'goes with --chain'],
    [[stepA, gather, '--chain', '--per-index'], `${stepA} is not an array`],
    [[big, afterBig, '--chain'], `${afterBig} would wait for 10001 jobs (all 10000 of the array before it)`],
  ] as const) {
    const refused = await runCli(['submit', ...args], controller.env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(says);
  }

  // `cancel --array` with any one of its ids cancels the whole array; a job submitted alone with an index is not an
  // array, nor is a job without one.
  const hold = specFile('hold', 'sleep 600', ['arrayProperties: { size: 3 }']);
  const held = await runCli(['submit', hold, '--json'], controller.env);
  expect(held.code, held.stderr).toBe(0);
  const heldIds = submitLines(held.stdout).map((l) => l.id);
  const cancelled = await runCli(['cancel', heldIds[1] as string, '--array'], controller.env);
  expect(cancelled.code, cancelled.stderr).toBe(0);
  expect(cancelled.stdout.trim().split('\n')).toEqual(heldIds.map((id) => `${id} (hold): cancelled`));
  const again = await runCli(['cancel', heldIds[0] as string, '--array'], controller.env);
  expect(again.stdout).toBe('no jobs to cancel: every job of the array has ended\n');
  const lone = specFile('lone', 'sleep 600', ['arrayProperties: { size: 3, index: 1 }']);
  const loneLine = await runCli(['submit', lone, '--json'], controller.env);
  const loneId = (JSON.parse(loneLine.stdout) as SubmitLine).id;
  const notArray = await runCli(['cancel', loneId, '--array'], controller.env);
  expect(notArray.code).not.toBe(0);
  expect(notArray.stderr).toContain(`${loneId} says it is index 1 of an array of 3, but`);
  expect((await job(loneId)).state).not.toBe('cancelled');
  const plain = await runCli(['cancel', gatherId as string, '--array'], controller.env);
  expect(plain.code).not.toBe(0);
  expect(plain.stderr).toContain(`${gatherId} (gather) is not a job of an array`);
  // Every id is checked before any array is cancelled: one of no array among them cancels none.
  const hold2 = specFile('hold2', 'sleep 600', ['arrayProperties: { size: 2 }']);
  const held2 = submitLines((await runCli(['submit', hold2, '--json'], controller.env)).stdout).map(
    (l) => l.id,
  );
  const mixed = await runCli(['cancel', held2[0] as string, gatherId as string, '--array'], controller.env);
  expect(mixed.code).toBe(2);
  for (const id of held2) expect((await job(id)).state).not.toBe('cancelled');
  expect((await runCli(['cancel', held2[1] as string, '--array'], controller.env)).code).toBe(0);
  expect((await runCli(['cancel', loneId], controller.env)).code).toBe(0);

  // The sweep example (each job counts to 100 × (index + 1)), shortened: its steps at 0.01 s.
  const example = readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'sweep.yaml'), 'utf8');
  const shortened = example
    .replace('context: ../counter', `context: ${join(PROJECT_ROOT, 'examples', 'counter')}`)
    .replace("STEP_SECONDS: '0.2'", "STEP_SECONDS: '0.01'");
  // Every override must land, so a change to the example fails here instead of giving the test minutes-long jobs.
  expect(shortened).toContain("STEP_SECONDS: '0.01'");
  expect(shortened).not.toContain('context: ../counter');
  const sweepFile = join(local.scratch, 'sweep-example.yaml');
  writeFileSync(sweepFile, shortened);
  const swept = await runCli(['submit', sweepFile, '--json'], controller.env);
  expect(swept.code, swept.stderr).toBe(0);
  const sweepJobs = submitLines(swept.stdout).map((l) => l.id);
  expect(sweepJobs).toHaveLength(4);
  for (const [index, id] of sweepJobs.entries()) {
    await succeeded(id);
    const logs = (await runCli(['logs', id], controller.env)).stdout;
    expect(logs).toContain(`sweep point ${index} of 4`);
    expect(logs).toContain(`finished ${100 * (index + 1)}`);
  }

  // A dry run says what the array would be; a size the spec would refuse is refused before anything is sent.
  const dry = await runCli(['submit', point, '--array', '4', '--dry-run'], controller.env);
  expect(dry.code, dry.stderr).toBe(0);
  expect(dry.stdout).toMatch(
    /^array {6}4 jobs, alike but for FLEETWISE_ARRAY_INDEX 0–3; the cost and ETA below/m,
  );
  const before = ((await controller.api('GET', '/v1/jobs')).json as { jobs: unknown[] }).jobs.length;
  for (const bad of ['1', 'many', '10001']) {
    const refused = await runCli(['submit', point, '--array', bad], controller.env);
    expect(refused.code, bad).toBe(2);
    expect(refused.stderr).toContain('--array');
  }
  expect(((await controller.api('GET', '/v1/jobs')).json as { jobs: unknown[] }).jobs).toHaveLength(before);
  // About thirty CLI processes against a local controller running real tasks: 40–50 s alone, more beside other files.
}, 180_000);
