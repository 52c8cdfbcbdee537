import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { registerSubmit } from '../../src/cli/commands/submit.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ValidationError } from '../../src/core/validation.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  VISION_TOKEN,
  type FakeControllerService,
} from '../controller/api-fake-service.js';

/**
 * `fleetwise submit` in-process against a real API server on a socket: what it checks of build contexts before
 * anything is uploaded, dry-run or submitted, and the env it sends.
 */

let server: ApiServer;
let service: FakeControllerService;
let workDir = '';

beforeAll(async () => {
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  workDir = mkdtempSync(join(tmpdir(), 'fleetwise-submit-'));
  const ctx = join(workDir, 'ctx');
  mkdirSync(ctx);
  writeFileSync(join(ctx, 'Dockerfile.gpu'), 'FROM busybox\nLABEL flavour=gpu\n');
  writeFileSync(join(ctx, 'Dockerfile.cpu'), 'FROM busybox\nLABEL flavour=cpu\n');
  writeFileSync(join(ctx, 'app.py'), 'print(1)\n');
});

afterAll(async () => {
  await server.close();
  rmSync(workDir, { recursive: true, force: true });
});

/** Run `fleetwise submit …` as the CLI would, capturing stdout; the error it ends with, if any. */
async function submit(args: readonly string[]): Promise<{ stdout: string; error: Error | undefined }> {
  const program = new Command('fleetwise').exitOverride();
  registerSubmit(program);
  let stdout = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  let error: Error | undefined;
  try {
    await program.parseAsync([
      'node',
      'fleetwise',
      'submit',
      ...args,
      '--server',
      server.url,
      '--token',
      VISION_TOKEN,
    ]);
  } catch (e) {
    error = e as Error;
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
  return { stdout, error };
}

function specFile(name: string, build: string, env = ''): string {
  const file = join(workDir, name);
  writeFileSync(
    file,
    `name: ${name.replace(/\.yaml$/, '')}\ntasks:\n  - name: main\n    build: ${build}\n    command: [python, app.py]\n` +
      `    demand: [0, 1, 1]\n${env}`,
  );
  return file;
}

describe('fleetwise submit: build contexts', () => {
  it('refuses a Dockerfile missing from its context before uploading, dry-running or submitting anything', async () => {
    const ok = specFile('first.yaml', '{ context: ./ctx, dockerfile: Dockerfile.gpu }');
    const typo = specFile('typo.yaml', '{ context: ./ctx, dockerfile: Dockerfil }');
    const none = specFile('none.yaml', './ctx');
    const jobs = service.store.listJobs().length;
    for (const args of [[ok, typo], ['--dry-run', typo], [none]]) {
      const { error } = await submit(args);
      expect(error, args.join(' ')).toBeInstanceOf(ValidationError);
    }
    const refused = async (file: string): Promise<readonly string[]> =>
      ((await submit([file])).error as ValidationError).problems;
    expect(await refused(typo)).toEqual([
      `tasks.0.build.dockerfile: no Dockerfile Dockerfil in build context ${join(workDir, 'ctx')} ` +
        '(it has Dockerfile.cpu, Dockerfile.gpu); the dockerfile is a path relative to the context',
    ]);
    expect(await refused(none)).toEqual([
      `tasks.0.build.context: no Dockerfile in build context ${join(workDir, 'ctx')} ` +
        '(it has Dockerfile.cpu, Dockerfile.gpu); name another with build.dockerfile',
    ]);
    // Nothing of the first file was submitted, and no context uploaded.
    expect(service.store.listJobs()).toHaveLength(jobs);
    expect(service.contexts.size).toBe(0);
  });

  it('refuses a Dockerfile outside its context while checking the spec, naming the field', async () => {
    const { error } = await submit([
      specFile('outside.yaml', '{ context: ./ctx, dockerfile: ../Dockerfile }'),
    ]);
    expect((error as ValidationError).problems).toEqual([
      expect.stringMatching(
        /^tasks\.0\.build\.dockerfile: has a `\.\.` path segment: a path inside the build/,
      ),
    ]);
    expect(service.contexts.size).toBe(0);
  });

  it('submits one context for two Dockerfiles, each task keeping its own', async () => {
    const file = join(workDir, 'two.yaml');
    writeFileSync(
      file,
      'name: two\ntasks:\n' +
        '  - { name: gpu, build: { context: ./ctx, dockerfile: Dockerfile.gpu }, command: [python, app.py], demand: [0, 1, 1] }\n' +
        '  - { name: cpu, build: { context: ./ctx, dockerfile: Dockerfile.cpu }, command: [python, app.py], demand: [0, 1, 1] }\n',
    );
    const { stdout, error } = await submit([file, '--json']);
    expect(error).toBeUndefined();
    const { id } = JSON.parse(stdout) as { id: string };
    const builds = service.store.getJob(id)?.spec.tasks.map((t) => t.build);
    expect(builds?.map((b) => b?.dockerfile)).toEqual(['Dockerfile.gpu', 'Dockerfile.cpu']);
    expect(builds?.[0]?.context).toMatch(/^contexts\/[0-9a-f]{64}\.tar\.gz$/);
    expect(builds?.[1]?.context).toBe(builds?.[0]?.context);
  });

  it('submits a spec naming a context already uploaded (as `fleetwise job ID --json` shows it) as it is', async () => {
    const first = join(workDir, 'uploaded.yaml');
    writeFileSync(
      first,
      'name: uploaded\ntasks:\n  - { name: main, build: ./ctx, command: [python, app.py], demand: [0, 1, 1] }\n' +
        'checkpoint: { everySeconds: 0 }\n',
    );
    writeFileSync(join(workDir, 'ctx', 'Dockerfile'), 'FROM busybox\n');
    const made = await submit([first, '--json']);
    expect(made.error).toBeUndefined();
    const spec = service.store.getJob((JSON.parse(made.stdout) as { id: string }).id)?.spec;
    const context = spec?.tasks[0]?.build?.context;
    expect(context).toMatch(/^contexts\/[0-9a-f]{64}\.tar\.gz$/);
    const uploads = service.contexts.size;
    const again = join(workDir, 'again.json');
    writeFileSync(again, JSON.stringify({ ...spec, name: 'again' }));
    const { stdout, error } = await submit([again, '--json']);
    expect(error).toBeUndefined();
    const { id } = JSON.parse(stdout) as { id: string };
    expect(service.store.getJob(id)?.spec.tasks[0]?.build?.context).toBe(context);
    expect(service.contexts.size).toBe(uploads); // nothing packed or uploaded again
  });
});

describe('fleetwise submit: env', () => {
  it('sends env values as the text written, not as the numbers YAML reads', async () => {
    const file = specFile(
      'env.yaml',
      '{ context: ./ctx, dockerfile: Dockerfile.cpu }',
      '    env: { VERSION: 1.10, RUN_ID: 007, EPOCHS: 10, DEBUG: true }\n',
    );
    const { stdout, error } = await submit([file, '--json']);
    expect(error).toBeUndefined();
    const { id } = JSON.parse(stdout) as { id: string };
    expect(service.store.getJob(id)?.spec.tasks[0]?.env).toEqual({
      VERSION: '1.10',
      RUN_ID: '007',
      EPOCHS: '10',
      DEBUG: 'true',
    });
  });
});
