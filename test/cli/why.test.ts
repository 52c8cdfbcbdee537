import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatMoney, paybackMarginOf } from '../../src/cli/commands/why.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { waitInWords } from '../../src/controller/explain.js';
import { catalog, CPU_SMALL, jobSpec, rig, type Rig } from '../controller/controller-fixtures.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise why` as users run it (the built CLI in a subprocess) against a real controller's API: a job placed,
 * then moved because its instance was drained; a second job kept waiting by a quota.
 */

const ADMIN = 'admin-token-cli-why-0123456789abcdef';

let r: Rig;
let server: ApiServer;

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN });
}

beforeAll(async () => {
  ensureBuiltCli();
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  r = rig({ caps: { quotas: [{ group: 'standard', maxVcpus: 4 }] } });
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  r.controller.submit(jobSpec('moved', CPU_SMALL), 'research');
  r.controller.submit(jobSpec('waits', CPU_SMALL), 'research');
  await r.controller.runRound('test');
  r.clock.advance(600);
  r.controller.drain('inst-1');
  await r.controller.runRound('drain');
}, 240_000);

afterAll(async () => {
  await server?.close();
});

describe('fleetwise why (CLI subprocess)', () => {
  it('leads with the reason in words: moved because its instance was drained, then placed', async () => {
    const out = await cli(['why', 'job-1']);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const lines = out.stdout.split('\n');
    expect(lines[0]).toMatch(/^job-1: (starting|running)$/);
    // Where it runs now and how that was bought (this controller buys no spot: nothing says why not).
    expect(lines[1]).toBe('market: inst-2 (c7i.xlarge) on demand');
    expect(lines[2]).toMatch(
      /^round 2 at \S+ \S+: moved to inst-2 \(c7i\.xlarge, new\) because inst-1 was drained$/,
    );
    expect(out.stdout).toMatch(/^round 1 at \S+ \S+: placed on inst-1 \(c7i\.xlarge, new\)$/m);
  });

  it('gives the chosen plan’s numbers once per round, candidates in one table, units explained once', async () => {
    const out = await cli(['why', 'job-1']);
    // One line of the chosen plan's numbers per round, T as a duration.
    expect(out.stdout).toMatch(
      /^ {2}plan \S+ \(of \d candidates\): saving \$\d+\.\d\d\/h, migration \$\d+\.\d\d, (time \$\d+\.\d\d, )?net -?\$\d+\.\d\d over T = \d+(s|m\d\ds|h\d\dm)$/m,
    );
    // The candidates as one table with a header, the chosen one marked.
    expect(out.stdout).toMatch(/^ {4} {3}candidates\s+saving\/h\s+migration\s+(time\s+)?net$/m);
    // Candidates with the same numbers share a row: here nothing can be repacked, so all four do.
    expect(out.stdout).toMatch(/^ {4}→ {2}stay, partial, full, full-standalone +\$/m);
    expect(out.stdout).not.toContain('$-0.00');
    expect(out.stdout).not.toMatch(/— stay: saving/); // the scheduler's raw reason is not repeated
    // T and the payback margin are explained once, at the end.
    expect(out.stdout.match(/^T: the horizon/gm)).toHaveLength(1);
    expect(
      out.stdout.match(/^net: saving × T − 8 × migration( − time)?; payback margin ×8: /gm),
    ).toHaveLength(1);
    // The default prices are packed, and the legend says so.
    expect(out.stdout).toMatch(/^saving\/h: .* at packed prices .*θ = 0\.7/m);
  });

  it('says in words why a job waits, one entry for the rounds that say the same', async () => {
    const out = await cli(['why', 'job-2']);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(
      /^rounds 1–2 \(2\), last at \S+ \S+: kept waiting: admitting it now would break quota standard maxVcpus \(position 1 in its queue\)$/m,
    );
  });

  it('--json keeps the decision records', async () => {
    const out = await cli(['why', 'job-1', '--json']);
    const parsed = JSON.parse(out.stdout) as {
      records: { summary: string; decision: { candidates: unknown[] } }[];
    };
    expect(parsed.records[0]?.summary).toBe('moved to inst-2 (c7i.xlarge, new) because inst-1 was drained');
    expect(parsed.records[0]?.decision.candidates.length).toBeGreaterThan(1);
  });
});

describe('why helpers', () => {
  it('formats money without a negative zero', () => {
    expect(formatMoney(-0.001)).toBe('$0.00');
    expect(formatMoney(-0.004999)).toBe('$0.00');
    expect(formatMoney(-0.126)).toBe('-$0.13');
    expect(formatMoney(3.5)).toBe('$3.50');
  });

  it("reads Eva's payback margin from its reason (1 without a mark)", () => {
    expect(
      paybackMarginOf({
        reason: 'chose stay — stay: saving $0.00/h over T=600 s, migration $0.00 ×8, net $0.00',
      }),
    ).toBe(8);
    expect(
      paybackMarginOf({
        reason: 'only candidate (stay: saving $0.00/h over T=600 s, migration $0.00, net $0.00)',
      }),
    ).toBe(1);
    expect(paybackMarginOf({})).toBe(1);
    // The record's own field wins over the reason text.
    expect(paybackMarginOf({ paybackMargin: 4, reason: 'migration $0.12 ×8' })).toBe(4);
  });
});

describe('waiting reasons in words', () => {
  it('reads the queue’s and the caps’ waiting entries', () => {
    expect(waitInWords('queue small: class-share, position 2')).toBe(
      'class small is at its share of the capped capacity (position 2 in its queue)',
    );
    expect(waitInWords('queue large: never-fits')).toMatch(/^it can never run: .*class large's maxShare$/);
    expect(waitInWords('maxCostPerHour')).toBe('placing it would break the cap maxCostPerHour');
    expect(waitInWords('queue all: caps, position 1', 'maxInstances')).toBe(
      'admitting it now would break maxInstances (position 1 in its queue)',
    );
  });

  it('names what a job that never fits breaks, as its recorded cap says', () => {
    expect(waitInWords('queue all: never-fits', 'maxInstances')).toBe(
      'it can never run: alone it breaks maxInstances',
    );
    expect(waitInWords('queue all: never-fits', 'quota standard maxVcpus')).toBe(
      'it can never run: alone it breaks quota standard maxVcpus',
    );
    expect(waitInWords('queue large: never-fits', 'class large maxShare')).toBe(
      "it can never run: it needs more than class large's maxShare",
    );
    expect(waitInWords('queue all: never-fits', 'no instance type')).toBe(
      'it can never run: no instance type of the catalog can host one of its tasks',
    );
  });
});
