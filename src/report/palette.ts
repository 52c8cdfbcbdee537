/**
 * How a scheduler is drawn in every report: a colour, a dash pattern and a marker, fixed per name, so eva is the same
 * blue in every report.html whichever schedulers ran and in whatever order. Dashes and markers keep lines apart where
 * they overlap and for readers who cannot tell the colours apart.
 */
export interface SeriesStyle {
  readonly color: string;
  /** ECharts `lineStyle.type`: solid, or a dash array in px. */
  readonly dash: 'solid' | number[];
  /** An ECharts symbol name. */
  readonly symbol: string;
}

/** Tableau 10 (colour-blind friendly), one hue per scheduler family; variants get lighter or darker shades. */
const KNOWN: Readonly<Record<string, SeriesStyle>> = {
  eva: { color: '#4e79a7', dash: 'solid', symbol: 'circle' },
  'eva-full-only': { color: '#2b4b6f', dash: [10, 3, 2, 3], symbol: 'emptyCircle' },
  'eva-partial-only': { color: '#a0cbe8', dash: [4, 3], symbol: 'circle' },
  'eva-rp': { color: '#6b9ac4', dash: [2, 3], symbol: 'emptyCircle' },
  'eva-single': { color: '#1f3552', dash: [8, 4], symbol: 'circle' },
  // The latency-aware ablations, drawn next to eva: blues turned towards violet and towards cyan, never grey.
  'eva-latency-blind': { color: '#5a5fc8', dash: [6, 2, 2, 2], symbol: 'emptyDiamond' },
  'eva-latency-no-migration': { color: '#2a9fd6', dash: [3, 2], symbol: 'diamond' },
  'no-packing': { color: '#f28e2b', dash: [8, 4], symbol: 'rect' },
  stratus: { color: '#e15759', dash: [2, 3], symbol: 'triangle' },
  synergy: { color: '#76b7b2', dash: [12, 3, 3, 3], symbol: 'diamond' },
  owl: { color: '#59a14f', dash: [5, 2], symbol: 'emptyRect' },
  karpenter: { color: '#b07aa1', dash: [1, 2], symbol: 'emptyTriangle' },
  'karpenter-balanced': { color: '#d4a6c8', dash: [6, 2, 1, 2], symbol: 'emptyTriangle' },
  'karpenter-when-empty': { color: '#7a4f6f', dash: [3, 3], symbol: 'triangle' },
  // The spot baselines: apart from each other and from every fallback colour.
  'karpenter-spot': { color: '#8f3f85', dash: [6, 3], symbol: 'emptyDiamond' },
  'skypilot-spot': { color: '#3b7f6f', dash: [10, 2, 2, 2], symbol: 'pin' },
};

/**
 * A value-of-time sweep's runs (`eva@vot=32`): the base scheduler's hue, never its very colour, one shade and dash per
 * doubling of the value, so a geometric sweep (16, 32, 64, …) draws each value apart, all as the scheduler they vary.
 * Time worth nothing (`vot=0`) and `vot=auto` have no doubling: each has a shade of its own, between those of the
 * doublings (auto, the scheduler's own default, a hair off its base colour).
 */
const SWEEP_SHADES = [0.55, 0.3, 0.42, -0.25, -0.45, 0.15, -0.1, -0.35];
const SWEEP_DASHES: readonly ('solid' | number[])[] = [
  [2, 2],
  [6, 3],
  'solid',
  [10, 3, 2, 3],
  [4, 2],
  [12, 4],
  [1, 3],
  [8, 2, 1, 2],
];
const SWEEP_SYMBOLS = [
  'emptyCircle',
  'rect',
  'circle',
  'triangle',
  'diamond',
  'emptyRect',
  'emptyTriangle',
  'pin',
];

/** A name's own style: the table's own keys only, so a run named `constructor` is no Object method. */
function knownStyle(name: string): SeriesStyle | undefined {
  return Object.hasOwn(KNOWN, name) ? KNOWN[name] : undefined;
}

/** `color` lighter (towards white, amount > 0) or darker (towards black, amount < 0). */
function shade(color: string, amount: number): string {
  const channels = [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16));
  const mixed = channels.map((c) => Math.round(amount >= 0 ? c + (255 - c) * amount : c * (1 + amount)));
  return `#${mixed.map((c) => c.toString(16).padStart(2, '0')).join('')}`;
}

const SWEEP_ZERO = { shade: 0.22, dash: [3, 1], symbol: 'emptyDiamond' } as const;
const SWEEP_AUTO = { shade: 0.05, dash: [14, 3, 3, 3, 3, 3], symbol: 'diamond' } as const;

function sweepStyle(name: string): SeriesStyle | undefined {
  const at = name.indexOf('@');
  if (at < 0) return undefined;
  const base = knownStyle(name.slice(0, at));
  if (base === undefined) return undefined;
  const setting = /=([0-9.]+|auto)$/.exec(name.slice(at + 1))?.[1];
  const own =
    setting === 'auto' ? SWEEP_AUTO : setting !== undefined && Number(setting) === 0 ? SWEEP_ZERO : undefined;
  if (own !== undefined)
    return { color: shade(base.color, own.shade), dash: [...own.dash], symbol: own.symbol };
  const value = Number(setting);
  if (!(value > 0)) return undefined;
  const i =
    (((Math.round(Math.log2(value)) + 2) % SWEEP_SHADES.length) + SWEEP_SHADES.length) % SWEEP_SHADES.length;
  return {
    color: shade(base.color, SWEEP_SHADES[i] as number),
    dash: SWEEP_DASHES[i] as 'solid' | number[],
    symbol: SWEEP_SYMBOLS[i] as string,
  };
}

/**
 * For names not above (e.g. a scheduler added later): chosen by a hash of the name, so still stable. No greys: grey
 * is the reference lines' colour (REFERENCE_COLOR, no-packing's for scale), which a run's line would pass for.
 */
const FALLBACK_COLORS = [
  '#9c755f',
  '#ff9da7',
  '#edc948',
  '#8cd17d',
  '#b6992d',
  '#499894',
  '#d37295',
  '#17a2b8',
];
const FALLBACK_DASHES: readonly ('solid' | number[])[] = ['solid', [8, 4], [2, 3], [12, 3, 3, 3]];
const FALLBACK_SYMBOLS = ['circle', 'rect', 'triangle', 'diamond', 'emptyCircle', 'emptyRect'];

/** The colour of reference lines (lower bounds, a baseline in the background): grey, outside the palette. */
export const REFERENCE_COLOR = '#8c8c8c';

/** FNV-1a: a small, stable string hash (the same on every platform and release). */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export function seriesStyle(name: string): SeriesStyle {
  const known = knownStyle(name) ?? sweepStyle(name);
  if (known !== undefined) return known;
  const h = hash(name);
  return {
    color: FALLBACK_COLORS[h % FALLBACK_COLORS.length] as string,
    dash: FALLBACK_DASHES[(h >>> 8) % FALLBACK_DASHES.length] as 'solid' | number[],
    symbol: FALLBACK_SYMBOLS[(h >>> 16) % FALLBACK_SYMBOLS.length] as string,
  };
}

/** Colours for a list of categories without names of their own (teams, jobs): Tableau 10 in order. */
export const CATEGORY_COLORS = [
  '#4e79a7',
  '#f28e2b',
  '#e15759',
  '#76b7b2',
  '#59a14f',
  '#edc948',
  '#b07aa1',
  '#ff9da7',
  '#9c755f',
  '#bab0ac',
] as const;
