import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import { parseEvaTrace } from '../../../src/sim/traces/eva-json.js';
import { evaJson } from './fixtures.js';

describe('Eva JSON traces (digest §5.2, §5.3)', () => {
  const trace = parseEvaTrace(evaJson, 'pai_200.json');

  it('parses pai_200 into 200 single-task jobs: 181 with 1 GPU, 19 with none', () => {
    expect(trace.jobs).toHaveLength(200);
    expect(trace.jobs.every((j) => j.tasks.length === 1)).toBe(true);
    const gpus = trace.jobs.map((j) => j.tasks[0]?.demand.any?.[0]);
    expect(gpus.filter((g) => g === 1)).toHaveLength(181);
    expect(gpus.filter((g) => g === 0)).toHaveLength(19);
  });

  it('keeps the first job exactly: resnet18[0] at 960 s, 12,430 s, any [1, 12, 16]', () => {
    const first = trace.jobs[0];
    expect(first).toMatchObject({
      id: '0',
      name: 'resnet18[0]',
      workload: 'resnet18',
      arrivalSeconds: 960,
      durationSeconds: 12430,
      initDelaySeconds: 80,
      fullThroughput: 2.1,
      totalIterations: 26103,
    });
    expect(first?.tasks[0]).toEqual({
      name: 'node0',
      demand: { any: [1, 12, 16] },
      shmSizeGiB: 4,
      imageId: '7',
      fetchDelaySeconds: 1,
      buildImageDelaySeconds: 10,
      killDelaySeconds: 1,
      uploadDelaySeconds: 1,
    });
  });

  it('derives workloads from the name before [ and orders jobs by arrival', () => {
    const counts = new Map<string, number>();
    for (const j of trace.jobs) counts.set(j.workload, (counts.get(j.workload) ?? 0) + 1);
    expect(Object.fromEntries(counts)).toEqual({
      resnet18: 11,
      sage: 15,
      gcn: 14,
      cyclegan: 74,
      vit: 38,
      openfoam: 18,
      a3c: 17,
      seq: 7,
      gpt2: 6,
    });
    const arrivals = trace.jobs.map((j) => j.arrivalSeconds);
    expect(arrivals).toEqual([...arrivals].sort((a, b) => a - b));
    expect(arrivals.at(-1)).toBe(229743);
  });

  it('names the file, the job key and the field of every bad value', () => {
    const json = JSON.parse(evaJson) as Record<
      string,
      { arrival_time: unknown; tasks: Record<string, { demand: { any: number[] } }> }
    >;
    (json['17'] as { tasks: Record<string, { demand: { any: number[] } }> }).tasks['17']!.demand.any[1] = -1;
    json['3']!.arrival_time = 'soon';
    try {
      parseEvaTrace(JSON.stringify(json), 'pai_200.json');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      const message = (e as Error).message;
      expect(message).toMatch(/^pai_200\.json: /);
      expect(message).toContain('job 17: tasks.17.demand.any.1:');
      expect(message).toContain('job 3: arrival_time:');
    }
  });

  it('rejects invalid JSON, non-object roots and empty traces naming the file', () => {
    expect(() => parseEvaTrace('{"0": ', 't.json')).toThrow(/^t\.json: not valid JSON/);
    expect(() => parseEvaTrace('[]', 't.json')).toThrow(/^t\.json: \(root\): expected an object/);
    expect(() => parseEvaTrace('{}', 't.json')).toThrow(/t\.json: \(root\): the trace has no jobs/);
    expect(() => parseEvaTrace('{"a": {"name": "x"}}', 't.json')).toThrow(/job a: arrival_time:/);
  });
});
