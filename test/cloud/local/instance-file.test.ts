import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  COMPACT_AFTER_LINES,
  journalPathOf,
  LocalInstanceFile,
  readLocalInstances,
  type LocalInstance,
} from '../../../src/cloud/local/instance-file.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-instance-file-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
function freshPath(): string {
  const dir = join(scratch, `site-${(dirs += 1)}`);
  mkdirSync(dir);
  return join(dir, 'local-instances.json');
}

const record = (n: number, state: LocalInstance['state'] = 'running', pid?: number): LocalInstance => ({
  instanceId: `local-${n}`,
  typeName: 'c7i.large',
  state,
  tags: { 'fleetwise:cluster': 'c' },
  launchTimeMs: 1000 + n,
  dir: `/tmp/local-${n}`,
  ...(pid === undefined ? {} : { pid }),
});

describe('the local instance file (snapshot + journal)', () => {
  it('appends one line per change instead of rewriting every record, and compacts into the snapshot', () => {
    const path = freshPath();
    const file = new LocalInstanceFile(path);
    file.write([record(1)]);
    file.write([record(2)]);
    expect(existsSync(path)).toBe(false); // no snapshot yet: two journal lines
    expect(readFileSync(journalPathOf(path), 'utf8').trim().split('\n')).toHaveLength(2);
    file.write([record(1, 'terminated')]);
    expect(readLocalInstances(path).map((r) => [r.instanceId, r.state])).toEqual([
      ['local-1', 'terminated'],
      ['local-2', 'running'],
    ]);
    // Enough lines: folded into the snapshot, the journal emptied.
    for (let n = 3; n <= COMPACT_AFTER_LINES + 1; n++) file.write([record(n)]);
    expect(statSync(journalPathOf(path)).size).toBeLessThan(1000);
    const snapshot = JSON.parse(readFileSync(path, 'utf8')) as { instances: LocalInstance[] };
    expect(snapshot.instances.length).toBeGreaterThanOrEqual(COMPACT_AFTER_LINES - 1);
    expect(readLocalInstances(path)).toHaveLength(COMPACT_AFTER_LINES + 1);
    expect(readLocalInstances(path)[0]?.state).toBe('terminated');
  });

  it('ignores a torn last line (a crash mid-append) and cuts it off before the next append', () => {
    const path = freshPath();
    new LocalInstanceFile(path).write([record(1), record(2)]);
    appendFileSync(journalPathOf(path), '{"instanceId":"local-3","typ');
    expect(readLocalInstances(path).map((r) => r.instanceId)).toEqual(['local-1', 'local-2']);
    const restarted = new LocalInstanceFile(path);
    restarted.write([record(4)]);
    expect(readLocalInstances(path).map((r) => r.instanceId)).toEqual(['local-1', 'local-2', 'local-4']);
    expect(readFileSync(journalPathOf(path), 'utf8')).not.toContain('local-3');
  });

  it('replays a journal left over by a crash between writing the snapshot and emptying the journal', () => {
    const path = freshPath();
    const file = new LocalInstanceFile(path);
    file.write([record(1), record(2, 'running', 42)]);
    const journal = readFileSync(journalPathOf(path), 'utf8');
    writeFileSync(path, JSON.stringify({ version: 1, instances: [record(1), record(2, 'running', 42)] }));
    writeFileSync(journalPathOf(path), journal); // the journal as it was before the crash
    expect(readLocalInstances(path)).toEqual([record(1), record(2, 'running', 42)]);
  });

  it("sees another process's writes: new journal lines, a replaced snapshot, an emptied journal", () => {
    const path = freshPath();
    const mine = new LocalInstanceFile(path);
    mine.write([record(1)]);
    expect(mine.all()).toHaveLength(1);
    new LocalInstanceFile(path).write([record(2)]); // another writer appends
    expect(mine.all().map((r) => r.instanceId)).toEqual(['local-1', 'local-2']);
    writeFileSync(path, JSON.stringify({ version: 1, instances: [record(7)] }));
    writeFileSync(journalPathOf(path), '');
    expect(mine.all().map((r) => r.instanceId)).toEqual(['local-7']);
  });

  it('refuses a corrupt journal line, naming the file and the line', () => {
    const path = freshPath();
    new LocalInstanceFile(path).write([record(1)]);
    appendFileSync(journalPathOf(path), '{"instanceId": 3}\n');
    expect(() => readLocalInstances(path)).toThrow(/local-instances\.json\.journal line 2: instanceId/);
  });

  it('property: whatever the writes, tears and restarts, readers see the last record of every instance', () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('write' as const),
        ids: fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 3 }),
        pid: fc.integer({ min: 1, max: 1e6 }),
      }),
      fc.record({
        kind: fc.constant('tear' as const),
        text: fc.string({ maxLength: 30 }).map((s) => s.replace(/\n/g, '')),
      }),
      fc.record({ kind: fc.constant('restart' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
        const path = freshPath();
        let file = new LocalInstanceFile(path);
        const model = new Map<string, LocalInstance>();
        for (const o of ops) {
          if (o.kind === 'write') {
            const changed = o.ids.map((n) => record(n, 'running', o.pid));
            file.write(changed);
            for (const r of changed) model.set(r.instanceId, r);
          } else if (o.kind === 'tear') {
            if (o.text.length > 0) appendFileSync(journalPathOf(path), o.text); // a crash mid-append
            file = new LocalInstanceFile(path); // and the restart after it
          } else file = new LocalInstanceFile(path);
        }
        const expected = [...model.values()].sort((a, b) => a.instanceId.localeCompare(b.instanceId));
        const byId = (rs: LocalInstance[]): LocalInstance[] =>
          [...rs].sort((a, b) => a.instanceId.localeCompare(b.instanceId));
        expect(byId(readLocalInstances(path))).toEqual(expected);
        expect(byId(file.all())).toEqual(expected);
      }),
      { numRuns: 40 },
    );
  });
});
