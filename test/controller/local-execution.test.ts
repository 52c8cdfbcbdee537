import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/built-cli.js';
import { describeWithDocker } from '../helpers/dockerd.js';
import {
  killLocalLeftovers,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * What a job's image becomes without Docker, through the real API and CLI of a local controller: under the process
 * executor an image with a command is accepted with a warning (in the submission answer, `fleetwise submit`'s output
 * and the job view) and its command runs on the host; a command alone is a valid job; an image without a command is
 * refused at submission, naming the task. Under Docker a command alone is refused.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-local-exec-'));
const stateDirs: string[] = [];
const controllers: StartedController[] = [];

afterAll(async () => {
  for (const c of controllers) {
    c.process.kill('SIGTERM');
    await c.exited;
  }
  for (const dir of stateDirs) killLocalLeftovers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

async function start(
  name: string,
  executor: 'process' | 'docker',
  env: Record<string, string> = {},
): Promise<StartedController> {
  const stateDir = join(scratch, name);
  stateDirs.push(stateDir);
  const ctl = await startLocalController(stateDir, { executor, env });
  controllers.push(ctl);
  return ctl;
}

const task = (fields: Record<string, unknown>): Record<string, unknown> => ({
  name: 'main',
  demand: { any: [0, 0.25, 1.5] },
  ...fields,
});
const job = (name: string, fields: Record<string, unknown>): Record<string, unknown> => ({
  name,
  team: 'examples',
  tasks: [task(fields)],
});

interface Answer {
  id: string;
  state: string;
  warnings: string[];
}

async function succeeded(ctl: StartedController, id: string): Promise<string> {
  await until(
    `${id} to succeed`,
    async () => ((await ctl.api('GET', `/v1/jobs/${id}`)).json as Answer).state === 'succeeded' || undefined,
    60_000,
    ctl.diagnostics,
  );
  return (await ctl.api('GET', `/v1/jobs/${id}/logs`)).text;
}

describe.concurrent('task execution without Docker', () => {
  it('process executor: an image is ignored with a warning, its command runs on the host; a command alone runs', async () => {
    const ctl = await start('process', 'process');
    expect(ctl.stdout()).toMatch(/a task's image is not used, its command runs on this host/);

    const imaged = await ctl.api(
      'POST',
      '/v1/jobs',
      job('imaged', { image: 'python:3.12-slim', command: ['sh', '-c', 'echo ran-on-the-host'] }),
    );
    expect(imaged.status, imaged.text).toBe(201);
    const answer = imaged.json as Answer;
    expect(answer.warnings).toEqual([
      'task main: no Docker engine (process executor): image python:3.12-slim is ignored and ' +
        "`sh -c echo ran-on-the-host` runs directly on this host (its programs, not the image's), " +
        'without isolation or resource limits',
    ]);
    // The job view says so too, in the API and in `fleetwise job`.
    expect(((await ctl.api('GET', `/v1/jobs/${answer.id}`)).json as Answer).warnings).toEqual(
      answer.warnings,
    );
    const view = await runCli(['job', answer.id], ctl.env);
    expect(view.code, view.stderr).toBe(0);
    expect(view.stdout).toMatch(
      /^warning {4}task main: no Docker engine \(process executor\): image python:3\.12-slim is ignored/m,
    );
    expect(await succeeded(ctl, answer.id)).toMatch(/ran-on-the-host/);

    // A command alone: a valid process-executor job, no warning.
    const bare = await ctl.api(
      'POST',
      '/v1/jobs',
      job('bare', { command: ['sh', '-c', 'echo just-a-command'] }),
    );
    expect(bare.status, bare.text).toBe(201);
    expect((bare.json as Answer).warnings).toEqual([]);
    expect(await succeeded(ctl, (bare.json as Answer).id)).toMatch(/just-a-command/);

    // What can never run here is refused at submission, naming the task.
    const refused = await ctl.api('POST', '/v1/jobs', job('no-command', { image: 'python:3.12-slim' }));
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/tasks\.0: image python:3\.12-slim without a command cannot run here/);
  }, 120_000);

  it('process executor: fleetwise submit prints the warning (and --json carries it); a refusal names the task', async () => {
    const ctl = await start('process-cli', 'process');
    const spec = join(scratch, 'imaged.yaml');
    writeFileSync(
      spec,
      [
        'name: imaged',
        'team: examples',
        'tasks:',
        '  - image: python:3.12-slim',
        '    command: [python3, -c, "print(1)"]',
        '    demand: { any: [0, 0.25, 1.5] }',
        '',
      ].join('\n'),
    );
    const text = await runCli(['submit', spec], ctl.env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^submitted job-\d+ \(imaged, team examples\)/);
    expect(text.stderr).toMatch(
      /^warning: job-\d+: task task-0: no Docker engine \(process executor\): image python:3\.12-slim is ignored and `python3 -c print\(1\)` runs directly on this host/m,
    );
    const json = await runCli(['submit', spec, '--json'], ctl.env);
    expect(json.code, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as Answer).warnings[0]).toMatch(/image python:3\.12-slim is ignored/);
    // A dry run is told what the submission was.
    const dry = await runCli(['submit', spec, '--dry-run'], ctl.env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/is valid; dry run, nothing submitted/);
    expect(dry.stderr).toMatch(
      /^warning: .*imaged\.yaml: task task-0: no Docker engine \(process executor\): image python:3\.12-slim is ignored/m,
    );
    const dryJson = await runCli(['submit', spec, '--dry-run', '--json'], ctl.env);
    expect((JSON.parse(dryJson.stdout) as Answer).warnings[0]).toMatch(/image python:3\.12-slim is ignored/);

    const noCommand = join(scratch, 'no-command.yaml');
    writeFileSync(
      noCommand,
      [
        'name: no-command',
        'team: examples',
        'tasks:',
        '  - image: python:3.12-slim',
        '    demand: [0, 0.25, 1.5]',
        '',
      ].join('\n'),
    );
    // Refused by the controller, dry run or not: invalid input (exit 2), not a failure to reach it.
    for (const args of [
      ['submit', noCommand],
      ['submit', noCommand, '--dry-run'],
    ]) {
      const refused = await runCli(args, ctl.env);
      expect(refused.code, args.join(' ')).toBe(2);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toMatch(/tasks\.0: image python:3\.12-slim without a command cannot run here/);
    }
  }, 120_000);
});

describeWithDocker('task execution under Docker', (engine) => {
  it('docker executor: a command alone (no image or build) is refused at submission', async () => {
    // The controller asked for Docker by name checks an engine answers before it starts.
    const ctl = await start('docker', 'docker', { DOCKER_HOST: engine.host });
    for (const path of ['/v1/jobs', '/v1/jobs?dryRun=true']) {
      const refused = await ctl.api('POST', path, job('bare', { command: ['sh', '-c', 'echo hi'] }));
      expect(refused.status, path).toBe(400);
      expect(refused.text).toMatch(
        /tasks\.0: a command alone \(no image or build\) runs only under the process executor/,
      );
    }
    expect(ctl.instances()).toEqual([]);
  }, 60_000);
});
