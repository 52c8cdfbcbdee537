import { describe, expect, it } from 'vitest';
import { parseStoreLocation } from '../../src/storage/open-object-store.js';

describe('parseStoreLocation', () => {
  it.each([
    ['s3://bucket', { kind: 's3', bucket: 'bucket', prefix: '' }],
    ['s3://bucket/', { kind: 's3', bucket: 'bucket', prefix: '' }],
    ['s3://my.bucket-1/a/b', { kind: 's3', bucket: 'my.bucket-1', prefix: 'a/b/' }],
    ['s3://bucket//a//b/', { kind: 's3', bucket: 'bucket', prefix: 'a/b/' }],
    ['relative/dir', { kind: 'fs', root: '/srv/relative/dir' }],
    ['/abs/dir', { kind: 'fs', root: '/abs/dir' }],
    ['file:///abs/dir', { kind: 'fs', root: '/abs/dir' }],
  ])('parses %s', (url, expected) => {
    expect(parseStoreLocation(url, '/srv')).toEqual(expected);
  });

  it.each([
    ['', /empty/],
    ['s3://Bad_Bucket/x', /not a valid S3 bucket name/],
    ['s3://ab', /not a valid S3 bucket name/],
    ['s3://bucket/../x', /"\." and "\.\." are not allowed/],
    ['gs://bucket/x', /unsupported scheme/],
  ])('rejects %j', (url, reason) => {
    expect(() => parseStoreLocation(url)).toThrow(reason);
  });
});
