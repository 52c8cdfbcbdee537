import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildContextProblem, recordUploadersFromEvents } from '../../src/controller/artifacts.js';
import type { EventFilter, EventRecord } from '../../src/controller/state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { buildContextKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';

/** A state on disk that counts how often the event log is read. */
class CountingStore extends SqliteStateStore {
  eventReads = 0;
  override listEvents(filter?: EventFilter): EventRecord[] {
    this.eventReads += 1;
    return super.listEvents(filter);
  }
}

/**
 * Who may build from a stored context is answered from per-team keys: a state with a long history of uploads does
 * not make a submission read its event log (any team could otherwise stall the controller by naming contexts it did
 * not upload), and contexts known only from an older controller's events stay their uploader's.
 */
describe('build context uploaders', () => {
  let scratch: string;
  let objects: FsObjectStore;
  let path: string;
  const UPLOADS = 2000;
  const keyOf = (i: number): string => buildContextKey(i.toString(16).padStart(64, '0'), 'gzip');

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'fw-context-uploaders-'));
    objects = new FsObjectStore(join(scratch, 'objects'));
    path = join(scratch, 'state.db');
    // An older controller's state: every upload an event naming its team, no uploader keys.
    const older = new SqliteStateStore(path);
    older.transaction(() => {
      for (let i = 0; i < UPLOADS; i++)
        older.appendEvent({ kind: 'context.stored', data: { key: keyOf(i), sizeBytes: 10, team: 'alpha' } });
    });
    older.close();
    await objects.put(keyOf(0), Buffer.from('an older upload'));
    await objects.put(keyOf(1), Buffer.from('another older upload'));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('refusals read no event log, once the older uploaders are recorded; those stay their team’s', async () => {
    const store = new CountingStore(path);
    try {
      const refs = Array.from({ length: 64 }, (_, i) => `${objects.location}/${keyOf(i)}`);
      for (const ref of refs)
        expect(await buildContextProblem(objects, store, ref, 'beta')).toMatch(
          /^is not a build context team beta/,
        );
      // The first check recorded the older uploaders (the API may serve before the controller starts); no other did.
      expect(store.eventReads).toBe(1);
      expect(await buildContextProblem(objects, store, refs[0] ?? '', 'alpha')).toBeUndefined();
      expect(await buildContextProblem(objects, store, refs[1] ?? '', 'alpha')).toBeUndefined();
      expect(store.eventReads).toBe(1);
    } finally {
      store.close();
    }
    // Recorded in the state: a later process (start-up, then requests) does not read the event log again.
    const restarted = new CountingStore(path);
    try {
      recordUploadersFromEvents(restarted);
      expect(
        await buildContextProblem(objects, restarted, `${objects.location}/${keyOf(5)}`, 'beta'),
      ).toMatch(/^is not a build context team beta/);
      expect(await buildContextProblem(objects, restarted, `${objects.location}/${keyOf(0)}`, 'alpha')).toBe(
        undefined,
      );
      expect(restarted.eventReads).toBe(0);
    } finally {
      restarted.close();
    }
  });
});
