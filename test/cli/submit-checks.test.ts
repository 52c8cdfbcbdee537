import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLED_CATALOG_PATH } from '../../src/cloud/catalog-file.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { Catalog } from '../../src/core/catalog.js';
import { catalog as bundled, rig, type Rig } from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * What `fleetwise submit` (a subprocess) checks before it submits anything, against a real controller's API over a
 * socket: every file is dry-run on the controller first, so a file it refuses (its team, its dependencies, its
 * catalog, a chain's waits) leaves none of the files before it submitted; demands fit by the controller's catalog, not
 * the bundled one; and problems name their line in the file whether or not it names its team.
 */

const ADMIN = 'admin-token-cli-submit-checks-0123456789abcdef';
const RESEARCH = 'team-token-cli-submit-checks-research-0123456789';

/** The controller's catalog: the bundled one without p3 and with an m7i type the bundled one lacks. */
const controllerCatalog: Catalog = {
  ...bundled,
  types: [
    ...bundled.types.filter((t) => t.family !== 'p3'),
    {
      name: 'm7i.large',
      family: 'm7i',
      capacity: [0, 2, 8],
      costPerHour: 0.1008,
      delays: (bundled.types[0] as Catalog['types'][number]).delays,
    },
  ],
};

let r: Rig;
let server: ApiServer;
let dir = '';

function cli(args: readonly string[], token = ADMIN): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: token });
}

function specFile(name: string, lines: readonly string[]): string {
  const file = join(dir, name);
  writeFileSync(file, [...lines, ''].join('\n'));
  return file;
}

/** A valid one-task spec of team research (no team line when `team` is null). */
function okSpec(name: string, extra: readonly string[] = [], team: string | null = 'research'): string {
  return specFile(`${name}.yaml`, [
    `name: ${name}`,
    ...(team === null ? [] : [`team: ${team}`]),
    ...extra,
    'tasks:',
    '  - image: busybox:latest',
    '    demand: { c7i: [0, 1, 2] }',
  ]);
}

const jobCount = (): number => r.store.listJobs().length;

beforeAll(async () => {
  ensureBuiltCli();
  r = rig({}, { catalog: controllerCatalog });
  r.store.addTeamToken('research', RESEARCH, 'test');
  server = await startApiServer(r.controller, {
    listen: '127.0.0.1:0',
    adminToken: ADMIN,
    catalog: controllerCatalog,
  });
  dir = mkdtempSync(join(tmpdir(), 'fleetwise-submit-checks-'));
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('fleetwise submit of several files', () => {
  it('submits none when the controller refuses a later one (its team, its dependencies), --chain too', async () => {
    const first = okSpec('first');
    const noTeam = okSpec('no-team', [], null);
    const unknownDependency = okSpec('unknown-dependency', ['dependsOn: [job-999]']);
    const before = jobCount();
    // The admin token submits for no team: a spec must name one.
    const teamless = await cli(['submit', first, noTeam]);
    expect(teamless.code, teamless.stderr).toBe(2);
    expect(teamless.stderr).toContain(`${noTeam}: POST /v1/jobs: the controller answered 400`);
    expect(teamless.stderr).toMatch(/team: required/);
    for (const chain of [[], ['--chain']]) {
      const refused = await cli(['submit', first, unknownDependency, ...chain]);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain(unknownDependency);
      expect(refused.stderr).toContain('dependsOn: no job job-999 of team research (line 3)');
      expect(refused.stderr).not.toContain('already submitted');
    }
    // A team token submits for its team only: a spec naming another is refused (403).
    const otherTeam = okSpec('other-team', [], 'vision');
    const forbidden = await cli(['submit', okSpec('token-team', [], null), otherTeam], RESEARCH);
    expect(forbidden.code, forbidden.stderr).toBe(1);
    expect(forbidden.stderr).toContain(`${otherTeam}: POST /v1/jobs: the controller answered 403`);
    expect(jobCount()).toBe(before);
    const both = await cli(['submit', first, okSpec('second'), '--json']);
    expect(both.code, both.stderr).toBe(0);
    expect(jobCount()).toBe(before + 2);
  });

  it('submits no step of a chain whose steps are of different teams', async () => {
    const before = jobCount();
    const research = okSpec('step-research');
    const vision = okSpec('step-vision', [], 'vision');
    const result = await cli(['submit', research, vision, '--chain']);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(
      `${vision} is for team vision, ${research} before it for team research: a job waits only for jobs of its own team`,
    );
    expect(jobCount()).toBe(before);
  });

  it("submits no step of a chain when a step after an array would wait for more than an array's limit", async () => {
    const before = jobCount();
    const big = okSpec('big', ['arrayProperties: { size: 1001 }']);
    const next = okSpec('next', ['arrayProperties: { size: 1000 }']);
    const result = await cli(['submit', big, next, '--chain']);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(
      `invalid input: ${next} (in the --chain it waits for all 1001 jobs of the array of ${big})`,
    );
    expect(result.stderr).toContain(
      'dependsOn: 1000 jobs each waiting for 1001 make 1001000 waits, at most 1000000',
    );
    expect(jobCount()).toBe(before);
    // --depends-on counts as well: 1000 jobs each waiting for 1000 of the array and one more.
    const deps = await cli(['submit', okSpec('one'), big, next, '--chain', '--depends-on', 'job-1']);
    expect(deps.code, deps.stderr).toBe(2);
    expect(deps.stderr).toContain('make 1002000 waits');
    expect(jobCount()).toBe(before);
  });
});

describe("fleetwise submit checks demands against the controller's catalog", () => {
  it('submits a family only the controller has, and refuses one only the bundled catalog has, naming its line', async () => {
    const m7i = specFile('m7i.yaml', [
      'name: m7i',
      'team: research',
      'tasks:',
      '  - image: busybox:latest',
      '    demand: { m7i: [0, 1, 2] }',
    ]);
    const accepted = await cli(['submit', m7i, '--json']);
    expect(accepted.code, accepted.stderr).toBe(0);
    const { id } = JSON.parse(accepted.stdout) as { id: string };
    expect(r.store.getJob(id)?.spec.tasks[0]?.demand).toEqual({ m7i: [0, 1, 2] });
    const p3 = specFile('p3.yaml', [
      'name: p3',
      'team: research',
      'tasks:',
      '  - image: busybox:latest',
      '    demand: { p3: [1, 4, 32] }',
    ]);
    const before = jobCount();
    const refused = await cli(['submit', okSpec('before-p3'), p3]);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(
      /tasks\.0\.demand\.p3: family p3 is not in the us-east-1 catalog .* \(line 5\)/,
    );
    expect(jobCount()).toBe(before);
    // --catalog checks against the catalog given as well, and says so.
    const given = await cli(['submit', m7i, '--catalog', BUNDLED_CATALOG_PATH]);
    expect(given.code, given.stderr).toBe(2);
    expect(given.stderr).toContain(
      `invalid input: ${m7i} (checked against --catalog ${BUNDLED_CATALOG_PATH}; the controller checks against its own)`,
    );
    expect(given.stderr).toMatch(/tasks\.0\.demand\.m7i: family m7i is not in .* \(line 5\)/);
    expect(jobCount()).toBe(before);
  });
});

describe('fleetwise submit names the line of a problem', () => {
  it('in a spec without team (a team token submits it) and with --array', async () => {
    const noTeam = specFile('bad-no-team.yaml', [
      'name: bad-no-team',
      'expectedDurationSeconds: 30 minutes',
      'tasks:',
      '  - image: busybox:latest',
      '    demand: { c7i: [0, 1, 2] }',
    ]);
    const message = 'expectedDurationSeconds: expected seconds or a duration';
    const byToken = await cli(['submit', noTeam], RESEARCH);
    expect(byToken.code, byToken.stderr).toBe(2);
    expect(byToken.stderr).toMatch(new RegExp(`${message}.* \\(line 2\\)`));
    const arrayed = await cli(['submit', noTeam, '--array', '3'], RESEARCH);
    expect(arrayed.code, arrayed.stderr).toBe(2);
    expect(arrayed.stderr).toMatch(new RegExp(`${message}.* \\(line 2\\)`));
    // The waits --array makes of the file's own dependencies: at the line of its dependsOn.
    const waits = specFile('waits.yaml', [
      'name: waits',
      'team: research',
      'tasks:',
      '  - image: busybox:latest',
      '    demand: { c7i: [0, 1, 2] }',
      `dependsOn: [${Array.from({ length: 200 }, (_, i) => `job-${i + 1}`).join(', ')}]`,
    ]);
    const tooMany = await cli(['submit', waits, '--array', '5001']);
    expect(tooMany.code, tooMany.stderr).toBe(2);
    expect(tooMany.stderr).toMatch(
      /dependsOn: 5001 jobs each waiting for 200 make 1000200 waits.* \(line 6\)/,
    );
  });
});
