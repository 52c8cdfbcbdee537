import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { ValidationError } from '../../core/validation.js';
import { parseSince, SINCE_RULE } from '../../controller/api/since.js';
import {
  LATEST_REPORT_KEY,
  MONTHLY_REPORTS_PREFIX,
  monthlyReportKeys,
  REPORTS_PREFIX,
} from '../../protocol/object-keys.js';
import type { ObjectInfo, ObjectStore } from '../../storage/object-store.js';
import type { StoreLocation } from '../../storage/open-object-store.js';
import { utcMonthBounds } from '../../core/utc-month.js';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { costsSchema, type CostsResponse } from '../api-responses.js';
import { formatDollars, formatTable, formatTime, printJson } from '../table.js';
import { terminalSafeDeep } from '../terminal-text.js';

interface ReportOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly since?: string;
  readonly until?: string;
  readonly from?: string;
  readonly now?: boolean;
  readonly month?: string;
}

/** Rows of stored reports listed in the human output (all of them with --json). */
const LISTED_REPORTS = 20;

export function renderCosts(report: CostsResponse): string {
  const costs = terminalSafeDeep(report);
  const out: string[] = [
    `costs from ${formatTime(costs.sinceSeconds)} to ${formatTime(costs.generatedAtSeconds)}` +
      `${costs.scope === 'team' ? ' (your team)' : ''}: ${formatDollars(costs.totalCost)}`,
  ];
  if (costs.monthReport !== undefined)
    out.push(
      costs.monthReport.from === 'stored'
        ? `as stored when the month ended: ${costs.monthReport.detail}`
        : `recomputed at today's prices: ${costs.monthReport.detail}`,
    );
  if (typeof costs.idleCost === 'number') out.push(`idle instance time: ${formatDollars(costs.idleCost)}`);
  if (typeof costs.migrationOverheadCost === 'number')
    out.push(`migration overhead: ${formatDollars(costs.migrationOverheadCost)}`);
  const section = (title: string, table: string): void => void out.push('', title, table.trimEnd());
  if (costs.byTeam.length > 0)
    section(
      'by team',
      formatTable(
        ['TEAM', 'COST'],
        costs.byTeam.map((t) => [t.id, formatDollars(t.cost)]),
      ),
    );
  if (costs.byJob.length > 0)
    section(
      'by job',
      formatTable(
        ['JOB', 'NAME', 'TEAM', 'COST'],
        costs.byJob.map((j) => [j.id, j.name ?? '-', j.team ?? '-', formatDollars(j.cost)]),
      ),
    );
  if (costs.byInstance.length > 0)
    section(
      'by instance',
      formatTable(
        ['INSTANCE', 'TYPE', 'COST', 'IDLE'],
        costs.byInstance.map((i) => [
          i.id,
          i.typeName ?? '-',
          formatDollars(i.cost),
          i.idleCost === undefined ? '-' : formatDollars(i.idleCost),
        ]),
      ),
    );
  return `${out.join('\n')}\n`;
}

/** A time flag's value in epoch seconds (undefined when not given), or an error naming the flag. */
function timeFlag(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const seconds = parseSince(text, Date.now() / 1000);
  if (seconds === undefined)
    throw new ValidationError(flag, [`expected ${SINCE_RULE}, got ${JSON.stringify(text)}`]);
  return seconds;
}

/** `--month`'s bounds (a UTC month), or an error naming the flag. */
function monthFlag(month: string): { readonly startSeconds: number; readonly endSeconds: number } {
  try {
    return utcMonthBounds(month);
  } catch {
    throw new ValidationError('--month', [`expected a month as YYYY-MM (UTC), got ${JSON.stringify(month)}`]);
  }
}

/**
 * The period to ask the controller for: `--month` (the month so far, or the whole month once it has ended, billed
 * as at its end), else `--since`/`--until` as given; and the line that names a month above its report.
 */
function costPeriod(options: ReportOptions): {
  readonly since?: string;
  readonly until?: string;
  readonly title?: string;
} {
  const since = timeFlag('--since', options.since);
  const until = timeFlag('--until', options.until);
  if (since !== undefined && until !== undefined && until <= since)
    throw new ValidationError('--until', [
      `must come after --since (${options.since}), got ${JSON.stringify(options.until)}`,
    ]);
  if (options.month === undefined)
    return {
      ...(options.since === undefined ? {} : { since: options.since }),
      ...(options.until === undefined ? {} : { until: options.until }),
    };
  if (since !== undefined || until !== undefined)
    throw new ValidationError('--month', ['gives the period: leave out --since and --until']);
  const { startSeconds, endSeconds } = monthFlag(options.month);
  const now = Date.now() / 1000;
  if (startSeconds > now) throw new ValidationError('--month', [`${options.month} has not begun`]);
  return endSeconds <= now
    ? { since: String(startSeconds), until: String(endSeconds), title: `month ${options.month}` }
    : { since: String(startSeconds), title: `month ${options.month} so far` };
}

/**
 * A directory named by `--from` must be there: the store lists a missing one as empty (nothing stored yet, for a
 * controller that writes), so a mistyped path would read as "no reports" and succeed. A path that is not a readable
 * directory is bad input, named as such.
 */
async function checkStoreDirectory(location: string, parsed: StoreLocation): Promise<void> {
  if (parsed.kind !== 'fs') return;
  const shown = location === parsed.root ? parsed.root : `${location} (${parsed.root})`;
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(parsed.root)).isDirectory();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ValidationError('--from', [`${shown} does not exist`]);
    if (code === 'ENOTDIR' || code === 'EACCES' || code === 'EPERM')
      throw new ValidationError('--from', [`${shown} cannot be read (${code})`]);
    throw new Error(`--from ${location}: ${parsed.root} cannot be read: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (!isDirectory)
    throw new ValidationError('--from', [
      `${shown} is not a directory (give the controller's objectStore: a directory or s3://bucket/prefix)`,
    ]);
}

/** Reports stored by the controller, read back straight from the object store (no controller needed). */
async function reportFromStore(location: string, options: ReportOptions): Promise<void> {
  // Loaded on demand: the S3 SDK is heavy and only this path needs it.
  const { openObjectStore, parseStoreLocation } = await import('../../storage/open-object-store.js');
  let where: StoreLocation;
  try {
    where = parseStoreLocation(location);
  } catch (e) {
    // Every refusal of the location is of its text (empty, a bucket name S3 refuses, an unknown scheme).
    throw new ValidationError('--from', [(e as Error).message]);
  }
  await checkStoreDirectory(location, where);
  const store = await openObjectStore(location);
  if (options.month !== undefined) return monthFromStore(store, options.month, options);
  const since = timeFlag('--since', options.since);
  const reports: ObjectInfo[] = [];
  const months: string[] = [];
  for await (const info of store.list(REPORTS_PREFIX)) {
    // Each ended month's report lives apart from the rolling ones: listed by month, never taken for the newest.
    if (info.key.startsWith(MONTHLY_REPORTS_PREFIX)) {
      const month = monthOfKey(info.key);
      if (month !== undefined) months.push(month);
    } else if (
      since === undefined ||
      info.lastModified === undefined ||
      info.lastModified.getTime() / 1000 >= since
    )
      reports.push(info);
  }
  months.sort();
  // Keys carry a UTC stamp (reports/costs-<stamp>.json), so key order is time order; latest.json is a copy of the newest.
  reports.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const jsonReports = reports.filter((r) => r.key.endsWith('.json'));
  const latestJson =
    [...jsonReports].reverse().find((r) => r.key !== LATEST_REPORT_KEY) ??
    jsonReports.find((r) => r.key === LATEST_REPORT_KEY);
  const latest = latestJson === undefined ? null : await readJson(store, latestJson.key);
  if (options.json === true) {
    printJson({
      location: store.location,
      reports: reports.map((r) => ({
        key: r.key,
        sizeBytes: r.sizeBytes,
        lastModified: r.lastModified?.toISOString() ?? null,
      })),
      latest,
      months,
    });
    return;
  }
  // The months are kept for good, whatever rolling reports are left: listed either way.
  const monthsLine = months.length > 0 ? `months: ${months.join(', ')} (--month YYYY-MM prints one)\n` : '';
  if (reports.length === 0) {
    process.stdout.write(
      `no reports under ${REPORTS_PREFIX} in ${store.location}${since === undefined ? '' : ' since then'}\n` +
        monthsLine,
    );
    return;
  }
  const listed = reports.slice(-LISTED_REPORTS);
  if (listed.length < reports.length)
    process.stdout.write(`${reports.length - listed.length} older reports not shown (--json lists all)\n`);
  process.stdout.write(
    formatTable(
      ['REPORT', 'BYTES', 'WRITTEN'],
      listed.map((r) => [
        r.key,
        r.sizeBytes,
        r.lastModified === undefined ? '-' : formatTime(r.lastModified.getTime() / 1000),
      ]),
    ),
  );
  if (monthsLine !== '') process.stdout.write(`\n${monthsLine}`);
  const parsed = costsSchema.safeParse(latest);
  if (latestJson !== undefined && parsed.success)
    process.stdout.write(`\nlatest: ${latestJson.key}\n${renderCosts(parsed.data)}`);
  else if (latestJson !== undefined)
    process.stdout.write(`\nlatest: ${latestJson.key} (use --json to print it)\n`);
}

/** A stored report's JSON, or an error naming the store and key. */
async function readJson(store: ObjectStore, key: string): Promise<unknown> {
  const text = (await store.getBuffer(key)).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new Error(`${store.location} ${key}: not valid JSON: ${(e as Error).message}`, { cause: e });
  }
}

/** `YYYY-MM` of a month's JSON report key; undefined for every other key (its CSV and HTML too). */
function monthOfKey(key: string): string | undefined {
  if (!key.startsWith(MONTHLY_REPORTS_PREFIX)) return undefined;
  return /^(\d{4}-\d{2})\.json$/.exec(key.slice(MONTHLY_REPORTS_PREFIX.length))?.[1];
}

/** The report of one ended month, read back from the store. */
async function monthFromStore(store: ObjectStore, month: string, options: ReportOptions): Promise<void> {
  monthFlag(month);
  const key = monthlyReportKeys(month).json;
  if ((await store.head(key)) === undefined)
    throw new Error(
      `no report of ${month} in ${store.location} (a month's report is written once it has ended)`,
    );
  const report = await readJson(store, key);
  if (options.json === true) return printJson(report);
  const parsed = costsSchema.safeParse(report);
  if (!parsed.success)
    throw new Error(`${store.location} ${key}: not a cost report (use --json to print it)`);
  process.stdout.write(`${key}\n${renderCosts(parsed.data)}`);
}

/**
 * `--now` has the controller write the whole history's report to its object store: a flag that asks for a period or
 * reads stored reports instead contradicts it: refused as bad input rather than left unused.
 */
function refuseWithNow(options: ReportOptions): void {
  if (options.from !== undefined)
    throw new ValidationError('--now', ['asks the controller to write a report: leave out --from']);
  const given: readonly (readonly [string, string | undefined])[] = [
    ['--month', options.month],
    ['--since', options.since],
    ['--until', options.until],
  ];
  const period = given.filter(([, value]) => value !== undefined).map(([flag]) => flag);
  if (period.length > 0)
    throw new ValidationError('--now', [
      `writes the whole history's report, not a period: leave out ${period.join(' and ')}`,
    ]);
}

export function registerReport(program: Command): void {
  addConnectionOptions(
    program
      .command('report')
      .description(
        'cost report: per job, team and instance (from the controller, or stored reports with --from)',
      )
      .option('--since <time>', `only costs (or reports) since then: ${SINCE_RULE}`)
      .option(
        '--until <time>',
        'only costs up to then (the same forms; a period that has ended is billed as it stood at its end)',
      )
      .option(
        '--from <location>',
        'read stored reports from an object store (s3://bucket/prefix or a directory)',
      )
      .option(
        '--month <YYYY-MM>',
        "a UTC month's costs: the month so far, or as it stood at its end (with --from: its stored report, written once the month has ended)",
      )
      .option('--now', 'ask the controller to write a report to its object store now (admin token)')
      .option('--json', 'print JSON'),
  ).action(async (options: ReportOptions) => {
    if (options.now === true) refuseWithNow(options);
    if (options.from !== undefined) {
      if (options.until !== undefined)
        throw new ValidationError('--until', [
          'asks the controller for a period: leave out --from (or use --month)',
        ]);
      return reportFromStore(options.from, options);
    }
    const client = FleetwiseClient.fromOptions(options);
    if (options.now === true) {
      const location = await client.writeReport();
      if (options.json === true) printJson({ location });
      else process.stdout.write(`wrote ${location}\n`);
      return;
    }
    // Validated here for a clear flag error; the server resolves the same forms.
    const period = costPeriod(options);
    const costs = await client.costs(period.since, period.until);
    if (options.json === true) printJson(costs);
    else
      process.stdout.write(`${period.title === undefined ? '' : `${period.title}\n`}${renderCosts(costs)}`);
  });
}
