import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { registerJob } from '../../src/cli/commands/job.js';
import { registerJobs } from '../../src/cli/commands/jobs.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import {
  NEVER_UNDER_CAPS_BASIS,
  writeQueueRecord,
  type EtaRecord,
} from '../../src/controller/queue-records.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import { ValidationError } from '../../src/core/validation.js';
import { formatTime } from '../../src/cli/table.js';
import {
  ADMIN_TOKEN,
  FakeControllerService,
  RESNET_SPEC,
  VISION_TOKEN,
} from '../controller/api-fake-service.js';

/**
 * What `fleetwise job` and `fleetwise jobs` say of jobs held for their dependencies and of arrays, in-process against a
 * real API server on a socket: a list of dependencies stays a line long however many (an array may wait for all of
 * another), an array's row says what its held jobs wait for and when its last job ends, and `--stage` takes a stage
 * number written in decimal digits only.
 */

/** A controller with predictions on (a live job without an ETA is pending) that records the stages it is told. */
class PredictingService extends FakeControllerService {
  readonly predictionsEnabled = true;
  readonly marked: { readonly jobId: string; readonly stage?: number | undefined }[] = [];

  markUnsuccessful(jobId: string, options: { readonly stage?: number; readonly reason?: string }): JobRecord {
    this.marked.push({ jobId, stage: options.stage });
    return this.store.setJobState(jobId, 'unsuccessful', 'stopped as unsuccessful');
  }
}

let server: ApiServer;
let service: PredictingService;

const SPEC: JobSpec = RESNET_SPEC;

/** Run `fleetwise …` in-process: its stdout, and the error it ended with, if any. */
async function run(args: readonly string[]): Promise<{ stdout: string; error: Error | undefined }> {
  const program = new Command('fleetwise').exitOverride();
  registerJob(program);
  registerJobs(program);
  let stdout = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  let error: Error | undefined;
  try {
    await program.parseAsync(['node', 'fleetwise', ...args, '--server', server.url, '--token', VISION_TOKEN]);
  } catch (e) {
    error = e as Error;
  } finally {
    spy.mockRestore();
  }
  return { stdout, error };
}

/** `size` jobs of an array named `name`, one after another, the job of index i waiting for `dependsOn(i)`. */
function array(name: string, size: number, dependsOn: (index: number) => string[] = () => []): string[] {
  return Array.from({ length: size }, (_, index) => {
    const waits = dependsOn(index);
    return service.submit(
      {
        ...SPEC,
        name,
        arrayProperties: { size, index },
        ...(waits.length === 0 ? {} : { dependsOn: waits }),
      },
      'vision',
    ).id;
  });
}

function succeed(id: string): void {
  for (const state of ['starting', 'running', 'succeeded'] as const) service.store.setJobState(id, state);
}

function eta(fields: Partial<EtaRecord>): EtaRecord {
  return {
    startSeconds: null,
    completionSeconds: null,
    computedAtSeconds: 1_900_000_000,
    basis: 'simulated 1 round(s) ahead',
    ...fields,
  };
}

/** The row of `fleetwise jobs` that starts with `id`, split into its columns. */
async function row(id: string): Promise<string> {
  const { stdout, error } = await run(['jobs']);
  expect(error).toBeUndefined();
  const line = stdout.split('\n').find((l) => l.startsWith(`${id} `) || l.startsWith(`${id}…`));
  if (line === undefined) throw new Error(`no row for ${id} in\n${stdout}`);
  return line;
}

beforeAll(async () => {
  service = new PredictingService();
  service.store.addTeamToken('vision', VISION_TOKEN, 'test');
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
});

afterAll(async () => {
  await server.close();
});

describe('a job waiting for many', () => {
  it('job names its dependencies summarised with their states and the last predicted end; jobs says after them', async () => {
    const upstream = Array.from(
      { length: 6 },
      (_, i) => service.submit({ ...SPEC, name: `up${i}` }, 'vision').id,
    );
    succeed(upstream[0] as string);
    writeQueueRecord(service.store, upstream[5] as string, {
      eta: eta({ completionSeconds: 1_900_000_600 }),
    });
    const held = service.submit({ ...SPEC, name: 'gather', dependsOn: upstream }, 'vision');
    const { stdout, error } = await run(['job', held.id]);
    expect(error).toBeUndefined();
    const [first, second, , , , last] = upstream;
    expect(stdout).toContain(
      `\ndepends on ${first} … ${last} (6 jobs): 5 queued, 1 succeeded; the last predicted to end ${formatTime(1_900_000_600)}\n`,
    );
    expect(stdout).toContain(`\nwaiting    for ${second} … ${last} (5 jobs) to succeed\n`);
    expect(await row(held.id)).toMatch(new RegExp(`  after ${second} … ${last} \\(5 jobs\\)  +pending$`));
  });

  it('job names a few dependencies one by one, each with its state', async () => {
    const a = service.submit({ ...SPEC, name: 'a' }, 'vision').id;
    const b = service.submit({ ...SPEC, name: 'b' }, 'vision').id;
    succeed(a);
    const held = service.submit({ ...SPEC, name: 'after-two', dependsOn: [a, b] }, 'vision');
    const { stdout } = await run(['job', held.id]);
    expect(stdout).toContain(
      `\ndepends on ${a} (succeeded), ${b} (queued)\nwaiting    for ${b} to succeed\n`,
    );
  });
});

describe("an array's row in jobs", () => {
  it('says after what its held jobs wait for, and how many wait in the queue beside them', async () => {
    const first = array('first', 3);
    const all = array('all', 3, () => first);
    expect(await row(first[0] as string)).toMatch(/  3 waiting  +\S+$/);
    expect(await row(all[0] as string)).toMatch(new RegExp(`  after ${first.join(', ')}  +\\S+$`));
    // Paired by index: the first's dependency succeeded, so it waits in the queue; the others are held.
    succeed(first[0] as string);
    const paired = array('paired', 3, (i) => [first[i] as string]);
    expect(await row(paired[0] as string)).toMatch(
      new RegExp(`  1 waiting, 2 after ${first[1]}, ${first[2]}  +\\S+$`),
    );
  });

  it('shows never, beyond, pending or the latest completion in its ETA column, as its live jobs say', async () => {
    const withEtas = (name: string, etas: (EtaRecord | undefined)[]): string => {
      const ids = array(name, etas.length);
      etas.forEach((e, i) => {
        if (e !== undefined) writeQueueRecord(service.store, ids[i] as string, { eta: e });
      });
      return ids[0] as string;
    };
    const at = (s: number) => eta({ completionSeconds: 1_900_000_000 + s });
    const beyond = (s: number) => eta({ completesAfterSeconds: 1_900_000_000 + s, basis: 'beyond' });
    const never = eta({ basis: `${NEVER_UNDER_CAPS_BASIS} alone it needs more` });
    expect(await row(withEtas('timed', [at(60), at(600), at(300)]))).toMatch(
      new RegExp(`  ${formatTime(1_900_000_600)}$`),
    );
    expect(await row(withEtas('far', [at(60), beyond(900), beyond(1800), undefined]))).toMatch(
      /  beyond 30 min$/,
    );
    expect(await row(withEtas('stuck', [at(60), beyond(900), never]))).toMatch(/  never$/);
    expect(await row(withEtas('first-pass', [at(60), undefined]))).toMatch(/  pending$/);
    // One with no ETA at all (no declared duration): the array's end is unknown.
    expect(await row(withEtas('unsized', [at(60), eta({ basis: 'no ETA' })]))).toMatch(/  -$/);
    // A job that ended has no say in when the array ends.
    const ended = withEtas('ended', [never, at(60)]);
    service.store.setJobState(ended, 'cancelled', 'not needed');
    expect(await row(ended)).toMatch(new RegExp(`  ${formatTime(1_900_000_060)}$`));
  });
});

describe('job --mark-unsuccessful --stage', () => {
  it('takes a stage written in decimal digits only', async () => {
    const job = service.submit({ ...SPEC, name: 'staged' }, 'vision');
    for (const stage of ['0x2', '1e0', ' 2', '2.0', '+2', '0']) {
      const { error } = await run(['job', job.id, '--mark-unsuccessful', '--stage', stage]);
      expect(error, stage).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).problems).toEqual([`expected a stage number ≥ 1, got ${stage}`]);
    }
    expect(service.marked).toEqual([]);
    const { error } = await run(['job', job.id, '--mark-unsuccessful', '--stage', '2']);
    expect(error).toBeUndefined();
    expect(service.marked).toEqual([{ jobId: job.id, stage: 2 }]);
  });
});
