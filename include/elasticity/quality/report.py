"""The one-page summary: the checks, and inline SVG charts (lag per SSPKb and
records/s over batches, factor changes marked). No JavaScript, no
network: it opens from a file anywhere. The markup is `templates/run_summary.html`
and `templates/runs_index.html`, autoescaped: a check's name, its expectation
and a run's window go in as text."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cache
from importlib.resources import files

import jinja2

from elasticity.checkpoint.store import CheckpointStore
from elasticity.metrics.charts import CSS as CHART_CSS
from elasticity.metrics.charts import svg
from elasticity.metrics.rates import charts
from elasticity.quality.history import RunPage, run_page
from elasticity.quality.report_files import ReportFiles
from elasticity.quality.suite import QualityResult

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("elasticity.quality", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(fmt=format, localtime=lambda ms: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)))


@cache
def _css() -> str:
    return (files("elasticity.quality") / "static" / "report.css").read_text().rstrip("\n") + CHART_CSS


def _charts(metrics: Sequence[dict]) -> list[str]:
    return [svg(c) for c in charts(metrics)]


def summary_html(job: str, result: QualityResult, metrics: Sequence[dict], window: str) -> str:
    return ENV.get_template("run_summary.html").render(
        job=job,
        verdict="PASSED" if result.success else "FAILED",
        window=window,
        checks=result.checks,
        charts=_charts(metrics),
        css=_css(),
    )


INDEX_RUNS = 50
"""Runs the rolling summary page lists, the latest; the older kept runs are in the store's index and on the job page."""


def write_index(reports: ReportFiles, store: CheckpointStore, job: str, metrics: Sequence[dict]) -> None:
    """The rolling `summary.html` at the report location: the latest runs from the index, never a removed one."""
    reports.write_text("summary.html", index_html(job, run_page(store, job, limit=INDEX_RUNS), metrics))


def index_html(job: str, page: RunPage, metrics: Sequence[dict]) -> str:
    """The rolling page: the latest runs (newest first) with their window and verdict, and the job's charts."""
    return ENV.get_template("runs_index.html").render(
        job=job, runs=page.runs, older=page.older, charts=_charts(metrics), css=_css()
    )
