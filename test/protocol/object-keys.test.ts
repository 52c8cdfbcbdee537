import { describe, expect, it } from 'vitest';
import {
  backupSecretsKey,
  buildContextKey,
  checkpointKeys,
  checkpointPrefix,
  costReportKeys,
  jobArchiveKeys,
  jobArchivePrefix,
  latestBackupKey,
  LATEST_REPORT_KEY,
  parseCostReportKey,
  parseBuildContextRef,
  parseCheckpointKey,
  parseJobArchiveKey,
  parseStateBackupKey,
  REPORTS_PREFIX,
  stateBackupKeys,
  stateBackupPrefix,
  taskExitKey,
  taskLogKey,
  taskLogPrefix,
} from '../../src/protocol/object-keys.js';
import { assertValidKey } from '../../src/storage/object-key.js';

const REF = { jobId: 'job-7', taskId: 'job-7.0' };
const SHA = 'ab'.repeat(32);

describe('object keys', () => {
  it('lays checkpoints out per task and zero-pads the seq so key order is seq order', () => {
    expect(checkpointPrefix(REF)).toBe('checkpoints/job-7/job-7.0/');
    expect(checkpointKeys(REF, 12)).toEqual({
      data: 'checkpoints/job-7/job-7.0/00000012/data.tar',
      manifest: 'checkpoints/job-7/job-7.0/00000012/manifest.json',
    });
    expect(checkpointKeys(REF, 9).data < checkpointKeys(REF, 10).data).toBe(true);
  });

  it("keeps a task's exit per attempt beside its checkpoints, where checkpoint listings do not take it for one", () => {
    expect(taskExitKey(REF, 2)).toBe('checkpoints/job-7/job-7.0/exit-2.json');
    expect(parseCheckpointKey(REF, taskExitKey(REF, 2))).toBeUndefined();
    expect(() => taskExitKey(REF, 0)).toThrow(/positive integer/);
    assertValidKey(taskExitKey(REF, 1));
  });

  it("parses back its own checkpoint keys, and nothing else under (or beside) the task's prefix", () => {
    const keys = checkpointKeys(REF, 3);
    expect(parseCheckpointKey(REF, keys.data)).toEqual({ seq: 3, part: 'data' });
    expect(parseCheckpointKey(REF, keys.manifest)).toEqual({ seq: 3, part: 'manifest' });
    expect(parseCheckpointKey(REF, 'checkpoints/job-7/job-7.0/00000003/other.bin')).toBeUndefined();
    expect(parseCheckpointKey({ ...REF, taskId: 'job-7.1' }, keys.data)).toBeUndefined();
    expect(parseCheckpointKey(REF, 'logs/job-7/x.log')).toBeUndefined();
  });

  it('names task logs per job, in start order', () => {
    expect(taskLogPrefix('job-7')).toBe('logs/job-7/');
    const early = taskLogKey('job-7', 'job-7.0', 999.7, 'inst-1');
    expect(early).toBe('logs/job-7/00000000000999-job-7.0-inst-1.log');
    expect(early < taskLogKey('job-7', 'job-7.0', 1000, 'inst-2')).toBe(true);
  });

  it('addresses build contexts by content, and recognises them at the end of a store reference', () => {
    expect(buildContextKey(SHA, 'gzip')).toBe(`contexts/${SHA}.tar.gz`);
    expect(buildContextKey(SHA, 'tar')).toBe(`contexts/${SHA}.tar`);
    expect(() => buildContextKey('not-a-hash', 'tar')).toThrow(/sha256/);
    expect(parseBuildContextRef(`s3://bucket/cluster/${buildContextKey(SHA, 'gzip')}`)).toEqual({
      key: `contexts/${SHA}.tar.gz`,
      sha256: SHA,
      encoding: 'gzip',
    });
    expect(parseBuildContextRef(buildContextKey(SHA, 'tar'))?.encoding).toBe('tar');
    expect(parseBuildContextRef('./examples/counter')).toBeUndefined();
    expect(parseBuildContextRef(`/srv/notcontexts/${SHA}.tar`)).toBeUndefined();
  });

  it('keeps cost reports under reports/, stamped, beside latest.json', () => {
    expect(costReportKeys('2026-11-22T00-10-05.123Z')).toEqual({
      json: 'reports/costs-2026-11-22T00-10-05.123Z.json',
      csv: 'reports/costs-2026-11-22T00-10-05.123Z.csv',
      html: 'reports/costs-2026-11-22T00-10-05.123Z.html',
    });
    expect(LATEST_REPORT_KEY.startsWith(REPORTS_PREFIX)).toBe(true);
    for (const key of Object.values(costReportKeys('2026-11-22T00-10-05.123Z')))
      expect(parseCostReportKey(key)).toEqual({ stamp: '2026-11-22T00-10-05.123Z' });
    expect(parseCostReportKey(LATEST_REPORT_KEY)).toBeUndefined();
    expect(parseCostReportKey('reports/costs-x.pdf')).toBeUndefined();
    expect(parseCostReportKey('backups/c/costs-x.json')).toBeUndefined();
  });

  it('lays backups out per cluster, seq zero-padded so key order is seq order, and parses them back', () => {
    expect(stateBackupKeys('prod', 42)).toEqual({
      data: 'backups/prod/state-0000000042.db.gz',
      manifest: 'backups/prod/state-0000000042.json',
    });
    expect(stateBackupKeys('prod', 9).data < stateBackupKeys('prod', 10).data).toBe(true);
    expect(latestBackupKey('prod').startsWith(stateBackupPrefix('prod'))).toBe(true);
    expect(parseStateBackupKey(stateBackupKeys('prod', 42).manifest)).toEqual({
      cluster: 'prod',
      seq: 42,
      part: 'manifest',
    });
    expect(parseStateBackupKey(`s3://b/p/${stateBackupKeys('a-b', 7).data}`)).toEqual({
      cluster: 'a-b',
      seq: 7,
      part: 'data',
    });
    for (const other of [latestBackupKey('prod'), backupSecretsKey('prod'), 'backups/prod/state-0.db.gz'])
      expect(parseStateBackupKey(other)).toBeUndefined();
    expect(() => stateBackupKeys('prod', 0)).toThrow(/positive integer/);
  });

  it("keeps each archived job's spec and end under its cluster, and parses them back", () => {
    expect(jobArchiveKeys('prod', 'job-7')).toEqual({
      spec: 'jobs/prod/job-7/spec.json',
      end: 'jobs/prod/job-7/end.json',
    });
    expect(parseJobArchiveKey('prod', 'jobs/prod/job-7/end.json')).toEqual({ jobId: 'job-7', part: 'end' });
    expect(parseJobArchiveKey('prod', jobArchiveKeys('prod', 'job-7').spec)?.part).toBe('spec');
    expect(parseJobArchiveKey('other', jobArchiveKeys('prod', 'job-7').spec)).toBeUndefined();
    expect(parseJobArchiveKey('prod', `${jobArchivePrefix('prod')}job-7/notes.txt`)).toBeUndefined();
  });

  it('builds only keys every store accepts', () => {
    for (const key of [
      ...Object.values(checkpointKeys(REF, 1)),
      taskLogKey('job-7', 'job-7.0', 0, 'i-0123456789abcdef0'),
      buildContextKey(SHA, 'gzip'),
      ...Object.values(costReportKeys('2026-11-22T00-10-05.123Z')),
      LATEST_REPORT_KEY,
      ...Object.values(stateBackupKeys('prod', 1)),
      latestBackupKey('prod'),
      backupSecretsKey('prod'),
      ...Object.values(jobArchiveKeys('prod', 'job-1')),
    ])
      expect(() => assertValidKey(key)).not.toThrow();
  });
});
