"""The one-page summary: the checks, and inline SVG charts (lag per SSPKb and
records/s over batches, factor changes marked). No JavaScript, no
network: it opens from a file anywhere."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from pathlib import Path

from elasticity.metrics.charts import CSS, svg
from elasticity.metrics.rates import charts
from elasticity.quality.history import RunPage, run_page
from elasticity.quality.suite import QualityResult


def _charts(metrics: Sequence[dict]) -> str:
    return "".join(svg(c) for c in charts(metrics))


_STYLE = (
    "<style>body{font-family:sans-serif;margin:24px} td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px} table{border-collapse:collapse}"
    + CSS
    + "</style>"
)


def summary_html(job: str, result: QualityResult, metrics: Sequence[dict], window: str) -> str:
    rows = "".join(
        f"<tr><td>{'PASS' if c.success else '<b style=color:#c00>FAIL</b>'}</td><td>{c.name}</td><td>{html.escape(c.describe)}</td>"
        f"<td>{c.expectation}</td><td>{c.rows:,}</td><td>{c.unexpected:,}</td><td>{html.escape(', '.join(c.examples[:5]))}</td></tr>"
        for c in result.checks
    )
    verdict = "PASSED" if result.success else "FAILED"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>DQ {html.escape(job)}: {verdict}</title>{_STYLE}
</head><body><h1>Data quality of {html.escape(job)}: {verdict}</h1><p>{html.escape(window)}.
Great Expectations Data Docs: <a href="data_docs/index.html">data_docs/index.html</a> &middot; <a href="../../summary.html">latest runs</a></p>
<table><tr><th>result</th><th>check</th><th>what it proves</th><th>expectation</th><th>rows</th><th>unexpected</th><th>examples</th></tr>{rows}</table>
{_charts(metrics)}
</body></html>"""


def _verdicts(checks: Sequence[dict]) -> str:
    return ", ".join(f"{c['name']} " + ("ok" if c["success"] else f"{c['unexpected']} bad") for c in checks)


INDEX_RUNS = 50
"""Runs the rolling summary page lists, the latest; the older kept runs are in `runs.jsonl` and on the job page."""


def write_index(root: Path, job: str, metrics: Sequence[dict]) -> None:
    """The rolling `summary.html`: the latest runs from the index, never a removed one."""
    page = run_page(root, limit=INDEX_RUNS)
    (root / "summary.html").write_text(index_html(job, page, metrics))


def index_html(job: str, page: RunPage, metrics: Sequence[dict]) -> str:
    """The rolling page: the latest runs (newest first) with their window and verdict, and the job's charts."""
    older = (
        "Older kept runs: <a href='runs.jsonl'>runs.jsonl</a> (a line per run) and the job page, which pages through them."
        if page.older is not None
        else ""
    )
    rows = "".join(
        f"<tr><td>{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r['finished_ms'] / 1000))}</td><td>{html.escape(r['run'])}</td>"
        f"<td>{html.escape(r['window'])}</td><td>{'PASSED' if r['success'] else '<b style=color:#c00>FAILED</b>'}</td>"
        f"<td>{html.escape(_verdicts(r['checks']))}</td>"
        f"<td><a href='runs/{html.escape(r['folder'])}/summary.html'>report</a> &middot; "
        f"<a href='runs/{html.escape(r['folder'])}/data_docs/index.html'>Data Docs</a></td></tr>"
        for r in page.runs
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>DQ {html.escape(job)}</title>{_STYLE}</head>
<body><h1>Data quality of {html.escape(job)}</h1><p>The latest {len(page.runs)} runs; each validates the batches committed
since the last passing one. {older}</p>
<table><tr><th>finished</th><th>run</th><th>window</th><th>verdict</th><th>checks</th><th>links</th></tr>{rows}</table>
{_charts(metrics)}
</body></html>"""
