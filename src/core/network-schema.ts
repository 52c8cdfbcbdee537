import { z } from 'zod';
import {
  LATENCY_PRESETS,
  type LatencyPoint,
  type LatencySensitivity,
  type NetworkDeclaration,
} from './network.js';

/**
 * The zod schema of a job's `network:` declaration, shared by the controller's job spec, fleetwise traces and the
 * simulator's configuration, so each writes it and is told about it alike: every problem names its field.
 */

/** Points of a user table at most (the paper tabulates 101). */
export const MAX_LATENCY_POINTS = 1000;
/** A latency a table may reach, in µs: 100 ms, far beyond any zone-to-zone round trip. */
export const MAX_TABLE_LATENCY_MICROSECONDS = 100_000;
/**
 * The lowest relative performance a table may give: a 100× slowdown (NoMora's curves stay above 0.1 on their range).
 * Below it a job placed badly all but stops, and a simulation ends at its time limit with the job unfinished.
 */
export const MIN_TABLE_PERFORMANCE = 0.01;

const SENSITIVITY_NAMES = ['none', ...LATENCY_PRESETS] as const;
const SENSITIVITY_RULE = `expected ${SENSITIVITY_NAMES.join(', ')} or a table of [latencyMicroseconds, relativePerformance] points`;

const POINT_JSON_SCHEMA = {
  type: 'array',
  items: { type: 'number', minimum: 0 },
  minItems: 2,
  maxItems: 2,
  description: `[latencyMicroseconds, relativePerformance in [${MIN_TABLE_PERFORMANCE}, 1]]`,
} as const;

/**
 * `none`, a preset name, or a table of points with increasing latencies and performances in [0.01, 1] that do not
 * rise from point to point (`current: false`, the rules a controller accepted declarations under before: performances
 * in (0, 1], in any order). Parsed by hand (like a task's demand) so that a bad point is named by its index rather
 * than drowned in a union's alternatives.
 */
function sensitivitySchema(current: boolean) {
  return z
    .unknown()
    .transform((value, ctx): LatencySensitivity => {
      if (typeof value === 'string') {
        if ((SENSITIVITY_NAMES as readonly string[]).includes(value))
          return value as (typeof SENSITIVITY_NAMES)[number];
        ctx.addIssue({ code: 'custom', message: `unknown curve "${value}": ${SENSITIVITY_RULE}` });
        return z.NEVER;
      }
      if (!Array.isArray(value)) {
        ctx.addIssue({ code: 'custom', message: SENSITIVITY_RULE });
        return z.NEVER;
      }
      if (value.length === 0 || value.length > MAX_LATENCY_POINTS) {
        ctx.addIssue({ code: 'custom', message: `a table needs 1 to ${MAX_LATENCY_POINTS} points` });
        return z.NEVER;
      }
      const points: LatencyPoint[] = [];
      let failed = false;
      value.forEach((point: unknown, i) => {
        const problem = pointProblem(point, points[points.length - 1], current);
        if (problem !== undefined) {
          ctx.addIssue({ code: 'custom', message: problem, path: [i] });
          failed = true;
        } else points.push([(point as number[])[0] as number, (point as number[])[1] as number]);
      });
      return failed ? z.NEVER : points;
    })
    .meta({
      description:
        "How the job's performance falls with the round trip between its tasks (NoMora's curves): none, memcached, " +
        'strads, spark, tensorflow, or a table of [latencyMicroseconds, relativePerformance] points',
      oneOf: [
        { type: 'string', enum: [...SENSITIVITY_NAMES] },
        { type: 'array', items: POINT_JSON_SCHEMA, minItems: 1, maxItems: MAX_LATENCY_POINTS },
      ],
    });
}

function pointProblem(
  point: unknown,
  previous: LatencyPoint | undefined,
  current: boolean,
): string | undefined {
  if (!Array.isArray(point) || point.length !== 2 || !point.every((x) => typeof x === 'number'))
    return 'expected [latencyMicroseconds, relativePerformance], e.g. [100, 0.8]';
  const [x, p] = point as [number, number];
  if (!(Number.isFinite(x) && x >= 0 && x <= MAX_TABLE_LATENCY_MICROSECONDS))
    return `latency must be 0 to ${MAX_TABLE_LATENCY_MICROSECONDS} µs, got ${x}`;
  if (!(p > 0 && p <= 1)) return `relative performance must be in (0, 1], got ${p}`;
  if (current && p < MIN_TABLE_PERFORMANCE)
    return (
      `relative performance must be at least ${MIN_TABLE_PERFORMANCE} (a ${1 / MIN_TABLE_PERFORMANCE}× slowdown), ` +
      `got ${p}: below it a job placed badly all but stops`
    );
  if (previous !== undefined && !(x > previous[0]))
    return `latencies must increase from point to point (${x} µs after ${previous[0]} µs)`;
  // A job faster the farther apart its tasks are would have NoMora spread it across zones on purpose.
  if (current && previous !== undefined && p > previous[1])
    return (
      `relative performance must not rise with latency: ${p} at ${x} µs is above ${previous[1]} at ` +
      `${previous[0]} µs`
    );
  return undefined;
}

function declarationSchema(current: boolean) {
  return z
    .strictObject({
      sensitivity: sensitivitySchema(current).default('none'),
      pattern: z
        .enum(['star', 'all-to-all'], { error: 'expected star or all-to-all' })
        .describe(
          "star: the root's round trip to each other task bounds the job (NoMora); all-to-all: the worst pair does " +
            '(e.g. ring all-reduce)',
        )
        .default('star'),
      root: z
        .string()
        .min(1)
        .describe('The root task (server, master, parameter server) by name; default the first task')
        .optional(),
      gibPerHour: z
        .number()
        .finite()
        .nonnegative('must be 0 or more GiB per hour')
        .max(1_000_000, 'at most 1000000 GiB per hour')
        .describe("GiB per hour the job's tasks exchange; what crosses zones is billed")
        .default(0),
    })
    .describe(
      "Where the job's tasks should be on the network: its latency sensitivity, communication pattern, root task " +
        'and traffic (NoMora latency-aware placement)',
    );
}

/** A declaration as written now: a table's performances at least MIN_TABLE_PERFORMANCE, none above the one before. */
export const networkDeclarationSchema = declarationSchema(true);

/**
 * A declaration a controller accepted before tables had a floor and fell with latency (read back from its job
 * archive): performances in (0, 1] in any order, the rules it was accepted under, so the job restores as it was
 * accepted. A new one keeps both rules.
 */
export const acceptedNetworkDeclarationSchema = declarationSchema(false);

export type NetworkDeclarationInput = z.input<typeof networkDeclarationSchema>;

/** The declaration as the rest of fleetwise holds it. */
export function toNetworkDeclaration(raw: z.output<typeof networkDeclarationSchema>): NetworkDeclaration {
  return {
    sensitivity: raw.sensitivity,
    pattern: raw.pattern,
    ...(raw.root === undefined ? {} : { rootTask: raw.root }),
    gibPerHour: raw.gibPerHour,
  };
}

/**
 * The declaration in its written form (what traces and specs store), readable by `networkDeclarationSchema`: a table
 * point a controller accepted before tables had a floor is raised to it, and one above the point before lowered to
 * that point's, so that what export-trace writes of such a job replays (its slowdown there capped at
 * 1 / MIN_TABLE_PERFORMANCE, and never smaller farther away).
 */
export function networkDeclarationInput(n: NetworkDeclaration): NetworkDeclarationInput {
  return {
    sensitivity: typeof n.sensitivity === 'string' ? n.sensitivity : writtenTable(n.sensitivity),
    pattern: n.pattern,
    ...(n.rootTask === undefined ? {} : { root: n.rootTask }),
    gibPerHour: n.gibPerHour,
  };
}

/** A table as `networkDeclarationSchema` accepts it: each performance floored, then at most the one before. */
function writtenTable(points: readonly LatencyPoint[]): LatencyPoint[] {
  let previous = 1;
  return points.map(([x, p]): LatencyPoint => {
    previous = Math.min(previous, Math.max(p, MIN_TABLE_PERFORMANCE));
    return [x, previous];
  });
}
