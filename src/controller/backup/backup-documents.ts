import { z } from 'zod';
import { JOB_ID_PATTERN } from '../job-spec/spec.js';
import { parseWith } from '../../core/validation.js';
import { JOB_STATES } from '../state-store.js';

/**
 * The small JSON documents backups and the job archive keep next to their data (keys: src/protocol/object-keys.ts).
 * Each carries a version so a later fleetwise can read what an earlier one wrote, and is validated when read: a
 * restore installs what it reads as the controller's state, so nothing unchecked gets in.
 */

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'a sha256 in hex');
const byteCount = z.number().int().nonnegative();
const epochSeconds = z.number().finite().nonnegative();

/** One backup: what its data object holds and how to check it. `latest.json` is a copy of the newest one. */
export const backupManifestSchema = z.strictObject({
  version: z.literal(1),
  cluster: z.string().min(1),
  seq: z.number().int().positive(),
  /** The data object: the gzip-compressed SQLite database. */
  key: z.string().min(1),
  /** sha256 of the data object (the compressed bytes, as stored). */
  sha256: sha256Hex,
  sizeBytes: byteCount,
  /** The database's size once decompressed. */
  databaseBytes: byteCount,
  /** When the snapshot was taken (epoch seconds): changes after it are not in this backup. */
  takenAtSeconds: epochSeconds,
});
export type BackupManifest = z.output<typeof backupManifestSchema>;

/**
 * The state directory's tokens that live outside the database: workers on running instances hold the worker token
 * (a restored controller must accept them), clients hold a generated admin token, a Prometheus server the metrics
 * token.
 */
export const SECRET_NAMES = ['workerToken', 'adminToken', 'metricsToken'] as const;
export type SecretName = (typeof SECRET_NAMES)[number];
/** The file each token is kept in. */
export type SecretFilePaths = Readonly<Record<SecretName, string>>;

export const backupSecretsSchema = z.strictObject({
  version: z.literal(1),
  workerToken: z.string().min(1).optional(),
  adminToken: z.string().min(1).optional(),
  metricsToken: z.string().min(1).optional(),
});
export type BackupSecrets = z.output<typeof backupSecretsSchema>;

const jobId = z.string().regex(JOB_ID_PATTERN, 'a job id (job-<n>)');

/** An accepted job's spec, stored before its submission is answered. `spec` is validated again on restore. */
export const archivedSpecSchema = z.strictObject({
  version: z.literal(1),
  id: jobId,
  submittedAtSeconds: epochSeconds,
  spec: z.unknown(),
  /** The idempotency key it was submitted with (submission-keys.ts), so a restored state answers a resend of it. */
  submissionKey: z.strictObject({ key: z.string().min(1), requestHash: z.string().min(1) }).optional(),
  /**
   * Whether it was submitted as one job of an array (in one submission with the rest), or alone: a rerun of one job of
   * an array carries its index too. Absent in documents written before it was kept: taken from the index.
   */
  ofArraySubmission: z.boolean().optional(),
});
export type ArchivedSpec = z.output<typeof archivedSpecSchema>;

/** How a job ended: a job the backup missed, or that ended after it, is restored ended, never run again. */
export const archivedEndSchema = z.strictObject({
  version: z.literal(1),
  id: jobId,
  state: z.enum(JOB_STATES),
  reason: z.string().optional(),
  finishedAtSeconds: epochSeconds,
  /** When the job that ended was submitted: an end applies to that submission only (absent in older documents). */
  submittedAtSeconds: epochSeconds.optional(),
});
export type ArchivedEnd = z.output<typeof archivedEndSchema>;

/** Parse a stored document, naming the object in the error. */
export function readDocument<S extends z.ZodType>(schema: S, bytes: Buffer, where: string): z.output<S> {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (e) {
    throw new Error(`${where}: not valid JSON (${(e as Error).message})`);
  }
  return parseWith(schema, value, where);
}

export function documentBytes(value: unknown): Buffer {
  return Buffer.from(`${JSON.stringify(value, null, 2)}\n`);
}
