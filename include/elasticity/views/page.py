"""The job page as HTML, server-rendered in the look of Airflow 3's UI, with a
little inline JavaScript: local times ("5 min ago"), and the rescale form,
whose preview asks this plugin for the dry run and whose apply triggers
`elastic_rescale` through Airflow's own REST API with the user's session, so
Airflow decides whether this user may rescale.

The markup is `templates/job_page.html` (autoescaped: every value goes in as
text), its style and script `static/job_page.css` and `static/job_page.js`,
inlined so the page needs no route of its own for them."""

from __future__ import annotations

import math
import time
import urllib.parse
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import jinja2

from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
from elasticity.metrics.charts import CSS as CHART_CSS
from elasticity.metrics.charts import Chart, Series, svg
from elasticity.metrics.rates import charts
from elasticity.scaling.decision import AutosizeRecord
from elasticity.views.jobview import JobView, StoreRow, TaskRow

PAGE_SIZE = 100  # virtual tasks per page of the task table
RESCALE_DAG = "elastic_rescale"
BATCHES_SHOWN = 10  # the latest batches in the table of recent batches
POLICY_KINDS = {
    "schedule": "time schedule (job.elasticity.schedule)",
    "autosize": "autosizer (job.elasticity.autosize)",
    "none": "none: manual rescales only",
}


def utc(ms: int) -> str:
    """A time as the page shows it without JavaScript."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def age(ms: int | None) -> str:
    """A freshness as the page shows it: ms below a second, then seconds, minutes, hours."""
    if ms is None:
        return "-"
    if abs(ms) < 1000:
        return f"{ms} ms"
    if abs(ms) < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min" if abs(ms) < 3_600_000 else f"{ms / 3_600_000:.1f} h"


def disk_size(s: StoreRow) -> str:
    if s.disk_bytes is None:
        return "size ?"
    return f"{s.disk_bytes / 1e6:,.1f} MB" if s.disk_bytes >= 1e6 else f"{s.disk_bytes / 1e3:,.0f} kB"


def markers(s: StoreRow) -> str:
    """The store's state markers by backup factory, the two built-in ones by a short name."""
    short = {BLOB_STORE_FACTORY: "blobstore", KAFKA_CHANGELOG_FACTORY: "kafka"}
    return "; ".join(f"{short.get(f, f)}: {m}" for f, m in sorted(s.markers.items())) or "no marker yet"


def environment(package: str) -> jinja2.Environment:
    """The templates of a package's `templates/` folder, autoescaped; `fmt` is Python's format spec (`|fmt(',')`)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(fmt=format, quote=urllib.parse.quote, utc=utc)
    return env


ENV = environment("elasticity.views")
ENV.filters.update(age=age, disk_size=disk_size, markers=markers)


@cache
def static(name: str) -> str:
    """A file of the package's `static/` folder (package data)."""
    return (files("elasticity.views") / "static" / name).read_text()


@dataclass(frozen=True, kw_only=True)
class TaskPage:
    """One page of the virtual-task table and the per-container summary above it."""

    page: int
    pages: int
    first: int  # index of the page's first task
    last: int  # number of the page's last task (1-based)
    rows: list[TaskRow]
    containers: list[tuple[str, int, int, int]]  # container, its tasks, their lag, its first page


def task_page(view: JobView, page: int) -> TaskPage:
    pages = max(1, math.ceil(len(view.tasks) / PAGE_SIZE))
    page = min(max(1, page), pages)
    first = (page - 1) * PAGE_SIZE
    containers: dict[str, list[int]] = {}  # container -> [tasks, lag, its first page]
    for i, t in enumerate(view.tasks):
        c = containers.setdefault(t.container, [0, 0, i // PAGE_SIZE + 1])
        c[0] += 1
        c[1] += view.lag_per_task.get(t.task, 0)
    return TaskPage(
        page=page,
        pages=pages,
        first=first,
        last=min(first + PAGE_SIZE, len(view.tasks)),
        rows=view.tasks[first : first + PAGE_SIZE],
        containers=[(c, n, lag, p) for c, (n, lag, p) in containers.items()],
    )


def prediction_chart(record: AutosizeRecord) -> Chart:
    """The autosizer's prediction curve: the capacity it predicts per factor against the demand it sizes for and
    the input rate now, with the current factor, the one it wants and the order limit's useful factor marked."""
    xs = [f for f, _ in record.capacity]
    marks = {record.useful: f"order limit: {record.useful} gives the most"}
    marks[record.current] = f"current {record.current}" + (f", {marks[record.current]}" if record.current in marks else "")
    if record.factor != record.current:
        marks[record.factor] = f"wants {record.factor}" + (f", {marks[record.factor]}" if record.factor in marks else "")
    overhead = (
        f", batches of {record.batch_records:,} with {record.batch_overhead_s:.2f} s outside their process stage"
        if record.batch_overhead_s
        else ""
    )
    return Chart(
        title=f"Autosizer's prediction (scalability coefficient {record.scalability:.2f}, {record.rescales_fitted} rescales "
        f"fitted{overhead})",
        y_unit="records/s",
        xs=xs,
        series=[
            Series("predicted capacity", [c for _, c in record.capacity]),
            Series(f"demand at {record.utilization:.0%} utilisation", [record.demand] * len(xs)),
            Series("input rate now", [record.input_rate] * len(xs)),
        ],
        marks=sorted(marks.items()),
        x_label="factor",
    )


def _query(**params: int | None) -> str:
    return "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})


def _batches_pager(view: JobView) -> tuple[str | None, str | None, str]:
    """Links to the newest page of batches and to the next older one, when there are such pages."""
    return (
        _query(runs_before=view.runs_before) + "#batches" if view.before is not None else None,
        _query(before=view.older_batches, runs_before=view.runs_before) + "#batches" if view.older_batches is not None else None,
        "batches",
    )


def _runs_pager(view: JobView) -> tuple[str | None, str | None, str]:
    return (
        _query(before=view.before) + "#quality" if view.runs_before is not None else None,
        _query(before=view.before, runs_before=view.older_runs) + "#quality" if view.older_runs is not None else None,
        "runs",
    )


def render(view: JobView, page: int = 1, *, can_trigger: bool = True) -> str:
    """The page; the latest batches' table shows what they did, where they ran, and the stores they had to
    restore (a slot that moved executor restores its stores from their backends)."""
    return ENV.get_template("job_page.html").render(
        view=view,
        can_trigger=can_trigger,
        rescale_dag=RESCALE_DAG,
        policy_kinds=POLICY_KINDS,
        css=static("job_page.css") + CHART_CSS,
        js=static("job_page.js"),
        charts=[svg(c) for c in charts(view.batches)] if view.generation is not None else [],
        prediction=svg(prediction_chart(view.policy.autosize)) if view.policy and view.policy.autosize else None,
        batches=list(reversed(view.batches[-BATCHES_SHOWN:])),
        batches_pager=_batches_pager(view),
        runs_pager=_runs_pager(view),
        tasks=task_page(view, page),
    )
