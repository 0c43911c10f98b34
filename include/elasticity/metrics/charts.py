"""Inline SVG charts for the job page and the data-quality reports: axes with
ticks and units, a legend, a value on hover (SVG <title>, no JavaScript), and
rescales marked. Pure strings, so a report opens from a file anywhere."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

W, H = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 22, 44
COLORS = ["#017cee", "#e8590c", "#2f9e44", "#c2255c", "#7048e8", "#1098ad", "#868e96"]  # the last one: "others"


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]


@dataclass(frozen=True, kw_only=True)
class Chart:
    title: str
    y_unit: str  # e.g. "offsets", "records/s"
    xs: Sequence[int]  # batch ids
    series: Sequence[Series]
    marks: Sequence[tuple[int, str]] = ()  # (batch id, label): where the factor changed
    bars: bool = False
    x_label: str = "batch"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _fmt(v: float) -> str:
    if abs(v) >= 1_000_000:
        return f"{v / 1_000_000:,.4g}M"
    if abs(v) >= 10_000:
        return f"{v / 1000:,.4g}k"
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:,.1f}"


def _x_ticks(xs: Sequence[int], count: int = 8) -> list[int]:
    step = max(1, math.ceil(len(xs) / count))
    ticks = list(xs[::step])
    if xs and ticks[-1] != xs[-1]:
        ticks.append(xs[-1])
    return ticks


@dataclass(frozen=True)
class _Plot:
    """Where a chart's values land: batches by position (gaps in batch ids do not squeeze the chart)."""

    chart: Chart
    top: float

    @property
    def slot(self) -> float:
        return (W - LEFT - RIGHT) / max(1, len(self.chart.xs))

    def px(self, i: int) -> float:
        return LEFT + self.slot * (i + 0.5)

    def py(self, v: float) -> float:
        return H - BOTTOM - v / self.top * (H - TOP - BOTTOM)


def _color(i: int, s: Series) -> str:
    return COLORS[i % len(COLORS)] if s.name != "others" else COLORS[-1]


def _axes(plot: _Plot, ticks: list[float]) -> list[str]:
    chart, py, xs = plot.chart, plot.py, list(plot.chart.xs)
    out = ['<g class="axis y-axis">']
    for t in ticks:
        out.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#e9ecef"/>'
            f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end" fill="#495057">{_fmt(t)}</text>'
        )
    out.append(
        f'<text class="axis-label" transform="translate(14,{(H - BOTTOM + TOP) / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'fill="#495057">{html.escape(chart.y_unit)}</text></g>'
    )
    out.append(
        f'<g class="axis x-axis"><line x1="{LEFT}" x2="{W - RIGHT}" y1="{H - BOTTOM}" y2="{H - BOTTOM}" stroke="#868e96"/>'
    )
    pos = {x: i for i, x in enumerate(xs)}
    for x in _x_ticks(xs):
        out.append(
            f'<line x1="{plot.px(pos[x]):.1f}" x2="{plot.px(pos[x]):.1f}" y1="{H - BOTTOM}" y2="{H - BOTTOM + 4}" stroke="#868e96"/>'
            f'<text x="{plot.px(pos[x]):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle" fill="#495057">{x}</text>'
        )
    out.append(
        f'<text class="axis-label" x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 6}" text-anchor="middle" fill="#495057">'
        f"{html.escape(chart.x_label)} ({xs[0]}..{xs[-1]})</text></g>"
    )
    return out


def _marks(plot: _Plot) -> list[str]:
    pos = {x: i for i, x in enumerate(plot.chart.xs)}
    out = []
    for x, label in plot.chart.marks:
        if x in pos:
            mx = plot.px(pos[x]) - plot.slot / 2
            anchor, dx = ("end", -3) if mx > W * 0.75 else ("start", 3)
            out.append(
                f'<g class="mark"><line x1="{mx:.1f}" x2="{mx:.1f}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#c92a2a" stroke-dasharray="4 3"/>'
                f'<text x="{mx + dx:.1f}" y="{TOP - 6}" fill="#c92a2a" text-anchor="{anchor}">{html.escape(label)}</text></g>'
            )
    return out


def _series(plot: _Plot, si: int, s: Series) -> list[str]:
    chart, px, py, xs = plot.chart, plot.px, plot.py, plot.chart.xs
    color, name = _color(si, s), html.escape(s.name)
    out = [f'<g class="series" data-name="{name}">']
    if chart.bars:
        w = max(1.0, plot.slot * 0.8 / max(1, len(chart.series)))
        for i, v in enumerate(s.values):
            bx = px(i) - plot.slot * 0.4 + si * w
            out.append(
                f'<rect x="{bx:.1f}" y="{py(v):.1f}" width="{w:.1f}" height="{H - BOTTOM - py(v):.1f}" fill="{color}">'
                f"<title>{chart.x_label} {xs[i]}: {name} {_fmt(v)} {html.escape(chart.y_unit)}</title></rect>"
            )
    else:
        points = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(s.values))
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
        for i, v in enumerate(s.values):
            out.append(
                f'<circle cx="{px(i):.1f}" cy="{py(v):.1f}" r="3" fill="{color}">'
                f"<title>{chart.x_label} {xs[i]}: {name} {_fmt(v)} {html.escape(chart.y_unit)}</title></circle>"
            )
    out.append("</g>")
    return out


def svg(chart: Chart) -> str:
    """A figure: title, SVG with axes and marks, and an HTML legend (class `legend`)."""
    title = f'<figure class="chart"><figcaption>{html.escape(chart.title)}</figcaption>'
    if not chart.xs:
        return title + '<p class="muted">no batches yet</p></figure>'
    ticks = nice_ticks(max([v for s in chart.series for v in s.values] + [0]))
    plot = _Plot(chart, ticks[-1])
    out = [
        f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg" font-size="11">'
    ]
    out += _axes(plot, ticks) + _marks(plot)
    for si, s in enumerate(chart.series):
        out += _series(plot, si, s)
    out.append("</svg>")
    legend = "".join(
        f'<span class="legend-item"><i style="background:{_color(i, s)}"></i>{html.escape(s.name)}</span>'
        for i, s in enumerate(chart.series)
    )
    marks = '<span class="legend-item"><i class="mark-key"></i>factor change</span>' if chart.marks else ""
    return f'{title}{"".join(out)}<div class="legend">{legend}{marks}</div></figure>'


CSS = """figure.chart{margin:0 0 16px}figure.chart figcaption{font-weight:600;margin-bottom:4px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:#343a40}
.legend-item i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.legend-item i.mark-key{width:0;height:12px;border-left:2px dashed #c92a2a;border-radius:0}
svg.chart circle:hover,svg.chart rect:hover{opacity:.6}svg.chart{max-width:100%;height:auto}"""
