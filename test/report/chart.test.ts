import { describe, expect, it } from 'vitest';
import {
  chartHtml,
  chartRuntime,
  fmt,
  renderChartSvg,
  scriptJson,
  type Chart,
} from '../../src/report/chart.js';
import fc from 'fast-check';
import { REFERENCE_COLOR, seriesStyle } from '../../src/report/palette.js';
import { SCHEDULER_NAMES } from '../../src/scheduler/registry.js';

function lineChart(id: string, name = 'eva'): Chart {
  return {
    id,
    title: 'T',
    width: 400,
    height: 200,
    option: {
      tooltip: { trigger: 'axis', valueFormatter: fmt('money') },
      legend: {},
      xAxis: { type: 'value' },
      yAxis: { type: 'log' },
      series: [
        {
          type: 'line',
          name,
          data: [
            [1, 2],
            [2, 30],
            [3, 4],
          ],
          lineStyle: { type: [6, 4] },
        },
      ],
    },
  };
}

describe('renderChartSvg', () => {
  it('gives the same bytes for the same chart, however many charts the process drew before', () => {
    const first = renderChartSvg(lineChart('a'));
    renderChartSvg(lineChart('b'));
    expect(renderChartSvg(lineChart('a'))).toBe(first);
    expect(first).toMatch(/^<svg /);
    expect(first).toContain('stroke-dasharray');
  });

  it('numbers the SVG ids per chart, so two charts on one page do not share any', () => {
    const ids = (svg: string): string[] =>
      [...svg.matchAll(/\b(?:id|class)="([^"]+)"/g)].map((m) => m[1] as string);
    const a = ids(renderChartSvg(lineChart('a')));
    const b = ids(renderChartSvg(lineChart('b')));
    expect(a.length).toBeGreaterThan(0);
    expect(a.every((id) => id.startsWith('a-svg-'))).toBe(true);
    expect(b.every((id) => id.startsWith('b-svg-'))).toBe(true);
  });

  it('escapes text from users', () => {
    const html = chartHtml(lineChart('c', '<b onload=x>'));
    expect(html).not.toContain('<b onload');
    expect(html).toContain('\\u003cb onload=x>');
  });
});

describe('scriptJson', () => {
  it('cannot end its script element early', () => {
    expect(scriptJson({ name: '</script><script>alert(1)</script><!--' })).not.toMatch(/<\/script|<!--/i);
  });

  it('names the page formatters and refuses any other function', () => {
    expect(scriptJson({ valueFormatter: fmt('percent') })).toBe('{"valueFormatter":"$fmt:percent"}');
    expect(() => scriptJson({ formatter: (v: number) => String(v) })).toThrow(/not a page formatter/);
  });
});

describe('chartRuntime', () => {
  it('inlines the library and the bootstrap, with nothing that could close the script early', () => {
    const runtime = chartRuntime('common');
    expect(runtime.match(/<script>/g)).toHaveLength(2);
    expect(runtime.match(/<\/script>/gi)).toHaveLength(2);
    expect(runtime).toContain('echarts.init(el');
    expect(chartRuntime('full').length).toBeGreaterThan(runtime.length);
  });
});

describe('seriesStyle', () => {
  it('gives every scheduler a fixed colour, and unknown names a stable one', () => {
    expect(seriesStyle('eva').color).toBe('#4e79a7');
    expect(seriesStyle('no-packing').color).toBe('#f28e2b');
    const known = ['eva', 'no-packing', 'stratus', 'synergy', 'owl', 'karpenter'].map(
      (n) => seriesStyle(n).color,
    );
    expect(new Set(known).size).toBe(known.length);
    expect(seriesStyle('my-scheduler')).toEqual(seriesStyle('my-scheduler'));
  });

  it("draws the spot baselines and every run of a value-of-time sweep apart, the sweep in its scheduler's hue", () => {
    const names = [
      'eva',
      'no-packing',
      'karpenter',
      'karpenter-spot',
      'skypilot-spot',
      ...[1, 5, 10, 16, 32, 64, 128].map((v) => `eva@vot=${v}`),
    ];
    const styles = names.map((n) => seriesStyle(n));
    expect(new Set(styles.map((s) => s.color)).size).toBe(names.length);
    // eva's blue, lighter or darker: its blue channel leads.
    for (const s of styles.slice(5)) {
      const [r, g, b] = [1, 3, 5].map((i) => parseInt(s.color.slice(i, i + 2), 16)) as [
        number,
        number,
        number,
      ];
      expect(b).toBeGreaterThan(r);
      expect(b).toBeGreaterThan(g);
    }
  });

  it('draws every scheduler simulate knows in a colour of its own, none grey like the reference lines', () => {
    const colors = SCHEDULER_NAMES.map((n) => seriesStyle(n).color);
    expect(new Set(colors).size).toBe(SCHEDULER_NAMES.length);
    for (const [i, name] of SCHEDULER_NAMES.entries()) expect(isGrey(colors[i] ?? ''), name).toBe(false);
    expect(isGrey(REFERENCE_COLOR)).toBe(true);
    // Nor does a name the palette does not know fall back to a grey.
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 30 }), (name) => {
        expect(isGrey(seriesStyle(name).color), name).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it("draws a sweep's vot=0 and vot=auto in shades of its scheduler's hue, apart from its other values", () => {
    const values = ['0', '1', '4', 'auto'];
    const styles = values.map((v) => seriesStyle(`eva@vot=${v}`));
    const colors = styles.map((s) => s.color);
    expect(new Set([...colors, seriesStyle('eva').color]).size).toBe(values.length + 1);
    for (const [i, color] of colors.entries()) {
      const [r, g, b] = channels(color);
      expect(b, `eva@vot=${values[i]}`).toBeGreaterThan(r);
      expect(b, `eva@vot=${values[i]}`).toBeGreaterThan(g);
    }
    // Markers and dashes apart too: for readers who cannot tell the shades apart.
    expect(new Set(styles.map((s) => `${s.symbol} ${JSON.stringify(s.dash)}`)).size).toBe(values.length);
    // Another scheduler's sweep keeps its own hue: no-packing's orange, red leading.
    const [r, , b] = channels(seriesStyle('no-packing@vot=0').color);
    expect(r).toBeGreaterThan(b);
  });
});

function channels(color: string): [number, number, number] {
  return [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16)) as [number, number, number];
}

/** Grey: its channels within 24 of each other (#79706e, #8c8c8c, #c8c8c8), no hue to speak of. */
function isGrey(color: string): boolean {
  const c = channels(color);
  return Math.max(...c) - Math.min(...c) <= 24;
}
