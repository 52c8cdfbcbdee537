import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { registerSubmit } from '../../src/cli/commands/submit.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ValidationError } from '../../src/core/validation.js';
import { DEFAULT_CONTEXT_LIMITS } from '../../src/protocol/context-limits.js';
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
/** The same controller taking uploads of at most SMALL_UPLOAD bytes. */
let smallUploads: ApiServer;
const SMALL_UPLOAD = 16 * 1024;
let service: FakeControllerService;
let workDir = '';

beforeAll(async () => {
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  smallUploads = await startApiServer(service, {
    listen: '127.0.0.1:0',
    adminToken: ADMIN_TOKEN,
    contextLimits: () => ({ ...DEFAULT_CONTEXT_LIMITS, maxArchiveBytes: SMALL_UPLOAD }),
  });
  workDir = mkdtempSync(join(tmpdir(), 'fleetwise-submit-'));
  const ctx = join(workDir, 'ctx');
  mkdirSync(ctx);
  writeFileSync(join(ctx, 'Dockerfile.gpu'), 'FROM busybox\nLABEL flavour=gpu\n');
  writeFileSync(join(ctx, 'Dockerfile.cpu'), 'FROM busybox\nLABEL flavour=cpu\n');
  writeFileSync(join(ctx, 'app.py'), 'print(1)\n');
});

afterAll(async () => {
  await server.close();
  await smallUploads.close();
  rmSync(workDir, { recursive: true, force: true });
});

/** Run `fleetwise submit …` as the CLI would, capturing stdout; the error it ends with, if any. */
async function submit(
  args: readonly string[],
  url = server.url,
): Promise<{ stdout: string; error: Error | undefined }> {
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
      url,
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

describe('fleetwise submit: every build context before any file', () => {
  /** A context of its own in the work directory, with a Dockerfile and `files`. */
  function context(name: string | Buffer, files: Readonly<Record<string, string | Buffer>> = {}): string {
    const dir = Buffer.concat([Buffer.from(`${workDir}/`), Buffer.from(name)]);
    mkdirSync(dir);
    writeFileSync(Buffer.concat([dir, Buffer.from('/Dockerfile')]), 'FROM busybox\n');
    for (const [file, content] of Object.entries(files))
      writeFileSync(Buffer.concat([dir, Buffer.from(`/${file}`)]), content);
    return dir.toString();
  }

  it('submits none when a later file has a context the controller refuses, that does not pack, or is gone', async () => {
    const ok = specFile('ok.yaml', '{ context: ./ctx, dockerfile: Dockerfile.cpu }');
    context('large', { 'noise.bin': randomBytes(4 * SMALL_UPLOAD) });
    const large = specFile('large.yaml', './large');
    const unpackable = context('unpackable');
    writeFileSync(Buffer.concat([Buffer.from(`${unpackable}/`), Buffer.from('caf\xe9.txt', 'latin1')]), 'x');
    const badName = specFile('bad-name.yaml', './unpackable');
    const gone = specFile('gone.yaml', `contexts/${'0'.repeat(64)}.tar.gz`);
    const jobs = service.store.listJobs().length;

    // Over the controller's upload limit (413): refused while the files are checked, naming the file and task once.
    const tooLarge = await submit([ok, large], smallUploads.url);
    expect(tooLarge.error?.message).toMatch(
      new RegExp(
        `^${large}: tasks\\.0\\.build\\.context: uploading build context ${join(workDir, 'large')}: ` +
          'POST /v1/contexts: the controller answered 413: the build context archive is larger than its limit',
      ),
    );
    // A name that is not UTF-8: refused before anything is uploaded, by the dry run too.
    const uploads = service.contexts.size;
    for (const dryRun of [[], ['--dry-run']]) {
      const { error } = await submit([ok, badName, ...dryRun]);
      expect(error, dryRun.join()).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe(badName);
      expect((error as ValidationError).problems).toEqual([
        `tasks.0.build.context: build context ${unpackable} has caf\\xe9.txt, whose name is not valid UTF-8: ` +
          'archive names are UTF-8, so it cannot be packed as it is (rename it, or leave it out with .dockerignore)',
      ]);
    }
    expect(service.contexts.size).toBe(uploads);
    // A reference to an upload that is not stored: its dry run refuses it.
    const { error } = await submit([ok, gone]);
    expect(error?.message).toMatch(
      new RegExp(
        `^${gone}: POST /v1/jobs: the controller answered 400: .*\\n  - tasks\\.0\\.build\\.context: `,
      ),
    );
    expect(error?.message).toContain('is not a stored build context (line 4)');
    expect(service.store.listJobs()).toHaveLength(jobs);
    // Left out, the name does not stop the context; both files are submitted.
    writeFileSync(join(unpackable, '.dockerignore'), '*.txt\n');
    const both = await submit([ok, badName, '--json']);
    expect(both.error).toBeUndefined();
    expect(service.store.listJobs()).toHaveLength(jobs + 2);
  });

  it('uploads the contexts of a dry run, which the controller checks, and submits nothing', async () => {
    context('dry', { 'app.py': 'print(2)\n' });
    const jobs = service.store.listJobs().length;
    const uploads = service.contexts.size;
    const { stdout, error } = await submit([specFile('dry.yaml', './dry'), '--dry-run']);
    expect(error).toBeUndefined();
    expect(stdout).toContain('is valid; dry run, nothing submitted');
    expect(service.contexts.size).toBe(uploads + 1);
    expect(service.store.listJobs()).toHaveLength(jobs);
  });

  it('takes a context directory that is a symlink to one', async () => {
    context('real', { 'app.py': 'print(3)\n' });
    symlinkSync(join(workDir, 'real'), join(workDir, 'linked'));
    const { stdout, error } = await submit([specFile('linked.yaml', './linked'), '--json']);
    expect(error).toBeUndefined();
    const { id } = JSON.parse(stdout) as { id: string };
    expect(service.store.getJob(id)?.spec.tasks[0]?.build?.context).toMatch(
      /^contexts\/[0-9a-f]{64}\.tar\.gz$/,
    );
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
