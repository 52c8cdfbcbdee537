import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { formatTime } from '../../src/cli/table.js';
import { runCli } from '../helpers/built-cli.js';
import { oneLocalController, until } from '../helpers/local-controller.js';

/**
 * Job dependencies through a real local controller and the CLI: `fleetwise submit --depends-on` holds a job until the
 * one it names has succeeded (`fleetwise job` says what it waits for), then runs it; naming an unknown job is refused
 * before anything is submitted; a job whose dependency is cancelled fails, saying which.
 */
const local = oneLocalController('fleetwise-dependencies-');

function specFile(name: string, command: string, expectedDurationSeconds?: number): string {
  const file = join(local.scratch, `${name}.yaml`);
  writeFileSync(
    file,
    [
      `name: ${name}`,
      'team: research',
      ...(expectedDurationSeconds === undefined
        ? []
        : [`expectedDurationSeconds: ${expectedDurationSeconds}`]),
      'tasks:',
      '  - name: main',
      `    command: [sh, -c, "${command}"]`,
      '    demand: { any: [0, 0.25, 1] }',
      '',
    ].join('\n'),
  );
  return file;
}

interface JobAnswer {
  readonly id: string;
  readonly state: string;
  readonly reason?: string;
  readonly startedAtSeconds?: number;
  readonly eta?: { readonly completionSeconds: number | null; readonly computedAtSeconds: number } | null;
  readonly startsNoEarlierThanSeconds?: number | null;
  readonly finishedAtSeconds?: number;
}

it('runs a job after the one it depends on has succeeded, shows when a dependency is predicted to end, and fails one whose dependency was cancelled', async () => {
  const controller = await local.start();
  const submit = async (args: string[]): Promise<string> => {
    const result = await runCli(['submit', ...args, '--json'], controller.env);
    expect(result.code, result.stderr).toBe(0);
    return (JSON.parse(result.stdout) as { id: string }).id;
  };
  const job = async (id: string): Promise<JobAnswer> =>
    (await controller.api('GET', `/v1/jobs/${id}`)).json as JobAnswer;

  // The first job runs until the test has seen the second one wait (a job of a given length, 4 s, once ended before
  // the view was read on a loaded host).
  const gate = join(local.scratch, 'first-may-end');
  const first = await submit([specFile('first', `while [ ! -e ${gate} ]; do sleep 0.2; done`)]);
  const second = await submit([specFile('second', 'echo second'), '--depends-on', first]);
  await until(
    `${first} running`,
    async () => ((await job(first)).state === 'running' ? true : undefined),
    60_000,
    controller.diagnostics,
  );
  // It waits, and says for what.
  const view = await runCli(['job', second], controller.env);
  expect(view.code, view.stderr).toBe(0);
  expect(view.stdout).toMatch(new RegExp(`^depends on ${first} \\(running\\)$`, 'm'));
  expect(view.stdout).toMatch(new RegExp(`^waiting {4}for ${first} to succeed`, 'm'));
  expect((await job(second)).state).toBe('queued');
  const listing = await runCli(['jobs'], controller.env);
  expect(listing.stdout).toMatch(new RegExp(`^${second} .* after ${first} `, 'm'));
  writeFileSync(gate, '');

  const done = await until(
    `${second} to succeed`,
    async () => {
      const j = await job(second);
      return j.state === 'succeeded' ? j : undefined;
    },
    90_000,
    controller.diagnostics,
  );
  const firstDone = await job(first);
  expect(firstDone.state).toBe('succeeded');
  expect(done.startedAtSeconds as number).toBeGreaterThanOrEqual(firstDone.finishedAtSeconds as number);

  // An unknown job is refused by the controller, naming it; nothing is submitted.
  const refused = await runCli(
    ['submit', specFile('orphan', 'true'), '--depends-on', 'job-99'],
    controller.env,
  );
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toContain('dependsOn: no job job-99 of team research');
  const dry = await runCli(
    ['submit', specFile('orphan', 'true'), '--depends-on', 'job-99', '--dry-run'],
    controller.env,
  );
  expect(dry.code).not.toBe(0);
  expect(dry.stderr).toContain('dependsOn: no job job-99 of team research');
  const notAnId = await runCli(['submit', specFile('typo', 'true'), '--depends-on', 'first'], controller.env);
  expect(notAnId.code).toBe(2);
  expect(notAnId.stderr).toContain('--depends-on');

  // A dependency with a prediction: the waiting job's view says when it ends, and so the earliest the job can start.
  const blocker = await submit([specFile('blocker', 'sleep 600', 600)]);
  const blocked = await submit([specFile('blocked', 'true'), '--depends-on', blocker]);
  // Once it runs and has been predicted since it started, its prediction stands (nothing else changes meanwhile).
  const predicted = await until(
    `a prediction for ${blocker} once it runs`,
    async () => {
      const j = await job(blocker);
      const started = j.startedAtSeconds;
      return j.state === 'running' && started !== undefined && (j.eta?.computedAtSeconds ?? 0) >= started
        ? (j.eta?.completionSeconds ?? undefined)
        : undefined;
    },
    60_000,
    controller.diagnostics,
  );
  const blockedView = await runCli(['job', blocked], controller.env);
  expect(blockedView.code, blockedView.stderr).toBe(0);
  const at = formatTime(predicted);
  expect(blockedView.stdout).toMatch(
    new RegExp(`^depends on ${blocker} \\((queued|starting|running), predicted to end ${at}\\)$`, 'm'),
  );
  expect(blockedView.stdout).toMatch(
    new RegExp(
      `^waiting {4}for ${blocker} to succeed \\(no prediction of its own until then; it starts no earlier than ${at}\\)$`,
      'm',
    ),
  );
  expect((await job(blocked)).startsNoEarlierThanSeconds).toBe(predicted);
  // A dry run of a job that would wait for it says so, with the same bound, not the ETA of a job free to start now.
  const nextSpec = specFile('next', 'true', 60);
  const heldDryRun = await runCli(['submit', nextSpec, '--depends-on', blocker, '--dry-run'], controller.env);
  expect(heldDryRun.code, heldDryRun.stderr).toBe(0);
  expect(heldDryRun.stdout).toMatch(
    new RegExp(
      `^eta {8}- \\(held until ${blocker} has succeeded: no prediction until then; it would start no earlier than ${at}\\)$`,
      'm',
    ),
  );
  const heldDryRunJson = await runCli(
    ['submit', nextSpec, '--depends-on', blocker, '--dry-run', '--json'],
    controller.env,
  );
  expect(JSON.parse(heldDryRunJson.stdout)).toMatchObject({
    eta: null,
    waitingFor: [blocker],
    startsNoEarlierThanSeconds: predicted,
  });

  // A cancelled dependency fails the job that waits for it.
  const cancel = await runCli(['cancel', blocker], controller.env);
  expect(cancel.code, cancel.stderr).toBe(0);
  const failed = await until(
    `${blocked} to fail`,
    async () => {
      const j = await job(blocked);
      return j.state === 'queued' ? undefined : j;
    },
    60_000,
    controller.diagnostics,
  );
  expect(failed).toMatchObject({
    state: 'failed',
    reason: `dependency ${blocker} ended cancelled: this job can never start`,
  });
  expect(failed.startedAtSeconds).toBeUndefined();
}, 200_000);
