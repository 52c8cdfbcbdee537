import type { JobOutcome, RunResult, RunSeries } from '../../../src/world/run-result.js';

const H = 3600;

function series(costPerHour: number, hours: number, instances: number): RunSeries {
  const timeSeconds = Array.from({ length: hours + 1 }, (_, i) => i * H);
  const last = (v: number) => timeSeconds.map((_, i) => (i === hours ? 0 : v));
  return {
    timeSeconds,
    cumulativeCost: timeSeconds.map((_, i) => i * costPerHour),
    costPerHour: last(costPerHour),
    runningInstances: last(instances),
    allocatedGpus: last(1),
    allocatedVcpus: last(4),
    allocatedMemoryGiB: last(16),
    capacityGpus: last(instances),
    capacityVcpus: last(8 * instances),
    capacityMemoryGiB: last(61 * instances),
    migrations: timeSeconds.map((_, i) => Math.min(i, 2) * (instances === 1 ? 1 : 0)),
  };
}

function job(id: number, jctHours: number | null): JobOutcome {
  return {
    id: `j${id}`,
    name: `resnet18[${id}]`,
    arrivalSeconds: 0,
    startSeconds: jctHours === null ? null : 60,
    endSeconds: jctHours === null ? null : jctHours * H,
    jctSeconds: jctHours === null ? null : jctHours * H,
    migrations: 0,
    successful: true,
    predictedStartSeconds: null,
    predictedEndSeconds: null,
  };
}

/** A run of `hours` hours at a constant cost rate; JCTs as given (null = did not finish). */
export function fakeRun(
  scheduler: string,
  costPerHour: number,
  hours: number,
  instances: number,
  jcts: readonly (number | null)[],
): RunResult {
  return {
    summary: {
      scheduler,
      jobs: jcts.length,
      totalCost: costPerHour * hours,
      normalizedCost: null,
      meanJctHours: 2.5,
      medianJctHours: 2.5,
      p95JctHours: 2.95,
      peakCostPerHour: costPerHour,
      migrationsPerJob: 0,
      instancesLaunched: instances,
      fullReconfigFraction: 0,
      wallSeconds: 0.25,
    },
    series: series(costPerHour, hours, instances),
    jobs: jcts.map((h, i) => job(i, h)),
  };
}

/** no-packing: $3/h for 3 h on 2 instances ($9); eva: $2/h for 3 h on 1 instance ($6, 2 migrations). */
export function twoRuns(): RunResult[] {
  return [fakeRun('no-packing', 3, 3, 2, [2, 3]), fakeRun('eva', 2, 3, 1, [2.5, 3, null])];
}

/** The page with its scripts emptied: their contents (the inline chart library, chart options) are not markup. */
export function withoutScripts(page: string): string {
  return page.replace(/(<script\b[^>]*>)[\s\S]*?(<\/script>)/g, '$1$2');
}

/** Tags open and close in order (void elements excepted): a cheap well-formedness check for SVG/HTML. */
export function unbalancedTags(page: string): string[] {
  // CSS inside the charts' SVGs is not markup either.
  const markup = withoutScripts(page).replace(/<!\[CDATA\[[\s\S]*?\]\]>/g, '');
  const voidElements = new Set(['meta', 'br', 'img', 'input', 'link', 'hr', '!doctype']);
  const stack: string[] = [];
  const problems: string[] = [];
  for (const m of markup.matchAll(/<(\/?)([!a-zA-Z][\w-]*)[^>]*?(\/?)>/g)) {
    const [, closing, rawName, selfClosing] = m;
    const name = (rawName ?? '').toLowerCase();
    if (selfClosing === '/' || voidElements.has(name)) continue;
    if (closing === '/') {
      const top = stack.pop();
      if (top !== name) problems.push(`</${name}> closes <${top ?? 'nothing'}>`);
    } else stack.push(name);
  }
  return [...problems, ...stack.map((s) => `<${s}> never closed`)];
}
