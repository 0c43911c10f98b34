"""A value from a job's config, a check or a run goes into the job page and the data-quality reports as
text: a `<script>` in it is shown, never run. The markup is in templates that ship as package data."""

from __future__ import annotations

import fnmatch
import tomllib

import pytest

from elasticity.quality.history import RunPage
from elasticity.quality.report import index_html, summary_html
from elasticity.quality.suite import CheckResult, QualityResult
from elasticity.views.jobview import EngineHealth, JobView, PolicyView, RunInProgress, SspkbRow, StoreRow, TaskRow
from elasticity.views.page import render
from tests.support.library import REPO

HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
MS = 1_700_000_000_000


def hostile_view() -> JobView:
    run = {"finished_ms": MS, "run": HOSTILE, "window": HOSTILE, "success": False, "folder": HOSTILE}
    run["checks"] = [{"name": HOSTILE, "describe": HOSTILE, "success": False, "rows": 3, "unexpected": 1}]
    return JobView(
        job=HOSTILE,
        generation=1,
        factor=2,
        tasks=[
            TaskRow(
                task=HOSTILE,
                container=HOSTILE,
                sspkbs=(SspkbRow(HOSTILE, 5, 0),),
                rate=None,
                stores=(StoreRow(HOSTILE, {"f": HOSTILE}, 10),),
            )
        ],
        lag_error=HOSTILE,
        rescales=[{"generation": 1, "factor": 2, "origin": HOSTILE, "reason": HOSTILE, "created_ms": MS}],
        policy=PolicyView(
            kind="schedule", wants=2, reason=HOSTILE, next_step=HOSTILE, hold_factor=2, hold_until_ms=MS, hold_reason=HOSTILE
        ),
        quality=run,
        quality_runs=[run],
        engine=EngineHealth(HOSTILE, False, MS, HOSTILE),
        run=RunInProgress(run_id=HOSTILE, started_ms=MS, attempt=2, expected_s=60.0, stuck=True, last_error=HOSTILE),
    )


def test_the_job_page_shows_hostile_values_as_text():
    page = render(hostile_view())
    assert HOSTILE not in page
    # title, heading, the form's data-job; the engine's address and error, the run and its error; the lag note;
    # the container (summary and row), task, SSPKb, store and its marker (title and text); the rescale's origin
    # and reason; the policy's reason, next step and hold; the quality run, window, check name and description
    assert page.count(ESCAPED) == 3 + 4 + 1 + 7 + 2 + 3 + 4
    assert page.count("<script>") == 1  # the page's own


def test_a_page_without_a_generation_escapes_the_job_name():
    page = render(JobView(job=HOSTILE, generation=None, factor=None))
    assert HOSTILE not in page and page.count(ESCAPED) == 2


def test_the_data_quality_summary_escapes_the_check_name_and_expectation():
    check = CheckResult(
        name=HOSTILE, describe=HOSTILE, expectation=HOSTILE, success=False, rows=10, unexpected=1, examples=[HOSTILE]
    )
    page = summary_html(HOSTILE, QualityResult([check], "docs"), [], HOSTILE)
    assert "<script>" not in page
    assert page.count(ESCAPED) == 2 + 1 + 4  # title and heading, window, name, describe, expectation, example


def test_the_rolling_index_escapes_runs_and_checks():
    run = {"finished_ms": MS, "run": HOSTILE, "window": HOSTILE, "success": False, "folder": HOSTILE}
    run["checks"] = [{"name": HOSTILE, "success": False, "unexpected": 1}]
    page = index_html(HOSTILE, RunPage((run,), None), [])
    assert "<script>" not in page
    assert page.count(ESCAPED) == 2 + 5  # title and heading, run, window, check, both links


@pytest.mark.parametrize("package", ["views", "quality"])
def test_templates_and_static_files_are_package_data(package: str):
    """A wheel carries every template and static file: each matches a pattern of pyproject's package-data."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][f"elasticity.{package}"]
    root = REPO / "include" / "elasticity" / package
    assets = [p.relative_to(root).as_posix() for d in ("templates", "static") for p in (root / d).iterdir()]
    assert assets and all(any(fnmatch.fnmatch(a, p) for p in patterns) for a in assets)
