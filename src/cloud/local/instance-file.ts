import {
  appendFileSync,
  closeSync,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  truncateSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { dirname } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../../core/validation.js';

/**
 * The local provider's instance records on disk, crash-safe and written in O(1) per change: a snapshot (the state
 * file, `{ version: 1, instances: [...] }`, replaced atomically by temporary file + rename) and a journal beside it
 * (`<state file>.journal`, one whole record per line, appended). A record in the journal replaces the snapshot's
 * record with its id; the newest line wins. Rewriting the whole file on every launch made a launch cost O(instances
 * ever launched), so a burst of launches O(n²).
 *
 * Crash safety: a crash mid-append leaves a last line without its newline; readers ignore it, and the next writer
 * cuts it off before it appends. Once the journal holds more lines than the snapshot has records (and at least
 * COMPACT_AFTER_LINES), the records are written as a new snapshot and the journal emptied: a crash between the two
 * replays the journal over the new snapshot, which changes nothing, since every line is a whole record.
 *
 * A LocalInstanceFile keeps the records in memory and reads only what changed on disk since (two stats per access):
 * the journal's new lines, or everything when the snapshot was replaced or the journal emptied by another process (a
 * standby controller taking over, `fleetwise down`).
 */

export interface LocalInstance {
  readonly instanceId: string;
  readonly typeName: string;
  readonly state: 'running' | 'terminated';
  readonly tags: Readonly<Record<string, string>>;
  readonly launchTimeMs: number;
  readonly terminatedAtMs?: number | undefined;
  /**
   * `down`: `fleetwise down` stopped it (its worker checkpointed its tasks first) where no controller did, so the next
   * start closes it as stopped with the controller, not as lost.
   */
  readonly stoppedBy?: 'down' | undefined;
  /**
   * Tasks its worker left that could not be stopped when the instance ended (their engine did not answer): they may
   * still run, so they are stopped again later (a controller retries, `fleetwise down` tries too) and this is cleared
   * once that succeeds. The instance itself ended with its worker: it is billed no longer.
   */
  readonly tasksLeft?: readonly string[] | undefined;
  /** Working directory of the instance's worker (executor state, task directories, its log). */
  readonly dir: string;
  readonly pid?: number | undefined;
}

const instanceSchema = z.object({
  instanceId: z.string(),
  typeName: z.string(),
  state: z.enum(['running', 'terminated']),
  tags: z.record(z.string(), z.string()),
  launchTimeMs: z.number(),
  terminatedAtMs: z.number().optional(),
  stoppedBy: z.literal('down').optional(),
  tasksLeft: z.array(z.string()).optional(),
  dir: z.string(),
  pid: z.number().int().optional(),
});
const snapshotSchema = z.object({ version: z.literal(1), instances: z.array(instanceSchema) });

/** The journal is folded into the snapshot once it has this many lines and more than the snapshot has records. */
export const COMPACT_AFTER_LINES = 256;

/** The journal of a state file. */
export const journalPathOf = (stateFile: string): string => `${stateFile}.journal`;

const problemsOf = (error: z.ZodError): string[] =>
  error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** What identifies one version of the snapshot: a rename makes a new inode, an overwrite a new mtime or size. */
const snapshotIdentity = (s: Stats | undefined): string =>
  s === undefined ? 'none' : `${s.ino}:${s.mtimeMs}:${s.ctimeMs}:${s.size}`;

export class LocalInstanceFile {
  private readonly records = new Map<string, LocalInstance>();
  /** The snapshot the records were read from (snapshotIdentity); undefined: nothing read yet. */
  private snapshotSeen: string | undefined;
  /** Bytes of the journal read so far: whole lines only. */
  private journalRead = 0;
  private journalLines = 0;

  constructor(readonly path: string) {}

  get journalPath(): string {
    return journalPathOf(this.path);
  }

  /** Every record, in launch order, as they are on disk now. */
  all(): LocalInstance[] {
    this.refresh();
    return [...this.records.values()];
  }

  /** Record these (new or changed) instances: one journal line each, then compaction when due. */
  write(changed: readonly LocalInstance[]): void {
    if (changed.length === 0) return;
    this.refresh();
    mkdirSync(dirname(this.path), { recursive: true });
    // A torn last line (a crash mid-append) is cut off, or the new line would continue it.
    const size = statOrUndefined(this.journalPath)?.size ?? 0;
    if (size > this.journalRead) truncateSync(this.journalPath, this.journalRead);
    const text = changed.map((r) => `${JSON.stringify(r)}\n`).join('');
    appendFileSync(this.journalPath, text, { mode: 0o600 });
    this.journalRead += Buffer.byteLength(text);
    this.journalLines += changed.length;
    for (const r of changed) this.records.set(r.instanceId, r);
    if (this.journalLines >= COMPACT_AFTER_LINES && this.journalLines > this.records.size) this.compact();
  }

  /** Fold the journal into a new snapshot (atomically), then empty the journal. */
  private compact(): void {
    const temp = `${this.path}.${process.pid}.tmp`;
    const instances = [...this.records.values()];
    writeFileSync(temp, `${JSON.stringify({ version: 1, instances }, null, 1)}\n`, { mode: 0o600 });
    renameSync(temp, this.path);
    truncateSync(this.journalPath, 0);
    this.snapshotSeen = snapshotIdentity(statOrUndefined(this.path));
    this.journalRead = 0;
    this.journalLines = 0;
  }

  /** Read what changed on disk since the last look. */
  private refresh(): void {
    const snapshot = snapshotIdentity(statOrUndefined(this.path));
    const journalSize = statOrUndefined(this.journalPath)?.size ?? 0;
    if (snapshot !== this.snapshotSeen || journalSize < this.journalRead) {
      this.records.clear();
      for (const r of this.readSnapshot()) this.records.set(r.instanceId, r);
      this.snapshotSeen = snapshot;
      this.journalRead = 0;
      this.journalLines = 0;
    }
    if (journalSize > this.journalRead) this.readJournal();
  }

  private readSnapshot(): LocalInstance[] {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new ValidationError(this.path, [`not valid JSON: ${(e as Error).message}`]);
    }
    const parsed = snapshotSchema.safeParse(value);
    if (!parsed.success) throw new ValidationError(this.path, problemsOf(parsed.error));
    return parsed.data.instances;
  }

  /** The journal's whole lines after what was read; a last line without its newline is left for later. */
  private readJournal(): void {
    let fd: number;
    try {
      fd = openSync(this.journalPath, 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    let bytes: Buffer;
    try {
      const length = fstatSync(fd).size - this.journalRead;
      if (length <= 0) return;
      bytes = Buffer.alloc(length);
      let got = 0;
      while (got < length) {
        const n = readSync(fd, bytes, got, length - got, this.journalRead + got);
        if (n === 0) break;
        got += n;
      }
      bytes = bytes.subarray(0, got);
    } finally {
      closeSync(fd);
    }
    const end = bytes.lastIndexOf(0x0a);
    if (end < 0) return;
    const lines = bytes.subarray(0, end).toString('utf8').split('\n');
    for (const line of lines) {
      this.journalLines += 1;
      const where = `${this.journalPath} line ${this.journalLines}`;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch (e) {
        throw new ValidationError(where, [`not valid JSON: ${(e as Error).message}`]);
      }
      const parsed = instanceSchema.safeParse(value);
      if (!parsed.success) throw new ValidationError(where, problemsOf(parsed.error));
      this.records.set(parsed.data.instanceId, parsed.data);
    }
    this.journalRead += end + 1;
  }
}

/** The instance records of a state file (snapshot and journal), read once: for readers outside the provider. */
export function readLocalInstances(stateFile: string): LocalInstance[] {
  return new LocalInstanceFile(stateFile).all();
}
