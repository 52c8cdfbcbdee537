import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { jobSpecComponents } from '../../src/controller/api/openapi-zod-components.js';
import { parseJobSpec, validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { buildSnapshot } from '../../src/controller/snapshot.js';
import type { JobRecord, TaskRecord } from '../../src/controller/state-store.js';
import { expandTasks } from '../../src/controller/job-spec/tasks.js';
import { ValidationError } from '../../src/core/validation.js';
import { specTraceJob } from '../../src/sim/controller-runtime/spec-trace.js';
import { traceJobSpec } from '../../src/sim/controller-runtime/trace-specs.js';
import { fleetwiseTrace, FLEETWISE_TRACE_FORMAT } from '../../src/sim/traces/fleetwise-json.js';

const catalog = loadCatalogFile();

const spec = (network: string, tasks = TWO_TASKS) => `
name: kv
team: infra
tasks:
${tasks}
${network}
`;
const TWO_TASKS = `  - name: server
    image: memcached:1.6
    demand: [0, 2, 4]
  - name: client
    replicas: 3
    image: mutilate:1
    demand: [0, 1, 2]`;

function problemsOf(text: string): readonly string[] {
  try {
    parseJobSpec(text, 'spec.yaml', catalog);
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected the spec to be rejected');
}

describe('job spec network:', () => {
  it('defaults: insensitive, star, rooted at the first task, no traffic', () => {
    expect(parseJobSpec(spec('network: {}'), 's', catalog).network).toEqual({
      sensitivity: 'none',
      pattern: 'star',
      gibPerHour: 0,
    });
    expect(parseJobSpec(spec(''), 's', catalog).network).toBeUndefined();
  });

  it('takes a preset, a pattern, a root by task name (a template with replicas: its first) and traffic', () => {
    const parsed = parseJobSpec(
      spec('network: { sensitivity: strads, pattern: all-to-all, root: client, gibPerHour: 12.5 }'),
      's',
      catalog,
    );
    expect(parsed.network).toEqual({
      sensitivity: 'strads',
      pattern: 'all-to-all',
      rootTask: 'client-0',
      gibPerHour: 12.5,
    });
    expect(parseJobSpec(spec('network: { root: client-2 }'), 's', catalog).network?.rootTask).toBe(
      'client-2',
    );
    expect(
      validateJobSpec(
        {
          name: 'kv',
          team: 'infra',
          tasks: [{ image: 'a', demand: [0, 1, 1] }],
          network: {
            sensitivity: [
              [0, 1],
              [100, 0.8],
              [500, 0.3],
            ],
          },
        },
        'POST /jobs',
        catalog,
      ).network?.sensitivity,
    ).toEqual([
      [0, 1],
      [100, 0.8],
      [500, 0.3],
    ]);
  });

  it('names the field and why for every mistake, with its line', () => {
    expect(problemsOf(spec('network: { sensitivity: memcache }'))).toEqual([
      'network.sensitivity: unknown curve "memcache": expected none, memcached, strads, spark, tensorflow or a table of [latencyMicroseconds, relativePerformance] points (line 12)',
    ]);
    expect(problemsOf(spec('network: { sensitivity: [[0, 1], [0, 0.5], [10, 1.5]] }'))).toEqual([
      'network.sensitivity.1: latencies must increase from point to point (0 µs after 0 µs) (line 12)',
      'network.sensitivity.2: relative performance must be in (0, 1], got 1.5 (line 12)',
    ]);
    expect(problemsOf(spec('network: { sensitivity: [[10]] }'))[0]).toMatch(
      /^network\.sensitivity\.0: expected \[latencyMicroseconds, relativePerformance\]/,
    );
    expect(problemsOf(spec('network: { pattern: ring }'))).toEqual([
      'network.pattern: expected star or all-to-all (line 12)',
    ]);
    expect(problemsOf(spec('network: { root: worker }'))).toEqual([
      'network.root: no task named worker (tasks: server, client-0, client-1, client-2) (line 12)',
    ]);
    expect(problemsOf(spec('network: { gibPerHour: -1 }'))).toEqual([
      'network.gibPerHour: must be 0 or more GiB per hour (line 12)',
    ]);
    expect(problemsOf(spec('network: { sensitivty: spark }'))[0]).toMatch(
      /^network\.sensitivty: unknown field, did you mean sensitivity\?/,
    );
  });

  it('refuses a new table below the performance floor, and reads one a controller accepted before it as it was', () => {
    const below = {
      name: 'kv',
      team: 'infra',
      tasks: [{ image: 'a', demand: [0, 1, 1] }],
      network: {
        sensitivity: [
          [0, 1],
          [500, 0.005],
        ],
      },
    };
    expect(() => validateJobSpec(below, 'POST /jobs', catalog)).toThrow(
      'network.sensitivity.1: relative performance must be at least 0.01 (a 100× slowdown), got 0.005: below it a ' +
        'job placed badly all but stops',
    );
    expect(
      validateJobSpec(below, 'archived spec of job-1', catalog, { accepted: true }).network?.sensitivity,
    ).toEqual([
      [0, 1],
      [500, 0.005],
    ]);
    // Only the floor is of the bound it was accepted under: a performance of 0 or above 1 never was accepted.
    const zero = { ...below, network: { sensitivity: [[0, 0]] } };
    expect(() => validateJobSpec(zero, 'archived spec of job-1', catalog, { accepted: true })).toThrow(
      'network.sensitivity.0: relative performance must be in (0, 1], got 0',
    );
  });

  it('is in the OpenAPI job spec, generated from the schema', () => {
    const job = jobSpecComponents()['JobSpec'] as { properties: Record<string, { properties?: object }> };
    expect(Object.keys(job.properties['network']?.properties ?? {})).toEqual([
      'sensitivity',
      'pattern',
      'root',
      'gibPerHour',
    ]);
  });

  it('reaches the scheduler with its root as a task id, and goes through fleetwise traces both ways', () => {
    const text = readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'memcached-loadtest.yaml'), 'utf8');
    const parsed = parseJobSpec(text, 'memcached-loadtest.yaml', catalog);
    const tasks: TaskRecord[] = expandTasks(parsed).map((t) => ({
      id: `j1.${t.index}`,
      jobId: 'j1',
      index: t.index,
      name: t.name,
      workloadKey: t.workloadKey,
      state: 'pending',
      updatedAtSeconds: 0,
    }));
    const job = {
      id: 'j1',
      spec: parsed,
      state: 'queued',
      submittedAtSeconds: 0,
      migrations: 0,
    } as unknown as JobRecord;
    const snapshot = buildSnapshot({
      jobs: [job],
      tasks,
      instances: [],
      pendingStarts: new Map(),
      runningSince: new Map(),
      preparedSince: new Map(),
      nowSeconds: 10,
    });
    expect(snapshot.jobs[0]?.network).toEqual({
      sensitivity: 'memcached',
      pattern: 'star',
      rootTaskId: 'j1.0',
      gibPerHour: 40,
    });
    const traced = fleetwiseTrace(
      {
        format: FLEETWISE_TRACE_FORMAT,
        jobs: [specTraceJob(parsed, { id: 'a', arrivalSeconds: 0, durationSeconds: 3600 })],
      },
      'trace.json',
    );
    expect(traced.jobs[0]?.network).toEqual({
      sensitivity: 'memcached',
      pattern: 'star',
      rootTask: 'server',
      gibPerHour: 40,
    });
    expect(traceJobSpec(traced.jobs[0] as never, new Map(), 1800).network).toEqual(traced.jobs[0]?.network);
  });
});
