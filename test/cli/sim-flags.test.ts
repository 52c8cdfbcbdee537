import { describe, expect, it } from 'vitest';
import { parseQuotaFlag } from '../../src/cli/commands/simulate.js';
import { flagName, inferFormat } from '../../src/cli/commands/sim-flags.js';
import { ValidationError } from '../../src/core/validation.js';

describe('simulate/tune flag parsing', () => {
  it('names option fields as their flags', () => {
    expect(flagName('capDollarsPerHour')).toBe('--cap-dollars-per-hour');
    expect(flagName('jobs')).toBe('--jobs');
  });

  it('parses --quota group:vcpus=N,gpus=M', () => {
    expect(parseQuotaFlag('p:gpus=16')).toEqual({ group: 'p', maxGpus: 16 });
    expect(parseQuotaFlag(' Standard : vcpus=256 , gpus=0 ')).toEqual({
      group: 'standard',
      maxVcpus: 256,
      maxGpus: 0,
    });
  });

  it('rejects a malformed --quota, naming the flag and the bad part', () => {
    for (const bad of ['p', 'p:gpus', 'p:gpus=x', 'p:cpus=4', ':vcpus=4']) {
      const error = (() => {
        try {
          parseQuotaFlag(bad);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error, bad).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe('--quota');
      expect((error as ValidationError).problems[0]).toContain(bad.trim());
    }
  });

  it('infers the trace format from the extension, or says to give --format', () => {
    expect(inferFormat(undefined)).toBe('synthetic');
    expect(inferFormat('t.JSON')).toBe('eva');
    expect(inferFormat('pods.csv')).toBe('alibaba');
    expect(() => inferFormat('trace.txt')).toThrow(/--format/);
  });
});
