import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import {
  baseWorkloadOf,
  findWorkload,
  parseWorkloadCatalog,
  singleTaskWorkloads,
} from '../../../src/sim/traces/workloads.js';
import { workloadCatalog } from './fixtures.js';

describe('workload catalog (digest §4; catalog values win)', () => {
  it('has the 10 catalog entries and 9 single-task workloads in file order', () => {
    expect(workloadCatalog.workloads.map((w) => w.key)).toEqual([
      'a3c',
      'cyclegan',
      'gcn',
      'gpt2',
      'openfoam',
      'sage',
      'seq',
      'resnet18',
      'vit',
      'two_node_Resnet18',
    ]);
    expect(singleTaskWorkloads(workloadCatalog).map((w) => w.name)).toEqual([
      'a3c',
      'cyclegan',
      'gcn',
      'gpt2',
      'openfoam',
      'sage',
      'seq',
      'resnet18',
      'vit',
    ]);
  });

  it('reads demand per family, throughput, iterations and delays as in the catalog', () => {
    const a3c = findWorkload(workloadCatalog, 'a3c');
    expect(a3c.demand).toEqual({ p3: [0, 10, 8], c7i: [0, 4, 8], r7i: [0, 4, 8] });
    expect(a3c.fullThroughput).toBeCloseTo(12.7362, 4); // catalog value, not config.json's 14.79
    expect(a3c.initDelaySeconds).toBe(10);
    const gcn = findWorkload(workloadCatalog, 'gcn');
    expect([gcn.totalIterations, gcn.durationSeconds, gcn.tasks[0]?.shmSizeGiB]).toEqual([1000, 6244, 8]);
    const gpt2 = findWorkload(workloadCatalog, 'gpt2');
    expect(gpt2.demand).toEqual({ any: [4, 4, 10] });
    expect([
      gpt2.initDelaySeconds,
      gpt2.fetchDelaySeconds,
      gpt2.buildImageDelaySeconds,
      gpt2.uploadDelaySeconds,
      gpt2.killDelaySeconds,
    ]).toEqual([15, 10, 10, 20, 1]);
    const twoNode = findWorkload(workloadCatalog, 'two_node_Resnet18');
    expect([twoNode.name, twoNode.tasks.length, twoNode.fullThroughput]).toEqual(['resnet18', 2, 2.6]);
  });

  it('numbers images like Eva (counter over catalog tasks), so resnet18 is image 7 as in pai_200', () => {
    expect(findWorkload(workloadCatalog, 'resnet18').imageId).toBe('7');
    expect(findWorkload(workloadCatalog, 'sage').imageId).toBe('5');
  });

  it('rejects a malformed catalog naming the workload and field', () => {
    const bad = {
      a3c: {
        name: 'a3c',
        tasks: [],
        total_iters: 10,
        support_throughput_aware: true,
        duration: 1,
        init_delay: 1,
        fetch_delay: 1,
        build_image_delay: 1,
        kill_delay: 1,
        upload_delay: -1,
      },
    };
    try {
      parseWorkloadCatalog(bad, 'wc.json');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      expect((e as Error).message).toMatch(/^wc\.json: /);
      expect((e as Error).message).toContain('a3c.tasks:');
      expect((e as Error).message).toContain('a3c.upload_delay:');
    }
  });

  it('finds workloads by key or name and reduces job names to their base workload', () => {
    expect(() => findWorkload(workloadCatalog, 'bert')).toThrow(/unknown workload bert/);
    expect(baseWorkloadOf('cyclegan[3]')).toBe('cyclegan');
    expect(baseWorkloadOf('gpt2')).toBe('gpt2');
  });
});
