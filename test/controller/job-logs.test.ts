import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LogPartsPrinter, type LogPartSource } from '../../src/cli/log-parts-printer.js';
import { readJobLogs } from '../../src/controller/artifacts.js';
import { StoredJobLogs } from '../../src/controller/job-logs.js';
import { taskLogKey, taskLogRunName, taskLogSegmentKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';

/**
 * Reading a job's logs as workers store them, old single objects and new segments alike, whole (what `fleetwise
 * logs` prints) or part by part from an offset (what `fleetwise logs --follow` fetches), over the real filesystem
 * object store.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-job-logs-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** What `readJobLogs` answered before segments, for the objects given (key → body). */
function wholeObjectsText(prefix: string, objects: ReadonlyMap<string, string>): string {
  return [...objects.keys()]
    .sort()
    .map((key) => {
      const text = objects.get(key) ?? '';
      return `==> ${key.slice(prefix.length)} <==\n${text}${text.endsWith('\n') || text === '' ? '' : '\n'}`;
    })
    .join('');
}

/** A part source over the reader that counts the bytes it hands out. */
function countingSource(reader: StoredJobLogs): LogPartSource & { fetched: number } {
  const source = {
    fetched: 0,
    parts: () => reader.parts(),
    bytes: async (part: string, from: number): Promise<Buffer> => {
      const bytes = (await reader.readPart(part, from, 64)) ?? Buffer.alloc(0);
      source.fetched += bytes.length;
      return bytes;
    },
  };
  return source;
}

describe('job logs: reading what workers stored', () => {
  it('old single-object runs read as before, beside segmented runs, one header per run in start order', async () => {
    const store = new FsObjectStore(join(tmp, 'mixed'));
    const old = new Map([
      [taskLogKey('job-3', 'job-3.0', 1000, 'i-1'), 'first run\nno newline at the end'],
      [taskLogKey('job-3', 'job-3.1', 1500, 'i-1'), ''],
      [taskLogKey('job-3', 'job-3.0', 3000, 'i-2'), 'héllo\n'],
    ]);
    for (const [key, body] of old) await store.put(key, Buffer.from(body));
    expect(await readJobLogs(store, 'job-3')).toBe(wholeObjectsText('logs/job-3/', old));

    // A later run from a worker that ships segments: its segments read as one part, between the others by start.
    const run = taskLogRunName('job-3.1', 2000, 'i-3');
    const segments = ['seg 0 ', 'seg 1 é', 'nd\nlast'];
    for (const [seq, body] of segments.entries())
      await store.put(taskLogSegmentKey('job-3', run, seq), Buffer.from(body));
    const expected = wholeObjectsText(
      'logs/job-3/',
      new Map([...old, [`logs/job-3/${run}`, segments.join('')]]),
    );
    expect(await readJobLogs(store, 'job-3')).toBe(expected);
    expect(expected.match(/^==> /gm)).toHaveLength(4);
    const reader = new StoredJobLogs(store, 'job-3');
    expect((await reader.parts()).map((p) => p.name)).toEqual([
      '00000000001000-job-3.0-i-1.log',
      '00000000001500-job-3.1-i-1.log',
      run,
      '00000000003000-job-3.0-i-2.log',
    ]);
    // A part from an offset, across segment ends, bounded.
    expect((await reader.readPart(run, 4, 8))?.toString('utf8')).toBe('0 seg 1 ');
    expect((await reader.readPart(run, 100, 8))?.length).toBe(0);
    expect(await reader.readPart('00000000009999-job-3.0-i-9.log', 0, 8)).toBeUndefined();

    // `fleetwise logs` part by part prints exactly the whole answer.
    let printed = '';
    const printer = new LogPartsPrinter((text) => (printed += text), true);
    await printer.update(countingSource(reader));
    printer.finish();
    expect(printed).toBe(expected);
  });

  it('a run stored both ways (adopted by an upgraded worker) reads from its segments', async () => {
    const store = new FsObjectStore(join(tmp, 'both'));
    const run = taskLogRunName('job-4.0', 1000, 'i-1');
    await store.put(taskLogKey('job-4', 'job-4.0', 1000, 'i-1'), Buffer.from('a\nb\n'));
    await store.put(taskLogSegmentKey('job-4', run, 0), Buffer.from('a\nb\nc\n'));
    expect(await readJobLogs(store, 'job-4')).toBe(`==> ${run} <==\na\nb\nc\n`);
  });

  it('following fetches only the bytes past what it printed, part by part', async () => {
    const store = new FsObjectStore(join(tmp, 'follow'));
    const reader = new StoredJobLogs(store, 'job-5');
    const source = countingSource(reader);
    let printed = '';
    const follower = new LogPartsPrinter((text) => (printed += text));
    const a = taskLogRunName('job-5.0', 1000, 'i-1');
    const b = taskLogRunName('job-5.1', 1001, 'i-1');
    const big = 'x'.repeat(1000);
    await store.put(taskLogSegmentKey('job-5', a, 0), Buffer.from(`${big}\n`));
    await follower.update(source);
    expect(source.fetched).toBe(1001);
    // Part a grows a sealed segment and an open one; part b appears; a character is split between two segments.
    await store.put(taskLogSegmentKey('job-5', a, 1), Buffer.from('a2\nx\u00e9'.slice(0, 5)));
    await store.put(taskLogSegmentKey('job-5', b, 0), Buffer.from('b1\n'));
    await follower.update(source);
    expect(source.fetched).toBe(1001 + Buffer.byteLength('a2\nx\u00e9') + 3);
    await store.put(taskLogSegmentKey('job-5', b, 0), Buffer.from('b1\nb2'));
    await follower.update(source);
    expect(source.fetched).toBe(1001 + Buffer.byteLength('a2\nx\u00e9') + 5);
    await follower.update(source);
    expect(source.fetched).toBe(1001 + Buffer.byteLength('a2\nx\u00e9') + 5);
    follower.finish();
    expect(printed).toBe(`==> ${a} <==\n${big}\na2\nxé\n==> ${b} <==\nb1\nb2\n`);
  });

  it('the whole text streams part by part, never as one string of the whole log', async () => {
    const store = new FsObjectStore(join(tmp, 'stream'));
    const run = taskLogRunName('job-6.0', 1000, 'i-1');
    for (let seq = 0; seq < 40; seq += 1)
      await store.put(taskLogSegmentKey('job-6', run, seq), Buffer.alloc(64 * 1024, 0x61 + (seq % 26)));
    const chunks: number[] = [];
    for await (const chunk of await new StoredJobLogs(store, 'job-6').text())
      chunks.push((chunk as Buffer).length);
    expect(Math.max(...chunks)).toBeLessThanOrEqual(64 * 1024);
    expect(chunks.reduce((x, y) => x + y, 0)).toBe(`==> ${run} <==\n`.length + 40 * 64 * 1024 + 1);
    // The last segment is all 'n' (seq 39) and gains the newline a part ends with.
    const text = await readAll(await new StoredJobLogs(store, 'job-6').text());
    expect(text.subarray(-2).toString()).toBe('n\n');
  });
});
