import { join } from 'node:path';
import type { RunResult } from '../../world/run-result.js';
import { runsCsv } from './csv.js';
import { reportHtml } from './html.js';
import { reportJson, type ReportBounds, type ReportSettings } from './json.js';

export const REPORT_FILES = { json: 'report.json', csv: 'runs.csv', html: 'report.html' } as const;

/** One file of a report: where it goes and what it holds. */
export interface ReportFile {
  readonly path: string;
  readonly text: string;
}

/**
 * report.json, runs.csv and report.html for `dir`, not written: `simulate --out` writes them whole or not at all,
 * with the command's other files, through the CLI's writer. With `bounds`, the JSON and HTML also give the trace's
 * lower bounds.
 */
export function reportFiles(
  dir: string,
  results: readonly RunResult[],
  settings: ReportSettings,
  bounds?: ReportBounds,
): ReportFile[] {
  return [
    {
      path: join(dir, REPORT_FILES.json),
      text: `${JSON.stringify(reportJson(results, settings, { bounds }))}\n`,
    },
    { path: join(dir, REPORT_FILES.csv), text: runsCsv(results) },
    { path: join(dir, REPORT_FILES.html), text: reportHtml(results, settings, bounds) },
  ];
}
