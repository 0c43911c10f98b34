"""The one-page summary: the checks, and inline SVG charts (lag per SSPKb over
batches, throughput per batch, factor changes marked). No JavaScript, no
network: it opens from a file anywhere."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from .suite import QualityResult

W, H, PAD = 720, 220, 40
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def _chart(title: str, xs: Sequence[int], series: dict[str, Sequence[float]], marks: Sequence[tuple[int, str]], bars: bool = False) -> str:
    if not xs:
        return f"<h3>{html.escape(title)}</h3><p>no batches yet</p>"
    top = max([max(v) for v in series.values() if v] + [1])
    x0, x1 = min(xs), max(xs)

    def px(x: float) -> float:
        return PAD + (x - x0) / max(1, x1 - x0) * (W - 2 * PAD)

    def py(y: float) -> float:
        return H - PAD - y / top * (H - 2 * PAD)

    parts = [f'<svg width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg" font-size="10">',
             f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#999"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#999"/>',
             f'<text x="4" y="{PAD}">{top:,.0f}</text><text x="4" y="{H - PAD}">0</text>',
             f'<text x="{PAD}" y="{H - 8}">batch {x0}</text><text x="{W - PAD - 50}" y="{H - 8}">batch {x1}</text>']
    for x, label in marks:
        anchor = "end" if px(x) > W * 0.7 else "start"  # keep the label inside the chart
        parts.append(f'<line x1="{px(x):.1f}" y1="{PAD}" x2="{px(x):.1f}" y2="{H - PAD}" stroke="#c00" stroke-dasharray="4"/>'
                     f'<text x="{px(x) + (-3 if anchor == "end" else 3):.1f}" y="{PAD - 4}" fill="#c00" text-anchor="{anchor}">{html.escape(label)}</text>')
    for i, (name, ys) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        if bars:
            w = max(2.0, (W - 2 * PAD) / max(1, len(xs)) * 0.6)
            parts += [f'<rect x="{px(x) - w / 2:.1f}" y="{py(y):.1f}" width="{w:.1f}" height="{H - PAD - py(y):.1f}" fill="{color}"/>'
                      for x, y in zip(xs, ys, strict=False)]
        else:
            points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys, strict=False))
            parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5"><title>{html.escape(name)}</title></polyline>')
    parts.append("</svg>")
    legend = "" if bars or len(series) > 12 else " ".join(
        f'<span style="color:{COLORS[i % len(COLORS)]}">&#9632; {html.escape(n)}</span>' for i, n in enumerate(series))
    return f"<h3>{html.escape(title)}</h3>{''.join(parts)}<div>{legend}</div>"


def _charts(metrics: Sequence[dict]) -> str:
    xs = [m["batch_id"] for m in metrics]
    lag_keys = sorted({k for m in metrics for k in m["metrics"].get("lag", {})})
    lag = {k: [m["metrics"].get("lag", {}).get(k, 0) for m in metrics] for k in lag_keys}
    throughput = {"records/s": [m["records_read"] / max(m["durations_ms"].get("total", 1) / 1000, 1e-3) for m in metrics]}
    marks, previous = [], None
    for m in metrics:
        if previous is not None and m["factor"] != previous:
            marks.append((m["batch_id"], f"factor {previous}->{m['factor']}"))
        previous = m["factor"]
    return (_chart("Lag per SSPKb (offsets) over batches", xs, lag, marks)
            + _chart("Throughput per batch (records/s of batch time)", xs, throughput, marks, bars=True))


_STYLE = "<style>body{font-family:sans-serif;margin:24px} td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px} table{border-collapse:collapse}</style>"


def summary_html(job: str, result: QualityResult, metrics: Sequence[dict], window: str) -> str:
    rows = "".join(
        f"<tr><td>{'PASS' if c.success else '<b style=color:#c00>FAIL</b>'}</td><td>{c.name}</td><td>{html.escape(c.describe)}</td>"
        f"<td>{c.expectation}</td><td>{c.rows:,}</td><td>{c.unexpected:,}</td><td>{html.escape(', '.join(c.examples[:5]))}</td></tr>"
        for c in result.checks
    )
    verdict = "PASSED" if result.success else "FAILED"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>DQ {html.escape(job)}: {verdict}</title>{_STYLE}
</head><body><h1>Data quality of {html.escape(job)}: {verdict}</h1><p>{html.escape(window)}.
Great Expectations Data Docs: <a href="data_docs/index.html">data_docs/index.html</a> &middot; <a href="../../summary.html">all runs</a></p>
<table><tr><th>result</th><th>check</th><th>what it proves</th><th>expectation</th><th>rows</th><th>unexpected</th><th>examples</th></tr>{rows}</table>
{_charts(metrics)}
</body></html>"""


def _verdicts(checks: Sequence[dict]) -> str:
    return ", ".join(f"{c['name']} " + ("ok" if c["success"] else f"{c['unexpected']} bad") for c in checks)


def index_html(job: str, runs: Sequence[dict], metrics: Sequence[dict]) -> str:
    """The rolling page: every run (newest first) with its window and verdict, and the job's charts."""
    rows = "".join(
        f"<tr><td>{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r['finished_ms'] / 1000))}</td><td>{html.escape(r['run'])}</td>"
        f"<td>{html.escape(r['window'])}</td><td>{'PASSED' if r['success'] else '<b style=color:#c00>FAILED</b>'}</td>"
        f"<td>{html.escape(_verdicts(r['checks']))}</td>"
        f"<td><a href='runs/{html.escape(r['folder'])}/summary.html'>report</a> &middot; "
        f"<a href='runs/{html.escape(r['folder'])}/data_docs/index.html'>Data Docs</a></td></tr>"
        for r in reversed(runs)
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>DQ {html.escape(job)}</title>{_STYLE}</head>
<body><h1>Data quality of {html.escape(job)}</h1><p>{len(runs)} runs; each validates the batches committed since the last passing one.</p>
<table><tr><th>finished</th><th>run</th><th>window</th><th>verdict</th><th>checks</th><th>links</th></tr>{rows}</table>
{_charts(metrics)}
</body></html>"""
