"""The job page shows the autosizer's decision: its inputs, its latest rescale with the record kept then, and the
prediction curve (capacity per factor against the demand and the input rate, the factors that matter marked)."""

from __future__ import annotations

from elasticity.scaling.decision import AutosizeRecord
from elasticity.views.jobview import JobView, PolicyView
from elasticity.views.page import prediction_chart, render

MS = 1_700_000_000_000
RECORD = AutosizeRecord(
    at_ms=MS,
    current=2,
    factor=6,
    needed=9,
    useful=6,
    input_rate=800.0,
    behind=12_000,
    behind_exact=True,
    demand=1428.6,
    task_rate=50.0,
    scalability=1.0,
    rescales_fitted=0,
    capacity=tuple((f, min(1000.0, 167.0 * f)) for f in range(1, 9)),
    utilization=0.7,
    catch_up_s=60.0,
    reason="800 records/s in, 12,000 behind: need 6: no factor covers 1,429/s: 6 gives the most, 1,000/s",
)


def test_the_prediction_curve_marks_the_current_the_wanted_and_the_useful_factor():
    chart = prediction_chart(RECORD)
    assert list(chart.xs) == list(range(1, 9)) and chart.x_label == "factor"
    assert [s.name for s in chart.series] == ["predicted capacity", "demand at 70% utilisation", "input rate now"]
    assert list(chart.series[0].values) == [c for _, c in RECORD.capacity]
    assert dict(chart.marks) == {2: "current 2", 6: "wants 6, order limit: 6 gives the most"}


def test_the_job_page_shows_the_autosizers_inputs_its_last_rescale_and_the_curve():
    bounds = {
        "min": 1,
        "max": 8,
        "up_cooldown_ms": 120_000,
        "down_cooldown_ms": 600_000,
        "target_lag_s": 60,
        "catch_up_s": 300,
        "utilization": 0.7,
        "confirm_ms": 20_000,
    }
    policy = PolicyView(
        kind="autosize",
        wants=6,
        reason=RECORD.reason,
        next_step="rescale to factor 6 once the autosizer has wanted it for 20 s",
        bounds=bounds,
        autosize=RECORD,
        last_autosize=(3, RECORD),
    )
    page = render(JobView(job="j", generation=3, factor=2, policy=policy))
    assert "800 records/s in, 12,000 behind: demand 1,429 records/s" in page
    assert "needed factor 9, useful factor (order limit) 6, scalability coefficient 1.00" in page
    assert "generation 3: 2 &rarr; 6" in page and "a change holds 20 s first" in page
    assert "Autosizer&#x27;s prediction" in page and "order limit: 6 gives the most" in page
