import { execFileSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { checkOutputDirectory, checkOutputFile } from '../../src/cli/output-target.js';
import { ValidationError } from '../../src/core/validation.js';

/** Where a command will write, refused before its work when it cannot be written there. */

const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-output-target-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const file = join(tmp, 'a-file.json');
writeFileSync(file, '{}');
mkdirSync(join(tmp, 'dir'));

function problem(check: () => void): string {
  try {
    check();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as Error).message;
  }
  return 'accepted';
}

describe('output targets', () => {
  it('a file: not a directory, in a directory that exists', () => {
    expect(problem(() => checkOutputFile(file, '--out'))).toBe('accepted'); // overwritten, as before
    expect(problem(() => checkOutputFile(join(tmp, 'new.json'), '--out'))).toBe('accepted');
    expect(problem(() => checkOutputFile(join(tmp, 'dir'), '--out'))).toMatch(
      /^--out: .*dir is a directory, not a file/,
    );
    expect(problem(() => checkOutputFile(join(tmp, 'missing', 'x.json'), '--table'))).toMatch(
      /^--table: .*missing is not a directory to write .*x\.json in/,
    );
    expect(problem(() => checkOutputFile(join(file, 'x.json'), '--out'))).toMatch(/is not a directory/);
  });

  it('a directory: one that exists or can be made, under no file', () => {
    expect(problem(() => checkOutputDirectory(join(tmp, 'dir'), '--out'))).toBe('accepted');
    expect(problem(() => checkOutputDirectory(join(tmp, 'new', 'deeper'), '--out'))).toBe('accepted');
    expect(problem(() => checkOutputDirectory(file, '--out'))).toMatch(
      /^--out: .*a-file\.json is a file, not a directory/,
    );
    expect(problem(() => checkOutputDirectory(join(file, 'below'), '--out'))).toMatch(
      /^--out: .*a-file\.json is a file: cannot make .*below/,
    );
  });
});

describe('output directories that cannot hold a report', () => {
  it('under a kernel filesystem: refused, naming it', () => {
    expect(problem(() => checkOutputDirectory('/proc/nope/out', '--out'))).toMatch(
      /^--out: .*\/proc is on procfs, a kernel filesystem that holds no files: cannot make \/proc\/nope\/out/,
    );
    expect(problem(() => checkOutputDirectory('/sys/nope', '--out'))).toMatch(/^--out: .*\/sys is on sysfs/);
  });

  it('nothing is made by the check', () => {
    const out = join(tmp, 'not-yet', 'out');
    expect(problem(() => checkOutputDirectory(out, '--out'))).toBe('accepted');
    expect(existsSync(join(tmp, 'not-yet'))).toBe(false);
  });
});

/** A SQLite database in WAL mode, as the controller keeps its state: state.db, with state.db-wal and -shm beside it. */
function sqliteDatabase(path: string): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)');
  db.prepare('INSERT INTO kv VALUES (?, ?)').run('kept', 'yes');
  return db;
}

describe("a controller's state is never an output file", () => {
  const stateDir = join(tmp, 'state');
  mkdirSync(stateDir);
  const db = sqliteDatabase(join(stateDir, 'state.db'));
  afterAll(() => db.close());
  const elsewhere = join(tmp, 'elsewhere');
  mkdirSync(elsewhere);

  it('refuses a SQLite database, whatever its name and however reached, saying it will not be overwritten', () => {
    const stateDb = join(stateDir, 'state.db');
    symlinkSync(stateDb, join(elsewhere, 'link.json'));
    linkSync(stateDb, join(elsewhere, 'hard-link.json'));
    sqliteDatabase(join(elsewhere, 'other.sqlite')).close();
    for (const target of [stateDb, join(elsewhere, 'link.json'), join(elsewhere, 'hard-link.json')])
      expect(
        problem(() => checkOutputFile(target, '--out')),
        target,
      ).toMatch(
        /^--out: .* is a SQLite database, which looks like a controller's state database: it will not be overwritten/,
      );
    expect(problem(() => checkOutputFile(join(elsewhere, 'link.json'), '--out'))).toContain(`(${stateDb})`);
    expect(problem(() => checkOutputFile(join(elsewhere, 'other.sqlite'), '--table'))).toMatch(
      /^--table: .*other\.sqlite is a SQLite database/,
    );
    expect(db.prepare('SELECT v FROM kv WHERE k = ?').get('kept')).toEqual({ v: 'yes' });
  });

  it('refuses any path in a state directory (its WAL, its tokens, a new file), through a link too', () => {
    writeFileSync(join(stateDir, 'admin-token'), 'token\n');
    expect(existsSync(join(stateDir, 'state.db-wal'))).toBe(true);
    symlinkSync(join(stateDir, 'new.json'), join(elsewhere, 'dangling.json'));
    symlinkSync(stateDir, join(elsewhere, 'state-link'));
    // `link/..` is the link's target's parent, as the kernel follows a link before its `..`: here the state directory.
    mkdirSync(join(stateDir, 'objects'));
    symlinkSync(join(stateDir, 'objects'), join(elsewhere, 'objects-link'));
    for (const target of [
      `${elsewhere}/objects-link/../admin-token`,
      `${elsewhere}/objects-link/../state.db-wal`,
      join(stateDir, 'state.db-wal'),
      join(stateDir, 'state.db-shm'),
      join(stateDir, 'admin-token'),
      join(stateDir, 'trace.json'),
      join(elsewhere, 'dangling.json'),
      join(elsewhere, 'state-link', 'trace.json'),
    ])
      expect(
        problem(() => checkOutputFile(target, '--out')),
        target,
      ).toMatch(
        /^--out: .* is in .*state, a fleetwise controller's state directory \(it holds state\.db\): write it elsewhere/,
      );
    expect(readFileSync(join(stateDir, 'admin-token'), 'utf8')).toBe('token\n');
    expect(existsSync(join(stateDir, 'new.json'))).toBe(false);
  });

  it("refuses a PostgreSQL controller's state directory, and its subdirectories, by the controller's own files", () => {
    const shared = join(tmp, 'shared-state');
    mkdirSync(join(shared, 'objects', 'reports'), { recursive: true });
    writeFileSync(join(shared, 'controller.lock'), '');
    expect(problem(() => checkOutputFile(join(shared, 'worker-token'), '--out'))).toMatch(
      /shared-state, a fleetwise controller's state directory \(it holds controller\.lock\)/,
    );
    expect(problem(() => checkOutputFile(join(shared, 'objects', 'reports', 'x.json'), '--out'))).toMatch(
      /is in .*shared-state, a fleetwise controller's state directory/,
    );
  });

  it("still writes elsewhere: beside no state, or below a directory holding some other program's state.db", () => {
    const home = join(tmp, 'home');
    mkdirSync(join(home, 'project'), { recursive: true });
    writeFileSync(join(home, 'state.db'), "some other program's file\n");
    expect(problem(() => checkOutputFile(join(home, 'project', 'trace.json'), '--out'))).toBe('accepted');
    writeFileSync(join(elsewhere, 'old-trace.json'), '{}\n');
    expect(problem(() => checkOutputFile(join(elsewhere, 'old-trace.json'), '--out'))).toBe('accepted');
    expect(problem(() => checkOutputFile(join(elsewhere, 'new-trace.json'), '--out'))).toBe('accepted');
    // A named pipe is written to, never read for a header: opening it to read would wait for a writer for ever.
    execFileSync('mkfifo', [join(elsewhere, 'pipe')]);
    expect(problem(() => checkOutputFile(join(elsewhere, 'pipe'), '--out'))).toBe('accepted');
  });

  it('refuses a report directory that is, or is below, a state directory, through a link too', () => {
    symlinkSync(stateDir, join(elsewhere, 'state-dir-link'));
    for (const target of [
      stateDir,
      join(stateDir, 'reports', 'new'),
      join(elsewhere, 'state-dir-link', 'reports'),
    ])
      expect(
        problem(() => checkOutputDirectory(target, '--out')),
        target,
      ).toMatch(
        /^--out: .*state, a fleetwise controller's state directory \(it holds .*\): write reports elsewhere/,
      );
    expect(problem(() => checkOutputDirectory(stateDir, '--out'))).toMatch(/^--out: \S+ is \S+\/state, /);
    expect(problem(() => checkOutputDirectory(join(elsewhere, 'state-dir-link', 'r'), '--out'))).toContain(
      `(${join(stateDir, 'r')}) is in ${stateDir}`,
    );
    expect(existsSync(join(stateDir, 'reports'))).toBe(false);
    expect(problem(() => checkOutputDirectory(join(elsewhere, 'reports'), '--out'))).toBe('accepted');
  });
});
