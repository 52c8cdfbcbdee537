import { describe, expect, it } from 'vitest';
import { niceStep, renderChartSvg, type ChartSpec, type Interpolation } from '../../src/report/svg-chart.js';
import { unbalancedTags } from '../sim/report/run-fixtures.js';

/** One full-width panel with fixed 0..10 axes: x 0→64 px, 10→944 px; y 0→306 px, 10→62 px. */
function chart(ys: readonly number[], interpolation: Interpolation): ChartSpec {
  return {
    id: 'c',
    title: 'T',
    legend: [{ name: 'eva', color: '#123456' }],
    panels: [
      {
        x: { label: 'x', min: 0, max: 10 },
        y: { label: 'y', min: 0, max: 10 },
        interpolation,
        lines: [{ name: 'eva', color: '#123456', xs: [0, 5, 10], ys }],
      },
    ],
  };
}

function pathOf(svg: string): string | undefined {
  return /<path class="line" d="([^"]*)"/.exec(svg)?.[1];
}

describe('niceStep', () => {
  it('rounds to 1, 2 or 5 × 10^k', () => {
    expect(niceStep(10, 5)).toBe(2);
    expect(niceStep(1, 5)).toBeCloseTo(0.2, 12);
    expect(niceStep(7, 5)).toBe(2);
    expect(niceStep(100, 4)).toBe(50);
    expect(niceStep(3, 3)).toBe(1);
  });
});

describe('renderChartSvg', () => {
  it('projects points onto the plot area (linear)', () => {
    expect(pathOf(renderChartSvg(chart([0, 10, 5], 'linear')))).toBe('M64 306L504 62L944 184');
  });

  it('draws a step function as horizontal-then-vertical segments', () => {
    expect(pathOf(renderChartSvg(chart([0, 10, 5], 'step')))).toBe('M64 306H504V62H944V184');
  });

  it('breaks the line at non-finite values', () => {
    expect(pathOf(renderChartSvg(chart([0, Number.NaN, 5], 'linear')))).toBe('M64 306M944 184');
  });

  it('is one well-formed <svg> with title, ticks, legend and no external references', () => {
    const svg = renderChartSvg(chart([0, 10, 5], 'linear'));
    expect(svg.match(/<svg/g)).toHaveLength(1);
    expect(unbalancedTags(svg)).toEqual([]);
    expect(svg).toContain('<title id="c-title">T</title>');
    expect(svg).toContain('class="legend-label">eva</text>');
    expect(svg).toContain('viewBox="0 0 960 ');
    expect(svg).not.toMatch(/https?:\/\//);
    // y ticks 0, 2, …, 10 and x ticks at the nice step.
    for (const t of ['0', '2', '4', '6', '8', '10']) expect(svg).toContain(`class="tick">${t}</text>`);
  });

  it('spans the data to its 1-2-5 neighbours on a log axis and skips non-positive points there', () => {
    const logChart = (xs: number[]) =>
      renderChartSvg({
        id: 'l',
        title: 'log',
        legend: [],
        panels: [
          {
            x: { label: 'h', scale: 'log' },
            y: { label: '%', min: 0, max: 100 },
            interpolation: 'step',
            lines: [{ name: 'a', color: '#000', xs, ys: [10, 50, 100] }],
          },
        ],
      });
    const ticksOf = (svg: string) =>
      [...svg.matchAll(/text-anchor="middle" class="tick">([^<]+)</g)].map((m) => m[1]);
    // 0.3..40 → axis 0.2..50 (2.4 decades): 1-2-5 ticks.
    const svg = logChart([0, 0.3, 40]);
    expect(ticksOf(svg)).toEqual(['0.2', '0.5', '1', '2', '5', '10', '20', '50']);
    const span = Math.log10(50 / 0.2);
    const at = (x: number) => Math.round((64 + (880 * Math.log10(x / 0.2)) / span) * 10) / 10;
    expect(pathOf(svg)).toBe(`M${at(0.3)} 184H${at(40)}V62`);
    // 0.7..170 → axis 0.5..200 (2.6 decades): powers of ten only.
    expect(ticksOf(logChart([0.7, 1, 170]))).toEqual(['1', '10', '100']);
  });

  it('lays panels side by side and escapes text', () => {
    const panel = { x: { label: 'x' }, y: { label: 'y' }, interpolation: 'linear' as const, lines: [] };
    const svg = renderChartSvg({
      id: 'p',
      title: 'a < b & "c"',
      legend: [{ name: '<script>', color: '#000' }],
      panels: [
        { ...panel, title: 'GPU' },
        { ...panel, title: 'vCPU' },
        { ...panel, title: 'Memory' },
      ],
    });
    expect(svg.match(/<g class="panel">/g)).toHaveLength(3);
    expect(svg.match(/no data/g)).toHaveLength(3);
    expect(svg).toContain('a &lt; b &amp; &quot;c&quot;');
    expect(svg).not.toContain('<script>');
    expect(unbalancedTags(svg)).toEqual([]);
  });
});
