/**
 * Where the labels at the ends of a chart's lines go so that none overprints another. ECharts' `labelLayout` does
 * not move a line's end label, and runs often end close together (two baselines a few hundred dollars apart), so
 * their labels were drawn over each other.
 */

/** An end label as drawn unmoved: its left edge and vertical centre, in pixels from the plot's top left. */
export interface EndLabelBox {
  readonly x: number;
  readonly y: number;
  readonly width: number;
}

/**
 * Vertical offsets (pixels, down positive) for the labels. Labels whose boxes share some width and would touch are
 * stacked `lineHeight` apart, in the order their lines end, each stack centred on where its lines end and kept
 * within the plot's height when it fits; a label that overlaps nothing stays where it is.
 */
export function spreadEndLabels(
  labels: readonly EndLabelBox[],
  lineHeight: number,
  plotHeight: number,
): number[] {
  const byY = labels.map((_, i) => i).sort((a, b) => (labels[a]?.y ?? 0) - (labels[b]?.y ?? 0) || a - b);
  let stacks = byY.map((i) => stackOf([i], labels, lineHeight, plotHeight));
  for (let merged = true; merged;) {
    merged = false;
    outer: for (let a = 0; a < stacks.length; a++)
      for (let b = a + 1; b < stacks.length; b++) {
        const first = stacks[a] as Stack;
        const second = stacks[b] as Stack;
        if (!touch(first, second, lineHeight) || !shareWidth(first, second, labels)) continue;
        const members = [...first.members, ...second.members].sort(
          (i, j) => (labels[i]?.y ?? 0) - (labels[j]?.y ?? 0) || i - j,
        );
        stacks = [
          ...stacks.filter((_, k) => k !== a && k !== b),
          stackOf(members, labels, lineHeight, plotHeight),
        ];
        merged = true;
        break outer;
      }
  }
  const offsets = labels.map(() => 0);
  for (const stack of stacks)
    stack.members.forEach((i, position) => {
      offsets[i] = stack.top + (position + 0.5) * lineHeight - (labels[i]?.y ?? 0);
    });
  return offsets;
}

interface Stack {
  /** Label indices, top to bottom. */
  readonly members: readonly number[];
  /** The stack's top edge (pixels). */
  readonly top: number;
}

function stackOf(
  members: readonly number[],
  labels: readonly EndLabelBox[],
  lineHeight: number,
  plotHeight: number,
): Stack {
  const height = members.length * lineHeight;
  const centre = members.reduce((s, i) => s + (labels[i]?.y ?? 0), 0) / members.length;
  const top = centre - height / 2;
  // Inside the plot when the stack fits in it; a stack taller than the plot stays centred.
  return { members, top: height <= plotHeight ? Math.min(Math.max(top, 0), plotHeight - height) : top };
}

function touch(a: Stack, b: Stack, lineHeight: number): boolean {
  const aBottom = a.top + a.members.length * lineHeight;
  const bBottom = b.top + b.members.length * lineHeight;
  return a.top < bBottom && b.top < aBottom;
}

function shareWidth(a: Stack, b: Stack, labels: readonly EndLabelBox[]): boolean {
  return a.members.some((i) =>
    b.members.some((j) => {
      const p = labels[i];
      const q = labels[j];
      return p !== undefined && q !== undefined && p.x < q.x + q.width && q.x < p.x + p.width;
    }),
  );
}
