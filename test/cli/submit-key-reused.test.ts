import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LineCounter, parseDocument } from 'yaml';
import { registerSubmit } from '../../src/cli/commands/submit.js';
import { withLines } from '../../src/cli/spec-lines.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { lineOf } from '../../src/controller/job-spec/problems.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  VISION_TOKEN,
  type FakeControllerService,
} from '../controller/api-fake-service.js';

/**
 * A submission's problems get the line of their field in the spec file, and only a field of the file gets one: the
 * refusal of an idempotency key used before for another spec (a request header, not a field) is said once, with no
 * line, by `fleetwise submit` in-process against a real API server on a socket.
 */

let server: ApiServer;
let service: FakeControllerService;
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-key-reused-'));

beforeAll(async () => {
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
});

afterAll(async () => {
  await server.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** Run `fleetwise submit …`: the error it ended with, if any. */
async function submit(args: readonly string[]): Promise<Error | undefined> {
  const program = new Command('fleetwise').exitOverride();
  registerSubmit(program);
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
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
    return undefined;
  } catch (e) {
    return e as Error;
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

function specFile(name: string): string {
  const file = join(scratch, `${name}.yaml`);
  writeFileSync(file, `name: ${name}\ntasks:\n  - name: main\n    image: busybox\n    demand: [0, 1, 1]\n`);
  return file;
}

describe('the line of a problem in a spec file', () => {
  const text = 'name: sweep\ntasks:\n  - name: main\n    image: busybox\n';
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter });
  const lineAt = (path: readonly (string | number)[]) => lineOf(doc, counter, path);

  it('is the line of the field, or of its deepest ancestor in the file when it is missing', () => {
    expect(lineAt(['tasks', 0, 'image'])).toBe(4);
    expect(lineAt(['tasks', 0, 'demand'])).toBe(3);
    expect(lineAt([])).toBe(1);
  });

  it('is none for a top-level name the file does not have: line 1 would point at another field', () => {
    expect(lineAt(['idempotency-key'])).toBeUndefined();
    expect(lineAt(['team'])).toBeUndefined();
    expect(withLines(['idempotency-key: used before', 'tasks.0.image: bad'], lineAt)).toEqual([
      'idempotency-key: used before',
      'tasks.0.image: bad (line 4)',
    ]);
  });
});

describe('fleetwise submit with an idempotency key used before for another spec', () => {
  it('says so once, naming the key, with no line of the file', async () => {
    expect(await submit([specFile('first'), '--idempotency-key', 'nightly-7'])).toBeUndefined();
    const jobs = service.store.listJobs().length;
    const error = await submit([specFile('second'), '--idempotency-key', 'nightly-7']);
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    expect(message).toContain('the idempotency key "nightly-7" was used for another submission');
    expect(message.split('used for another submission')).toHaveLength(2);
    expect(message).not.toMatch(/\(line \d+\)/);
    expect(service.store.listJobs()).toHaveLength(jobs);
  });
});
