import { describe, expect, it } from 'vitest';
import {
  CapacityErrorCache,
  DEFAULT_CAPACITY_ERROR_TTL_SECONDS,
} from '../../../src/cloud/aws/capacity-error-cache.js';

describe('CapacityErrorCache', () => {
  it('remembers a refusal per (type, zone) for the TTL, 180 s by default as in Karpenter', () => {
    expect(DEFAULT_CAPACITY_ERROR_TTL_SECONDS).toBe(180);
    let nowMs = 0;
    const cache = new CapacityErrorCache(undefined, () => nowMs);
    cache.markUnavailable('p3.8xlarge', 'us-east-1a');
    expect(cache.isUnavailable('p3.8xlarge', 'us-east-1a')).toBe(true);
    expect(cache.isUnavailable('p3.8xlarge', 'us-east-1b')).toBe(false);
    expect(cache.isUnavailable('p3.2xlarge', 'us-east-1a')).toBe(false);
    nowMs = 179_999;
    expect(cache.isUnavailable('p3.8xlarge', 'us-east-1a')).toBe(true);
    nowMs = 180_000;
    expect(cache.isUnavailable('p3.8xlarge', 'us-east-1a')).toBe(false);
  });

  it('extends the window when a zone refuses again', () => {
    let nowMs = 0;
    const cache = new CapacityErrorCache(10, () => nowMs);
    cache.markUnavailable('c7i.large', 'z');
    nowMs = 8_000;
    cache.markUnavailable('c7i.large', 'z');
    nowMs = 15_000;
    expect(cache.isUnavailable('c7i.large', 'z')).toBe(true);
    nowMs = 18_000;
    expect(cache.isUnavailable('c7i.large', 'z')).toBe(false);
  });

  it('keeps spot and on-demand apart: a refusal in one market says nothing of the other', () => {
    const cache = new CapacityErrorCache(60, () => 0);
    cache.markUnavailable('c7i.large', 'z', 'spot');
    expect(cache.isUnavailable('c7i.large', 'z', 'spot')).toBe(true);
    expect(cache.isUnavailable('c7i.large', 'z', 'on-demand')).toBe(false);
    expect(cache.isUnavailable('c7i.large', 'z')).toBe(false);
    cache.markUnavailable('c7i.large', 'z');
    expect(cache.isUnavailable('c7i.large', 'z', 'on-demand')).toBe(true);
  });

  it('never remembers with a zero TTL', () => {
    const cache = new CapacityErrorCache(0, () => 5);
    cache.markUnavailable('c7i.large', 'z');
    expect(cache.isUnavailable('c7i.large', 'z')).toBe(false);
  });
});
