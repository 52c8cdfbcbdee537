#!/usr/bin/env node
// Eva against every baseline on the 300-job conversions of the Alibaba trace, one seed after another: the figures by
// which eva's defaults (value of time, payback margin) are judged on traces they were not chosen on. For each seed it
// runs the built CLI (`npm run build` first) with `--json --parallel 1` (one run at a time: the machine is shared),
// and prints one row per seed, then the means and whether the targets hold:
//   - mean over the seeds of eva's cost / the cheapest baseline's cost on that seed ≤ 0.97;
//   - mean over the seeds of eva's mean JCT / No-Packing's ≤ 1.12;
//   - on no seed one baseline both cheaper and faster than eva.
// Every seed is printed, none is dropped. Options (all optional):
//   --seeds 21-30 | 21,22,25     which seeds (default 21-30)
//   --jobs 300                   jobs per conversion
//   --json                       print the rows and means as one JSON object instead of the table
//   -- <simulate flags>          passed to every simulate run as they are, e.g. -- --multi-task 0.5 --value-of-time 2
// Example: node scripts/frontier-seeds.mjs --seeds 21-30 -- --multi-task 0.5
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCHEDULERS = ['eva', 'no-packing', 'stratus', 'synergy', 'owl', 'karpenter', 'karpenter-balanced'];
const COST_TARGET = 0.97;
const JCT_TARGET = 1.12;
const cli = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

function fail(message) {
  process.stderr.write(`frontier-seeds: ${message}\n`);
  process.exit(2);
}

function parseSeeds(text) {
  const range = /^(\d+)-(\d+)$/.exec(text);
  if (range !== null) {
    const [lo, hi] = [Number(range[1]), Number(range[2])];
    if (hi < lo) fail(`--seeds ${text}: the range must go up`);
    return Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
  }
  const seeds = text.split(',').map(Number);
  if (seeds.some((s) => !Number.isInteger(s) || s < 0))
    fail(`--seeds ${text}: whole numbers ≥ 0, a-b or a,b,c`);
  return seeds;
}

function parseArgs(argv) {
  const dash = argv.indexOf('--');
  const own = dash < 0 ? argv : argv.slice(0, dash);
  const passed = dash < 0 ? [] : argv.slice(dash + 1);
  const options = { seeds: parseSeeds('21-30'), jobs: 300, json: false, passed };
  for (let i = 0; i < own.length; i++) {
    const flag = own[i];
    if (flag === '--json') options.json = true;
    else if (flag === '--seeds') options.seeds = parseSeeds(own[++i] ?? fail('--seeds needs a value'));
    else if (flag === '--jobs') {
      options.jobs = Number(own[++i]);
      if (!Number.isInteger(options.jobs) || options.jobs < 1) fail('--jobs: a whole number ≥ 1');
    } else fail(`unknown option ${flag} (simulate flags go after --)`);
  }
  return options;
}

function simulate(seed, options) {
  const args = [
    cli,
    'simulate',
    '--format',
    'alibaba',
    '--jobs',
    String(options.jobs),
    '--seed',
    String(seed),
    '--scheduler',
    SCHEDULERS.join(','),
    '--json',
    '--parallel',
    '1',
    ...options.passed,
  ];
  const out = execFileSync(process.execPath, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return JSON.parse(out).runs;
}

/**
 * One seed's row for one eva run (`eva`, or `eva@vot=2` in a value-of-time sweep): eva's cost and JCT against
 * No-Packing's, the cheapest baseline, and any baseline dominating eva.
 */
function row(seed, eva, runs) {
  const noPacking = runs.find((r) => r.scheduler === 'no-packing');
  if (noPacking === undefined) fail(`seed ${seed}: no-packing missing from the runs`);
  const baselines = runs.filter((r) => !isEva(r));
  const cheapest = baselines.reduce((a, b) => (b.totalCost < a.totalCost ? b : a));
  const dominatedBy = baselines
    .filter((b) => b.totalCost < eva.totalCost && b.meanJctHours < eva.meanJctHours)
    .map((b) => b.scheduler);
  return {
    seed,
    eva: eva.scheduler,
    evaCost: eva.totalCost / noPacking.totalCost,
    evaJct: eva.meanJctHours / noPacking.meanJctHours,
    cheapest: cheapest.scheduler,
    cheapestCost: cheapest.totalCost / noPacking.totalCost,
    cheapestJct: cheapest.meanJctHours / noPacking.meanJctHours,
    evaOverCheapest: eva.totalCost / cheapest.totalCost,
    dominatedBy,
    baselines: Object.fromEntries(
      baselines.map((b) => [
        b.scheduler,
        { cost: b.totalCost / noPacking.totalCost, jct: b.meanJctHours / noPacking.meanJctHours },
      ]),
    ),
  };
}

const isEva = (run) => run.scheduler === 'eva' || run.scheduler.startsWith('eva@');
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const f3 = (x) => x.toFixed(3);

const options = parseArgs(process.argv.slice(2));
/** Rows by eva run name: one list for `eva`, or one per value of a `--value-of-time a,b,c` sweep. */
const rowsByEva = new Map();
for (const seed of options.seeds) {
  const runs = simulate(seed, options);
  for (const eva of runs.filter(isEva)) {
    rowsByEva.set(eva.scheduler, [...(rowsByEva.get(eva.scheduler) ?? []), row(seed, eva, runs)]);
  }
  if (!options.json) process.stderr.write(`seed ${seed} done\n`);
}

function summary(rows) {
  const means = {
    evaCost: mean(rows.map((r) => r.evaCost)),
    evaJct: mean(rows.map((r) => r.evaJct)),
    evaOverCheapest: mean(rows.map((r) => r.evaOverCheapest)),
  };
  const verdict = {
    cost: means.evaOverCheapest <= COST_TARGET,
    jct: means.evaJct <= JCT_TARGET,
    undominated: rows.every((r) => r.dominatedBy.length === 0),
  };
  return { means, verdict };
}

function table(name, rows) {
  const { means, verdict } = summary(rows);
  return [
    `${name}: simulate --format alibaba --jobs ${options.jobs} --seed S ${options.passed.join(' ')}`.trim(),
    '',
    '| seed | eva cost | eva JCT | cheapest baseline | its cost | its JCT | eva / cheapest | dominated by |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${[
          r.seed,
          f3(r.evaCost),
          `${f3(r.evaJct)}×`,
          r.cheapest,
          f3(r.cheapestCost),
          `${f3(r.cheapestJct)}×`,
          f3(r.evaOverCheapest),
          r.dominatedBy.join(', ') || '—',
        ].join(' | ')} |`,
    ),
    `| mean | ${f3(means.evaCost)} | ${f3(means.evaJct)}× | | | | ${f3(means.evaOverCheapest)} | |`,
    '',
    'Costs and JCTs relative to No-Packing on the same seed.',
    `eva / cheapest baseline ≤ ${COST_TARGET}: ${verdict.cost ? 'yes' : 'NO'} (${f3(means.evaOverCheapest)})`,
    `eva JCT ≤ ${JCT_TARGET}× No-Packing: ${verdict.jct ? 'yes' : 'NO'} (${f3(means.evaJct)}×)`,
    `no seed where one baseline is both cheaper and faster: ${verdict.undominated ? 'yes' : 'NO'}`,
  ].join('\n');
}

if (options.json) {
  const evas = [...rowsByEva.entries()].map(([eva, rows]) => ({ eva, rows, ...summary(rows) }));
  process.stdout.write(`${JSON.stringify({ flags: options.passed, evas })}\n`);
} else {
  process.stdout.write(`${[...rowsByEva.entries()].map(([eva, rows]) => table(eva, rows)).join('\n\n')}\n`);
}
