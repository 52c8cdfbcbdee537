import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunResult } from '../../world/run-result.js';
import { runsCsv } from './csv.js';
import { reportHtml } from './html.js';
import { reportJson, type ReportBounds, type ReportSettings } from './json.js';

export const REPORT_FILES = { json: 'report.json', csv: 'runs.csv', html: 'report.html' } as const;

/**
 * Write report.json, runs.csv and report.html into `dir` (created if missing); returns the paths written. With
 * `bounds`, the JSON and HTML also give the trace's lower bounds.
 */
export async function writeReport(
  dir: string,
  results: readonly RunResult[],
  settings: ReportSettings,
  bounds?: ReportBounds,
): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const files: [string, string][] = [
    [REPORT_FILES.json, `${JSON.stringify(reportJson(results, settings, { bounds }))}\n`],
    [REPORT_FILES.csv, runsCsv(results)],
    [REPORT_FILES.html, reportHtml(results, settings, bounds)],
  ];
  const paths: string[] = [];
  for (const [name, content] of files) {
    const path = join(dir, name);
    await writeFile(path, content, 'utf8');
    paths.push(path);
  }
  return paths;
}
