"""What the batch metrics say about the effect of a rescale: lag, records/s per
batch and per virtual task, over batches, with the factor changes marked. Read
from the summaries the store keeps (`CheckpointStore.metrics`), oldest first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from elasticity.metrics.charts import Chart, Series

TOP_LAG = 5  # SSPKb drawn one by one; the rest are summed into "others"


def factor_marks(metrics: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    marks, previous = [], None
    for m in metrics:
        if previous is not None and m["factor"] != previous:
            marks.append((m["batch_id"], f"factor {previous}\u2192{m['factor']}"))
        previous = m["factor"]
    return marks


def batch_rate(m: Mapping[str, Any]) -> float:
    """Records read per second of the batch's wall time."""
    return m["records_read"] / max(m["durations_ms"].get("total", 0) / 1000, 1e-3)


def task_rates(m: Mapping[str, Any]) -> dict[str, float]:
    """Records per second of each virtual task's own processing time (tasks that had records)."""
    records = m["metrics"].get("records", {})
    ns = m["metrics"].get("process-ns", {})
    return {t: n / (ns[t] / 1e9) for t, n in records.items() if n and ns.get(t)}


def lag_series(metrics: Sequence[Mapping[str, Any]], top: int = TOP_LAG) -> list[Series]:
    """The SSPKb with the most lag at the latest batch (then over the window), and "others" summed."""
    lags = [m["metrics"].get("lag", {}) for m in metrics]
    peak: dict[str, int] = {}
    for lag in lags:
        for k, v in lag.items():
            peak[k] = max(peak.get(k, 0), v)
    latest = lags[-1] if lags else {}
    ranked = sorted(peak, key=lambda k: (-latest.get(k, 0), -peak[k], k))
    shown, rest = ranked[:top], set(ranked[top:])
    series = [Series(k, [lag.get(k, 0) for lag in lags]) for k in shown]
    if rest:
        series.append(Series("others", [sum(v for k, v in lag.items() if k in rest) for lag in lags]))
    return series


def charts(metrics: Sequence[Mapping[str, Any]]) -> list[Chart]:
    """Lag, records/s per batch, and records/s per virtual task (mean and slowest)."""
    xs = [m["batch_id"] for m in metrics]
    marks = factor_marks(metrics)
    per_task = [task_rates(m) for m in metrics]
    return [
        Chart(
            title=f"Lag per SSPKb (top {TOP_LAG} and others)", y_unit="offsets", xs=xs, series=lag_series(metrics), marks=marks
        ),
        Chart(
            title="Throughput per batch",
            y_unit="records/s",
            xs=xs,
            series=[Series("records/s of batch time", [batch_rate(m) for m in metrics])],
            marks=marks,
            bars=True,
        ),
        Chart(
            title="Records/s per virtual task",
            y_unit="records/s",
            xs=xs,
            series=[
                Series("mean over virtual tasks", [sum(r.values()) / len(r) if r else 0 for r in per_task]),
                Series("slowest virtual task", [min(r.values()) if r else 0 for r in per_task]),
            ],
            marks=marks,
        ),
    ]
