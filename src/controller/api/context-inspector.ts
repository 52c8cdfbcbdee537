import { createHash } from 'node:crypto';
import { Transform, type TransformCallback, type Writable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { extract as tarExtract, type Header } from 'tar-stream';
import { plainEntryName, unsafeEntryNameReason } from '../../protocol/archive-entry-names.js';
import { ExpansionMeter, type ContextLimits } from '../../protocol/context-limits.js';

/** An upload that is not what it claims (not a gzip stream or a tar, not the declared sha256): a 400. */
export class ContextArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContextArchiveError';
  }
}

/**
 * Why an entry could not be extracted on a worker, by the names it holds (protocol/archive-entry-names.ts, the rule
 * the worker extracts by): a name outside the context, or a hard link to one. Symlinks may point anywhere, as
 * `docker build` copies them as links.
 */
function unsafeEntry(header: Header): string | undefined {
  const unsafe = unsafeEntryNameReason(header.name);
  if (unsafe !== undefined) return `entry ${JSON.stringify(header.name)} ${unsafe}`;
  if (header.type !== 'link') return undefined;
  const target = header.linkname;
  const unsafeTarget = unsafeEntryNameReason(target);
  if (unsafeTarget !== undefined)
    return `entry ${JSON.stringify(header.name)} is a hard link whose target ${JSON.stringify(target)} ${unsafeTarget}`;
  return plainEntryName(target) === ''
    ? `entry ${JSON.stringify(header.name)} is a hard link to the directory`
    : undefined;
}

/**
 * A build context upload checked as it streams through, on its way to the object store: the bytes pass on unchanged,
 * only after being counted against the team's limits (src/protocol/context-limits.ts), hashed, decompressed and read
 * as a tar (headers only; contents are counted, not kept), each entry's names checked as the worker checks them when
 * it extracts (unsafeEntry). Nothing is buffered beyond a chunk: a 200 MiB upload uses the memory of a few chunks,
 * however many arrive at once. The stream fails at the first byte over a limit (ContextLimitError) or the first sign
 * that the body is not a tar or holds an entry no worker would extract (ContextArchiveError), and it ends only once the
 * whole archive read as a tar with at least one entry and its sha256 is the declared one, so a store writing what
 * comes out of it (a put completes only when its body ends) never keeps an archive that failed a check.
 */
export class ContextInspector extends Transform {
  private readonly meter: ExpansionMeter;
  private readonly hash = createHash('sha256');
  /** Where the archive's bytes go to be read: gunzip (then the tar reader), or the tar reader. */
  private readonly reader: Writable;
  /** Resolves once the tar reader has read the whole archive. */
  private readonly tarRead: Promise<void>;
  private entries = 0;

  /**
   * `declaredBytes`: the body's size when the request says it (Content-Length), so that the expansion ratio is
   * checked against the whole archive (ExpansionMeter); a body declared over the limit is refused here, before a byte
   * of it is read.
   */
  constructor(
    encoding: 'tar' | 'gzip',
    limits: ContextLimits,
    private readonly declaredSha256: string,
    declaredBytes?: number,
  ) {
    super();
    this.meter = new ExpansionMeter(limits, declaredBytes);
    const tar = tarExtract();
    tar.on('entry', (header, entry, next) => {
      const unsafe = unsafeEntry(header);
      if (unsafe !== undefined) {
        this.destroy(new ContextArchiveError(unsafe));
        tar.destroy();
        return;
      }
      this.entries += 1;
      entry.on('end', next);
      entry.resume();
    });
    this.tarRead = new Promise<void>((resolve) => tar.on('finish', () => resolve()));
    tar.on('error', (e: Error) => this.destroy(new ContextArchiveError(`not a tar archive: ${e.message}`)));
    const meter = this.meter;
    const expanded = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        try {
          meter.addExpanded(chunk.length);
          done(null, chunk);
        } catch (e) {
          done(e as Error);
        }
      },
    });
    expanded.on('error', (e) => this.destroy(e));
    expanded.pipe(tar);
    if (encoding === 'gzip') {
      const gunzip = createGunzip();
      gunzip.on('error', (e) => this.destroy(new ContextArchiveError(`not a gzip stream: ${e.message}`)));
      gunzip.pipe(expanded);
      this.reader = gunzip;
    } else this.reader = expanded;
  }

  /** The archive's bytes so far (all of them once the stream ended). */
  get sizeBytes(): number {
    return this.meter.archive;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    try {
      this.meter.addArchive(chunk.length);
    } catch (e) {
      done(e as Error);
      return;
    }
    this.hash.update(chunk);
    // Pass the chunk on once the reader has taken it: its pace is the upload's, so nothing piles up in between.
    if (this.reader.write(chunk)) done(null, chunk);
    else this.reader.once('drain', () => done(null, chunk));
  }

  override _flush(done: TransformCallback): void {
    this.reader.end();
    this.tarRead.then(() => {
      if (this.entries === 0) return done(new ContextArchiveError('the archive holds no file'));
      const sha256 = this.hash.digest('hex');
      if (sha256 !== this.declaredSha256)
        return done(
          new ContextArchiveError(
            `the body's sha256 is ${sha256}, not the declared ${this.declaredSha256} (a different or damaged upload)`,
          ),
        );
      done();
    }, done);
  }
}
