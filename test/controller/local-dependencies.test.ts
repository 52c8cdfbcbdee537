import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { formatTime } from '../../src/cli/table.js';
import { runCli } from '../helpers/built-cli.js';
import { oneLocalController, until } from '../helpers/local-controller.js';

/**
 * Job dependencies through a real local controller and the CLI: `fleetwise submit --depends-on` holds a job until the
 * one it names has succeeded (`fleetwise job` says what it waits for), then runs it; a held job is predicted to start
 * after its dependency's predicted end; `submit --chain` makes a pipeline of its files; naming an unknown job is
 * refused before anything is submitted; a job whose dependency is cancelled fails, saying which.
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
  readonly eta?: {
    readonly startSeconds: number | null;
    readonly completionSeconds: number | null;
    readonly computedAtSeconds: number;
    readonly basis: string;
  } | null;
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
  // Named twice, it is waited for once.
  const second = await submit([specFile('second', 'echo second'), '--depends-on', `${first},${first}`]);
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

  // A dependency with a prediction: the waiting job is predicted held until then (its own ETA starts after the
  // dependency's predicted end), and its view says when the dependency ends, and so the earliest the job can start.
  const blocker = await submit([specFile('blocker', 'sleep 600', 600)]);
  const blockedLine = await runCli(
    ['submit', specFile('blocked', 'true', 30), '--depends-on', blocker, '--json'],
    controller.env,
  );
  expect(blockedLine.code, blockedLine.stderr).toBe(0);
  const blockedAnswer = JSON.parse(blockedLine.stdout) as { id: string; waitingFor: string[] };
  expect(blockedAnswer.waitingFor).toEqual([blocker]);
  const blocked = blockedAnswer.id;
  // Once the blocker runs and both were predicted together since it started, the prediction stands (nothing else
  // changes meanwhile).
  const [blockerEta, blockedEta] = await until(
    `a prediction of ${blocker} and ${blocked} once ${blocker} runs`,
    async () => {
      const [a, b] = [await job(blocker), await job(blocked)];
      const started = a.startedAtSeconds;
      return a.state === 'running' &&
        started !== undefined &&
        a.eta !== undefined &&
        a.eta !== null &&
        a.eta.computedAtSeconds >= started &&
        b.eta?.computedAtSeconds === a.eta.computedAtSeconds
        ? ([a.eta, b.eta] as const)
        : undefined;
    },
    60_000,
    controller.diagnostics,
  );
  const predicted = blockerEta.completionSeconds as number;
  expect(predicted).toBeGreaterThan(blockerEta.computedAtSeconds + 500);
  expect(blockedEta.startSeconds as number).toBeGreaterThanOrEqual(predicted);
  expect(blockedEta.completionSeconds as number).toBeGreaterThanOrEqual(
    (blockedEta.startSeconds as number) + 30,
  );
  expect(blockedEta.basis).toContain(`held until ${blocker} succeeds`);
  const blockedView = await runCli(['job', blocked], controller.env);
  expect(blockedView.code, blockedView.stderr).toBe(0);
  const at = formatTime(predicted);
  expect(blockedView.stdout).toMatch(
    new RegExp(`^depends on ${blocker} \\((queued|starting|running), predicted to end ${at}\\)$`, 'm'),
  );
  expect(blockedView.stdout).toMatch(
    new RegExp(
      `^waiting {4}for ${blocker} to succeed \\(by its prediction it starts no earlier than ${at}\\)$`,
      'm',
    ),
  );
  expect((await job(blocked)).startsNoEarlierThanSeconds).toBe(predicted);
  // The jobs table shows its ETA like any other's.
  const table = await runCli(['jobs'], controller.env);
  expect(table.stdout).toMatch(
    new RegExp(`^${blocked} .* after ${blocker} +${formatTime(blockedEta.completionSeconds as number)}`, 'm'),
  );
  // A dry run of a job that would wait for it is predicted held as well, and names the bound.
  const nextSpec = specFile('next', 'true', 60);
  const heldDryRun = await runCli(['submit', nextSpec, '--depends-on', blocker, '--dry-run'], controller.env);
  expect(heldDryRun.code, heldDryRun.stderr).toBe(0);
  expect(heldDryRun.stdout).toMatch(
    new RegExp(
      `^held {7}until ${blocker} has succeeded: by its prediction it would start no earlier than ${at}$`,
      'm',
    ),
  );
  expect(heldDryRun.stdout).toMatch(new RegExp(`^eta {8}.*\\(.*held until ${blocker} succeeds`, 'm'));
  const heldDryRunJson = await runCli(
    ['submit', nextSpec, '--depends-on', blocker, '--dry-run', '--json'],
    controller.env,
  );
  const dryView = JSON.parse(heldDryRunJson.stdout) as {
    eta: { startSeconds: number; completionSeconds: number };
  };
  expect(dryView).toMatchObject({ waitingFor: [blocker], startsNoEarlierThanSeconds: predicted });
  // Predicted afresh, a few seconds on: the blocker's end moves by no more than the clock's.
  expect(dryView.eta.startSeconds).toBeGreaterThanOrEqual(predicted - 10);
  expect(dryView.eta.completionSeconds).toBeGreaterThanOrEqual(dryView.eta.startSeconds + 60);

  // A pipeline in one command: each file waits for the one before it.
  const chained = await runCli(
    ['submit', specFile('extract', 'true'), specFile('load', 'true'), specFile('index', 'true'), '--chain'],
    controller.env,
  );
  expect(chained.code, chained.stderr).toBe(0);
  const steps = [...chained.stdout.matchAll(/^submitted (job-\d+) \((\w+), team research\): (.*)$/gm)].map(
    (m) => ({
      id: m[1] as string,
      name: m[2],
      rest: m[3],
    }),
  );
  expect(steps.map((step) => step.name)).toEqual(['extract', 'load', 'index']);
  expect(steps[1]?.rest).toBe(`queued, waiting for ${steps[0]?.id}`);
  expect(steps[2]?.rest).toBe(`queued, waiting for ${steps[1]?.id}`);
  const dependencies = async (id: string) =>
    (
      (await controller.api('GET', `/v1/jobs/${id}`)).json as { dependencies: { id: string }[] }
    ).dependencies.map((d) => d.id);
  expect(await dependencies(steps[0]?.id as string)).toEqual([]);
  expect(await dependencies(steps[2]?.id as string)).toEqual([steps[1]?.id]);
  const misuses: [string[], string][] = [
    [[nextSpec, nextSpec, '--chain', '--dry-run'], 'a dry run submits nothing'],
    [[nextSpec, '--chain'], 'a pipeline needs at least two files'],
  ];
  for (const [args, problem] of misuses) {
    const refused = await runCli(['submit', ...args], controller.env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--chain');
    expect(refused.stderr).toContain(problem);
  }

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
