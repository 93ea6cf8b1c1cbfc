"""Server-rendered SVG charts for the dashboard: no JavaScript, no CDN, no I/O.

Every text that goes into the SVG is escaped here, so callers may embed the result as
markup. Series differ by colour (Okabe-Ito, readable with colour-vision deficiencies)
and by a second channel: bar fill pattern or line dash plus marker shape, and a legend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 760
HEIGHT = 260
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 34, 44

# Okabe-Ito: distinguishable for the common colour-vision deficiencies.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4")
MARKERS = ("circle", "square", "diamond", "triangle")


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]


def _nice_max(value: float) -> float:
    """An axis top at or above ``value`` that splits into four whole-number gridlines:
    the charts count breakages and runs, and a "3.75 breakages" tick would be nonsense."""
    if value <= 4:
        return 4.0
    step = 1.0
    while step * 4 < value:
        step = step * 2.5 if str(int(step)).startswith("2") else step * 2
    return step * 4


def _fmt(value: float, percent: bool) -> str:
    if percent:
        return f"{value * 100:.0f}%"
    return f"{value:g}"


def _slug(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")[:40] or "chart"


def _frame(title: str, y_label: str, desc: str) -> list[str]:
    # Ids come from the title so two charts on one page do not share them.
    ident = _slug(title)
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'class="chart" role="img" aria-labelledby="{ident}-t {ident}-d">',
        f'<title id="{ident}-t">{escape(title)}</title>',
        f'<desc id="{ident}-d">{escape(desc)}</desc>',
        f'<text x="{LEFT}" y="16" class="chart-title">{escape(title)}</text>',
        f'<text x="12" y="{TOP + (HEIGHT - TOP - BOTTOM) / 2:.0f}" class="chart-axis" '
        f'transform="rotate(-90 12 {TOP + (HEIGHT - TOP - BOTTOM) / 2:.0f})" '
        f'text-anchor="middle">{escape(y_label)}</text>',
    ]


def _axes(labels: Sequence[str], y_max: float, percent: bool, slot: float) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    out = []
    for i in range(5):
        value = y_max * i / 4
        y = TOP + plot_h - plot_h * i / 4
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'class="chart-grid"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" '
                   f'class="chart-tick">{escape(_fmt(value, percent))}</text>')
    # Label at most ~13 x positions so they never overlap.
    every = max(1, -(-len(labels) // 13))
    for i, label in enumerate(labels):
        if i % every:
            continue
        x = LEFT + slot * (i + 0.5)
        out.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle" '
                   f'class="chart-tick">{escape(label)}</text>')
    return out


def _legend(series: Sequence[Series], kind: str) -> list[str]:
    out = []
    x = LEFT
    y = HEIGHT - 10
    for i, s in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        if kind == "bar":
            out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="10" fill="{colour}" '
                       f'{_bar_pattern_attr(i)}/>')
        else:
            out.append(f'<line x1="{x}" x2="{x + 18}" y1="{y - 4}" y2="{y - 4}" '
                       f'stroke="{colour}" stroke-width="2" '
                       f'stroke-dasharray="{DASHES[i % len(DASHES)]}"/>')
            out.append(_marker(i, x + 9, y - 4, colour))
        out.append(f'<text x="{x + 22}" y="{y}" class="chart-legend">{escape(s.name)}</text>')
        x += 30 + 7 * len(s.name)
    return out


def _bar_pattern_attr(i: int) -> str:
    # Later series are lighter with a dashed outline, so bars differ without colour too.
    return 'stroke="#000" stroke-width="0.5"' if i == 0 else \
        'stroke="#000" stroke-width="0.8" stroke-dasharray="2 1" fill-opacity="0.55"'


def _marker(i: int, x: float, y: float, colour: str) -> str:
    shape = MARKERS[i % len(MARKERS)]
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>'
    if shape == "square":
        return f'<rect x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6" fill="{colour}"/>'
    if shape == "diamond":
        return (f'<path d="M{x:.1f} {y - 4:.1f}L{x + 4:.1f} {y:.1f}L{x:.1f} {y + 4:.1f}'
                f'L{x - 4:.1f} {y:.1f}Z" fill="{colour}"/>')
    return (f'<path d="M{x:.1f} {y - 4:.1f}L{x + 4:.1f} {y + 3:.1f}L{x - 4:.1f} {y + 3:.1f}Z" '
            f'fill="{colour}"/>')


def bar_chart(
    labels: Sequence[str], series: Sequence[Series], *, title: str, y_label: str
) -> str:
    """Grouped bars: one group per label, one bar per series."""
    values = [v for s in series for v in s.values if v is not None]
    y_max = _nice_max(max(values, default=0.0))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    slot = plot_w / max(1, len(labels))
    bar_w = slot * 0.8 / max(1, len(series))
    desc = "; ".join(
        f"{s.name}: " + ", ".join(f"{lab} {v:g}" for lab, v in zip(labels, s.values, strict=True)
                                  if v)
        for s in series
    )
    out = _frame(title, y_label, desc or "no data")
    out += _axes(labels, y_max, False, slot)
    for si, s in enumerate(series):
        colour = COLOURS[si % len(COLOURS)]
        for i, v in enumerate(s.values):
            if not v:
                continue
            h = plot_h * v / y_max
            x = LEFT + slot * i + slot * 0.1 + bar_w * si
            out.append(
                f'<rect x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.1f}" fill="{colour}" {_bar_pattern_attr(si)}>'
                f'<title>{escape(f"{s.name}, week of {labels[i]}: {v:g}")}</title></rect>'
            )
    out += _legend(series, "bar")
    out.append("</svg>")
    return "\n".join(out)


Point = tuple[float, float, float, str]  # x, y, value, label


def _segments(points: Sequence[Point | None]) -> list[list[Point]]:
    """Runs of consecutive points with data; a gap (None) ends a segment. A lone point
    gets no line (its marker still shows it)."""
    out: list[list[Point]] = []
    current: list[Point] = []
    for point in [*points, None]:
        if point is None:
            if len(current) > 1:
                out.append(current)
            current = []
        else:
            current.append(point)
    return out


def line_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    y_label: str,
    y_max: float | None = None,
    percent: bool = False,
) -> str:
    """One polyline per series; ``None`` values break the line (no data that week)."""
    values = [v for s in series for v in s.values if v is not None]
    top = y_max if y_max is not None else _nice_max(max(values, default=0.0))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    slot = plot_w / max(1, len(labels))
    desc = "; ".join(
        f"{s.name}: " + ", ".join(f"{lab} {_fmt(v, percent)}"
                                  for lab, v in zip(labels, s.values, strict=True)
                                  if v is not None)
        for s in series
    )
    out = _frame(title, y_label, desc or "no data")
    out += _axes(labels, top, percent, slot)
    for si, s in enumerate(series):
        colour = COLOURS[si % len(COLOURS)]
        points = [
            None if v is None else
            (LEFT + slot * (i + 0.5), TOP + plot_h - plot_h * min(v, top) / top, v, labels[i])
            for i, v in enumerate(s.values)
        ]
        for segment in _segments(points):
            coords = " ".join(f"{x:.1f},{y:.1f}" for x, y, _v, _l in segment)
            out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                       f'stroke-width="2" stroke-dasharray="{DASHES[si % len(DASHES)]}"/>')
        for point in points:
            if point is None:
                continue
            x, y, v, label = point
            out.append(f"<g>{_marker(si, x, y, colour)}"
                       f"<title>{escape(f'{s.name}, week of {label}: {_fmt(v, percent)}')}"
                       f"</title></g>")
    out += _legend(series, "line")
    out.append("</svg>")
    return "\n".join(out)
