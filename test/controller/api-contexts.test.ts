import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { DEFAULT_CONTEXT_LIMITS, type ContextLimits } from '../../src/protocol/context-limits.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { craftTar, gzipBomb } from '../helpers/tar.js';
import { pseudoRandomBytes } from '../storage/object-store-contract.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  NLP_TOKEN,
  VISION_TOKEN,
  type FakeControllerService,
} from './api-fake-service.js';
import { rig } from './controller-fixtures.js';

/**
 * Build contexts over the API: uploads stream to the object store within their team's limits (archive size, expanded
 * size, expansion ratio), are checked against their declared sha256, and job specs name only uploaded contexts,
 * never a path on a worker's host.
 */
const MIB = 1024 * 1024;
const sha256Of = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

interface Answer {
  readonly status: number;
  readonly body: { error?: string; details?: string[]; ref?: string; sizeBytes?: number };
}

async function post(
  url: string,
  path: string,
  token: string,
  body: Buffer | string,
  contentType: string,
): Promise<Answer> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

/**
 * Send `total` bytes (repeating `chunk`) as one chunked request, without a Content-Length, pausing after `pauseAfter`
 * bytes until `resume` resolves. Stops sending once the answer arrives or the connection closes, and reports how
 * many bytes had been handed to the socket by then.
 */
function streamUpload(
  url: string,
  path: string,
  token: string,
  source: { readonly bytes: Buffer } | { readonly chunk: Buffer; readonly total: number },
  options: { readonly pauseAfter?: number; readonly resume?: () => Promise<void> } = {},
): Promise<Answer & { readonly sent: number; readonly total: number }> {
  const total = 'bytes' in source ? source.bytes.length : source.total;
  const piece = (offset: number): Buffer =>
    'bytes' in source ? source.bytes.subarray(offset, offset + 256 * 1024) : source.chunk;
  return new Promise((resolve, reject) => {
    let sent = 0;
    let finished = false;
    const req = httpRequest(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/gzip' },
    });
    const wake: (() => void)[] = [];
    const nudge = (): void => {
      for (const w of wake.splice(0)) w();
    };
    req.on('response', (res) => {
      finished = true;
      nudge();
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'],
          sent,
          total,
        }),
      );
    });
    req.on('error', (e) => {
      nudge();
      if (!finished) reject(e); // after the answer, a reset of the unread rest is expected
    });
    req.on('close', nudge);
    void (async () => {
      let paused = false;
      while (sent < total && !finished && !req.destroyed) {
        if (!paused && options.pauseAfter !== undefined && sent >= options.pauseAfter) {
          paused = true;
          await options.resume?.();
        }
        const next = piece(sent).subarray(0, total - sent);
        const more = req.write(next);
        sent += next.length;
        if (!more) await new Promise<void>((r) => wake.push(r) && req.once('drain', nudge));
      }
      if (!finished && !req.destroyed) req.end();
    })().catch(reject);
  });
}

describe('build context uploads (fake controller: limits and checks)', () => {
  let server: ApiServer;
  let service: FakeControllerService;
  const limits = (team: string | undefined): ContextLimits =>
    team === 'vision' ? { ...DEFAULT_CONTEXT_LIMITS, maxArchiveBytes: 64 * 1024 } : DEFAULT_CONTEXT_LIMITS;

  beforeAll(async () => {
    service = fakeWithTeams();
    server = await startApiServer(service, {
      listen: '127.0.0.1:0',
      adminToken: ADMIN_TOKEN,
      contextLimits: limits,
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it('refuses a gzip bomb with 413 naming the limit, and stores nothing', async () => {
    const bomb = await gzipBomb(256 * MIB);
    const answer = await post(
      server.url,
      `/v1/contexts?sha256=${sha256Of(bomb)}`,
      ADMIN_TOKEN,
      bomb,
      'application/gzip',
    );
    expect(answer.status).toBe(413);
    expect(answer.body.error).toMatch(/expands more than 100 times its archive .*maxExpansionRatio\)/);
    expect(service.contexts.size).toBe(0);
  });

  it("applies the uploading team's limits: over them is 413 naming the limit, before anything is read", async () => {
    const big = gzipSync(
      await craftTar([{ name: 'data.bin', content: pseudoRandomBytes(100 * 1024, 7).toString('latin1') }]),
    );
    expect(big.length).toBeGreaterThan(64 * 1024);
    const team = await post(
      server.url,
      `/v1/contexts?sha256=${sha256Of(big)}`,
      VISION_TOKEN,
      big,
      'application/gzip',
    );
    expect(team.status).toBe(413);
    expect(team.body.error).toBe(
      'the build context archive is larger than its limit of 65536 bytes (maxArchiveBytes)',
    );
    // The admin has the cluster's limits.
    const admin = await post(
      server.url,
      `/v1/contexts?sha256=${sha256Of(big)}`,
      ADMIN_TOKEN,
      big,
      'application/gzip',
    );
    expect(admin.status).toBe(201);
    expect(admin.body.sizeBytes).toBe(big.length);
  });

  it('checks the body against its declared sha256, which is required', async () => {
    const archive = gzipSync(await craftTar([{ name: 'Dockerfile', content: 'FROM busybox\n' }]));
    const missing = await post(server.url, '/v1/contexts', ADMIN_TOKEN, archive, 'application/gzip');
    expect(missing.status).toBe(400);
    expect(missing.body.details?.join('\n')).toMatch(/^sha256: required: the sha256 of the body/);
    const wrong = await post(
      server.url,
      `/v1/contexts?sha256=${'f'.repeat(64)}`,
      ADMIN_TOKEN,
      archive,
      'application/gzip',
    );
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toMatch(/^the body's sha256 is [0-9a-f]{64}, not the declared f{64}/);
    const empty = await craftTar([]);
    const nothing = await post(
      server.url,
      `/v1/contexts?sha256=${sha256Of(empty)}`,
      ADMIN_TOKEN,
      empty,
      'application/x-tar',
    );
    expect(nothing.status).toBe(400);
    expect(nothing.body.error).toBe('the archive holds no file');
    const notGzip = await post(
      server.url,
      `/v1/contexts?sha256=${'a'.repeat(64)}`,
      ADMIN_TOKEN,
      'plain text',
      'application/gzip',
    );
    expect(notGzip.status).toBe(400);
    expect(notGzip.body.error).toMatch(/^not a gzip stream: /);
  });

  it('refuses entries a worker would not extract (outside the context, by name or hard link), and stores nothing', async () => {
    const stored = service.contexts.size;
    const cases: readonly (readonly [Parameters<typeof craftTar>[0], string])[] = [
      [[{ name: '../evil', content: 'x' }], 'entry "../evil" has a `..` path segment'],
      [[{ name: 'app/../../evil', content: 'x' }], 'entry "app/../../evil" has a `..` path segment'],
      [[{ name: '/etc/cron.d/evil', content: 'x' }], 'entry "/etc/cron.d/evil" has an absolute path'],
      [
        [
          { name: 'Dockerfile', content: 'FROM busybox\n' },
          { name: 'passwd', type: 'link', linkname: '/etc/passwd' },
        ],
        'entry "passwd" is a hard link whose target "/etc/passwd" has an absolute path',
      ],
      [[{ name: 'here', type: 'link', linkname: './' }], 'entry "here" is a hard link to the directory'],
    ];
    for (const [entries, error] of cases) {
      const archive = gzipSync(await craftTar(entries));
      const answer = await post(
        server.url,
        `/v1/contexts?sha256=${sha256Of(archive)}`,
        ADMIN_TOKEN,
        archive,
        'application/gzip',
      );
      expect(answer.status, error).toBe(400);
      expect(answer.body.error).toBe(error);
    }
    expect(service.contexts.size).toBe(stored);
    // What a worker extracts is accepted: `./` and doubled slashes, and symlinks pointing anywhere (docker copies
    // them as links).
    const fine = gzipSync(
      await craftTar([
        { name: './', type: 'directory' },
        { name: './Dockerfile', content: 'FROM busybox\n' },
        { name: 'app//run.sh', content: 'echo hi\n' },
        { name: 'host', type: 'symlink', linkname: '/etc/hostname' },
        { name: 'again', type: 'link', linkname: './Dockerfile' },
      ]),
    );
    const answer = await post(
      server.url,
      `/v1/contexts?sha256=${sha256Of(fine)}`,
      ADMIN_TOKEN,
      fine,
      'application/gzip',
    );
    expect(answer.status).toBe(201);
  });

  it('an archive sent to any other route is refused with 415 before it is read', async () => {
    const answer = await post(server.url, '/v1/jobs', ADMIN_TOKEN, Buffer.alloc(4096), 'application/x-tar');
    expect(answer.status).toBe(415);
    expect(answer.body.error).toMatch(/an archive is accepted only by \/v1\/contexts/);
  });

  it('job specs name uploaded contexts only: a path on the host is refused, naming the field', async () => {
    const job = (context: string): Record<string, unknown> => ({
      name: 'built',
      team: 'vision',
      tasks: [
        { name: 'main', demand: { any: [0, 1, 1] }, command: ['true'] },
        { name: 'b', build: { context }, demand: { any: [0, 1, 1] } },
      ],
    });
    for (const context of ['/etc', '../../home/someone/project', '/srv/contexts/readme.txt']) {
      const answer = await fetch(`${server.url}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${VISION_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(job(context)),
      });
      expect(answer.status).toBe(400);
      const body = (await answer.json()) as { details: string[] };
      expect(body.details).toEqual([
        `tasks.1.build.context: ${JSON.stringify(context)} is not an uploaded build context; upload the directory ` +
          'with POST /v1/contexts and give the reference it answers (fleetwise submit does both)',
      ]);
    }
    const archive = await craftTar([{ name: 'Dockerfile', content: 'FROM busybox\n' }]);
    const { body } = await post(
      server.url,
      `/v1/contexts?sha256=${sha256Of(archive)}`,
      VISION_TOKEN,
      archive,
      'application/x-tar',
    );
    const answer = await fetch(`${server.url}/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${VISION_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(job(body.ref ?? '')),
    });
    expect(answer.status).toBe(201);
    // A dry run checks the contexts as a submission does (`submit --dry-run` uploads them first): one the store
    // does not hold is refused, naming the field, so a dry run that passes means the submission will.
    const dry = await fetch(`${server.url}/v1/jobs?dryRun=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${VISION_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(job('./ctx')),
    });
    expect(dry.status).toBe(400);
    expect(((await dry.json()) as { details: string[] }).details).toEqual([
      expect.stringContaining('tasks.1.build.context: "./ctx" is not an uploaded build context'),
    ]);
    const stored = await fetch(`${server.url}/v1/jobs?dryRun=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${VISION_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(job(body.ref ?? '')),
    });
    expect(stored.status).toBe(200);
  });
});

describe('build context uploads (the controller: streaming into the object store)', () => {
  let server: ApiServer;
  let scratch: string;
  let objects: FsObjectStore;
  const CAP = MIB;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'fw-api-contexts-'));
    objects = new FsObjectStore(join(scratch, 'objects'));
    const { controller } = rig({}, { objectStore: objects });
    server = await startApiServer(controller, {
      listen: '127.0.0.1:0',
      adminToken: ADMIN_TOKEN,
      contextLimits: (team) =>
        team === 'vision' ? { ...DEFAULT_CONTEXT_LIMITS, maxArchiveBytes: CAP } : DEFAULT_CONTEXT_LIMITS,
    });
    controller.store.addTeamToken('vision', VISION_TOKEN, 'test');
  });
  afterAll(async () => {
    await server.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** Bytes of in-flight writes in the filesystem store (its temporary files). */
  const inFlightBytes = (): number => {
    const dir = join(objects.location, '.fleetwise-tmp');
    return existsSync(dir) ? readdirSync(dir).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0) : 0;
  };

  it('streams an upload into the store as it arrives, then stores it whole under its sha256', async () => {
    // 24 MiB of incompressible content: the archive is about as large.
    const archive = gzipSync(
      await craftTar([{ name: 'weights.bin', content: pseudoRandomBytes(24 * MIB, 11).toString('latin1') }]),
      { level: 1 },
    );
    const sha256 = sha256Of(archive);
    const answer = await streamUpload(
      server.url,
      `/v1/contexts?sha256=${sha256}`,
      ADMIN_TOKEN,
      { bytes: archive },
      {
        pauseAfter: 8 * MIB,
        // Mid-upload, with two thirds still to come: the store already holds part of it.
        resume: async () => {
          const deadline = Date.now() + 20_000;
          while (inFlightBytes() === 0) {
            if (Date.now() > deadline)
              throw new Error('nothing reached the store while the upload was under way');
            await new Promise((r) => setTimeout(r, 20));
          }
          expect(inFlightBytes()).toBeLessThan(archive.length);
        },
      },
    );
    expect(answer.status).toBe(201);
    expect(answer.body.ref).toBe(`${objects.location}/contexts/${sha256}.tar.gz`);
    expect((await objects.getBuffer(`contexts/${sha256}.tar.gz`)).equals(archive)).toBe(true);
  });

  it('refuses a body over the limit before reading it whole, and keeps nothing of it', async () => {
    const total = 64 * MIB;
    // A real tar.gz for its first MiBs (all the controller reads of it), then filler to 64 MiB.
    const start = gzipSync(
      await craftTar([{ name: 'weights.bin', content: pseudoRandomBytes(4 * MIB, 13).toString('latin1') }]),
      { level: 1 },
    );
    const answer = await streamUpload(server.url, `/v1/contexts?sha256=${'d'.repeat(64)}`, VISION_TOKEN, {
      bytes: Buffer.concat([start, Buffer.alloc(total - start.length)]),
    });
    expect(answer.status).toBe(413);
    expect(answer.body.error).toBe(
      'the build context archive is larger than its limit of 1 MiB (maxArchiveBytes)',
    );
    // The controller stopped reading at the limit: the client could not hand it the rest.
    expect(answer.sent).toBeLessThan(total);
    expect(inFlightBytes()).toBe(0);
    expect(await objects.exists(`contexts/${'d'.repeat(64)}.tar.gz`)).toBe(false);
  });

  it('checks the expansion ratio against the whole archive its Content-Length declares, whatever the order of its files', async () => {
    const ctx = join(scratch, 'mixed');
    mkdirSync(ctx);
    writeFileSync(join(ctx, 'Dockerfile'), 'FROM busybox\n');
    // A preallocated disk image first by name (zeros, over 1000× on their own), then incompressible weights.
    writeFileSync(join(ctx, 'a-disk.img'), Buffer.alloc(20 * MIB));
    writeFileSync(join(ctx, 'z-model.bin'), randomBytes(12 * MIB));
    const { archive, uncompressedBytes } = await packContext(ctx);
    expect(uncompressedBytes / archive.length).toBeLessThan(3);
    const sha256 = sha256Of(archive);
    const key = `contexts/${sha256}.tar.gz`;

    // Sent chunked, with no length to check against, the ratio is the expansion over what has arrived so far.
    const chunked = await streamUpload(server.url, `/v1/contexts?sha256=${sha256}`, ADMIN_TOKEN, {
      bytes: archive,
    });
    expect(chunked.status).toBe(413);
    expect(chunked.body.error).toMatch(
      /expands more than 100 times its archive read so far .*maxExpansionRatio\)/,
    );
    expect(await objects.exists(key)).toBe(false);

    // With its length (as `fleetwise submit` sends it), the whole archive's ratio counts: 2.7×, taken.
    const sized = await post(
      server.url,
      `/v1/contexts?sha256=${sha256}`,
      ADMIN_TOKEN,
      archive,
      'application/gzip',
    );
    expect(sized.body.error).toBeUndefined();
    expect(sized.status).toBe(201);
    expect(sized.body.sizeBytes).toBe(archive.length);
    expect((await objects.getBuffer(key)).equals(archive)).toBe(true);
  });

  it('still refuses a gzip bomb of declared length early, at its expansion ratio, and keeps nothing of it', async () => {
    const bomb = await gzipBomb(200 * MIB);
    const sha256 = sha256Of(bomb);
    const answer = await post(
      server.url,
      `/v1/contexts?sha256=${sha256}`,
      ADMIN_TOKEN,
      bomb,
      'application/gzip',
    );
    expect(answer.status).toBe(413);
    const refused =
      /expands more than 100 times its archive \((\d+) bytes to over ([\d.]+) MiB; maxExpansionRatio\)/.exec(
        answer.body.error ?? '',
      );
    expect(refused, answer.body.error).not.toBeNull();
    // Measured against the whole archive, as declared: cut once past 100 times it, far from the 200 MiB.
    expect(Number(refused?.[1])).toBe(bomb.length);
    expect(Number(refused?.[2])).toBeLessThan(32);
    expect(inFlightBytes()).toBe(0);
    expect(await objects.exists(`contexts/${sha256}.tar.gz`)).toBe(false);
  });
});

describe('build contexts are the uploading team’s (the controller, its state on disk)', () => {
  let scratch: string;
  let objects: FsObjectStore;
  let store: SqliteStateStore;
  let server: ApiServer;

  async function start(): Promise<void> {
    store = new SqliteStateStore(join(scratch, 'state.db'));
    const { controller } = rig({}, { store, objectStore: objects });
    server = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  }
  async function stop(): Promise<void> {
    await server.close();
    store.close();
  }

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'fw-api-context-owners-'));
    objects = new FsObjectStore(join(scratch, 'objects'));
    await start();
    store.addTeamToken('vision', VISION_TOKEN, 'test');
    store.addTeamToken('nlp', NLP_TOKEN, 'test');
  });
  afterAll(async () => {
    await stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const submit = (token: string, context: string, team?: string): Promise<Answer> =>
    post(
      server.url,
      '/v1/jobs',
      token,
      JSON.stringify({
        name: 'built',
        ...(team === undefined ? {} : { team }),
        tasks: [
          { name: 'main', build: { context }, command: ['cat', 'secret.txt'], demand: { any: [0, 1, 1] } },
        ],
      }),
      'application/json',
    );
  const refused = (context: string, why: string): string[] => [
    `tasks.0.build.context: ${JSON.stringify(context)} ${why}`,
  ];
  const HINT =
    'upload the directory with POST /v1/contexts and give the reference it answers (fleetwise submit does both)';

  it('a team builds only from contexts it uploaded, named as the upload answered, and keeps them across restarts', async () => {
    const archive = await craftTar([{ name: 'secret.txt', content: 'vision-private-source\n' }]);
    const sha256 = sha256Of(archive);
    const upload = await post(
      server.url,
      `/v1/contexts?sha256=${sha256}`,
      VISION_TOKEN,
      archive,
      'application/x-tar',
    );
    expect(upload.status).toBe(201);
    const ref = upload.body.ref ?? '';
    expect(ref).toBe(`${objects.location}/contexts/${sha256}.tar`);

    // Another team naming the uploaded context (by the reference, or its sha256 under any prefix) is refused.
    const odd = `s3://anything/contexts/${sha256}.tar`;
    for (const context of [ref, odd]) {
      const stolen = await submit(NLP_TOKEN, context);
      expect(stolen.status).toBe(400);
      expect(stolen.body.details).toEqual(
        refused(context, `is not a build context team nlp uploaded; ${HINT}`),
      );
    }
    // A context never uploaded is refused at submission, for a team and for the admin alike.
    const unknown = `${objects.location}/contexts/${'e'.repeat(64)}.tar`;
    const never = await submit(VISION_TOKEN, unknown);
    expect(never.status).toBe(400);
    expect(never.body.details).toEqual(
      refused(unknown, `is not a build context team vision uploaded; ${HINT}`),
    );
    const neverAdmin = await submit(ADMIN_TOKEN, unknown, 'vision');
    expect(neverAdmin.status).toBe(400);
    expect(neverAdmin.body.details).toEqual(refused(unknown, `is not a stored build context; ${HINT}`));
    // The uploader itself must give the reference the upload answered, not the sha256 under another prefix.
    const oddOwn = await submit(VISION_TOKEN, odd);
    expect(oddOwn.status).toBe(400);
    expect(oddOwn.body.details).toEqual(
      refused(odd, `is not the reference the upload answered: give ${JSON.stringify(ref)}`),
    );

    expect((await submit(VISION_TOKEN, ref)).status).toBe(201);
    // The admin may submit any stored context, for any team.
    expect((await submit(ADMIN_TOKEN, ref, 'nlp')).status).toBe(201);

    // Restarted on the same state: the uploader resubmits as before; the other team is still refused.
    await stop();
    await start();
    expect((await submit(VISION_TOKEN, ref)).status).toBe(201);
    expect((await submit(NLP_TOKEN, ref)).status).toBe(400);
    // Uploading the same archive makes it the second team's too.
    expect(
      (await post(server.url, `/v1/contexts?sha256=${sha256}`, NLP_TOKEN, archive, 'application/x-tar'))
        .status,
    ).toBe(201);
    expect((await submit(NLP_TOKEN, ref)).status).toBe(201);
  });

  it('a context stored before uploaders were kept is its uploader’s, as its stored event says', async () => {
    const key = `contexts/${'a'.repeat(64)}.tar.gz`;
    await objects.put(key, Buffer.from('an older upload'));
    // A state an older controller wrote: the upload's event, no uploader key, never opened by this version.
    await stop();
    const olderPath = join(scratch, 'older.db');
    const older = new SqliteStateStore(olderPath);
    older.addTeamToken('vision', VISION_TOKEN, 'test');
    older.addTeamToken('nlp', NLP_TOKEN, 'test');
    older.appendEvent({ kind: 'context.stored', data: { key, sizeBytes: 15, team: 'vision' } });
    older.close();
    store = new SqliteStateStore(olderPath);
    const { controller } = rig({}, { store, objectStore: objects });
    server = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
    const ref = `${objects.location}/${key}`;
    expect((await submit(NLP_TOKEN, ref)).status).toBe(400);
    expect((await submit(VISION_TOKEN, ref)).status).toBe(201);
  });
});
