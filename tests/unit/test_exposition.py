"""The jobs' Prometheus metrics: what a sample becomes in the exposition format (parsed back by
prometheus-client's own parser), and the rates over the latest batches."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from elasticity.metrics.exposition import JobSample, JobsCollector, QualityCheck
from elasticity.metrics.freshness import FreshnessWindow
from elasticity.views.job_sample import RATE_BATCHES, RATE_WINDOW_MS, rates


def scrape(samples: list[JobSample]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector(lambda: samples))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_job_s_figures_become_gauges_labelled_by_job():
    sample = JobSample(
        job="demo",
        generation=3,
        factor=4,
        virtual_tasks=8,
        generation_created_ms=1_700_000_000_000,
        lag=1234,
        lag_exact=False,
        lag_per_partition={"kafka.orders.0": 1000, "kafka.orders.1": 234},
        freshness=FreshnessWindow(batches=7, oldest_p50=1500, oldest_p99=4000, newest_p50=200, newest_p99=900),
        records_per_second=55.5,
        batches_per_second=0.25,
        rate_window_s=300.0,
        last_batch_id=42,
        last_batch_ms=1_700_000_100_000,
        failed_attempts_last_hour=2,
        last_failure_ms=1_700_000_050_000,
        quality_success=False,
        quality_finished_ms=1_700_000_060_000,
        quality_checks=(QualityCheck(name="loss", success=True), QualityCheck(name="order", success=False)),
        rescale_ns={"job-model-generation-ns": 17_600_000, "checkpoint-compute-ns": 350_000},
        rescale_generation=3,
    )
    got = scrape([sample, JobSample(job="broken", read_ok=False, error="store down")])
    job = (("job", "demo"),)
    assert got[("elasticity_up", job)] == 1 and got[("elasticity_up", (("job", "broken"),))] == 0
    assert got[("elasticity_lag_records", job)] == 1234 and got[("elasticity_lag_exact", job)] == 0
    assert got[("elasticity_lag_probe_success", job)] == 1
    assert got[("elasticity_partition_lag_records", (("job", "demo"), ("partition", "kafka.orders.1")))] == 234
    q = (("job", "demo"), ("quantile", "0.99"), ("record", "oldest"))
    assert got[("elasticity_freshness_seconds", q)] == 4.0
    assert got[("elasticity_freshness_seconds", (("job", "demo"), ("quantile", "0.5"), ("record", "newest")))] == 0.2
    assert got[("elasticity_records_per_second", job)] == 55.5 and got[("elasticity_batches_per_second", job)] == 0.25
    assert got[("elasticity_elasticity_factor", job)] == 4 and got[("elasticity_virtual_tasks", job)] == 8
    assert got[("elasticity_last_batch_timestamp_seconds", job)] == 1_700_000_100
    assert got[("elasticity_failed_attempts_last_hour", job)] == 2
    assert got[("elasticity_data_quality_success", job)] == 0
    assert got[("elasticity_data_quality_check_success", (("check", "order"), ("job", "demo")))] == 0
    assert got[("elasticity_rescale_duration_seconds", (("job", "demo"), ("phase", "job_model_generation")))] == 0.0176
    assert ("elasticity_rescale_duration_seconds", (("job", "demo"), ("phase", "state_move"))) not in got
    assert {k for k in got if k[1] == (("job", "broken"),)} == {("elasticity_up", (("job", "broken"),))}


def test_unknown_figures_are_left_out_not_zero():
    got = scrape([JobSample(job="new", lag_error="no broker")])  # never ran, the brokers down
    names = {name for name, _ in got}
    assert names == {"elasticity_up", "elasticity_lag_probe_success", "elasticity_failed_attempts_last_hour"}
    assert got[("elasticity_lag_probe_success", (("job", "new"),))] == 0


def _batch(batch_id: int, committed: int, records: int) -> dict:
    return {"batch_id": batch_id, "committed_ms": committed, "records_read": records}


def test_rates_over_the_window():
    now = 1_000_000_000
    batches = [_batch(1, now - RATE_WINDOW_MS - 1, 999), _batch(2, now - 100_000, 300), _batch(3, now - 10_000, 600)]
    records_s, batches_s, window_s = rates(batches, now)
    assert window_s == RATE_WINDOW_MS / 1000
    assert records_s == 900 / window_s and batches_s == 2 / window_s
    assert rates(batches[:1], now) == (None, None, None)


@given(st.lists(st.tuples(st.integers(1, RATE_WINDOW_MS), st.integers(0, 10_000)), min_size=RATE_BATCHES, max_size=RATE_BATCHES))
def test_a_busy_job_s_rate_is_over_the_span_of_its_latest_batches(rows):
    """All of the latest batches fall inside the window: the rate is over the span from the oldest's commit, that
    batch left out, so it never counts records read before the span began."""
    now = 10_000_000
    rows = sorted(rows, reverse=True)  # ages, oldest first
    batches = [_batch(i, now - age + 1, n) for i, (age, n) in enumerate(rows)]
    records_s, batches_s, window_s = rates(batches, now)
    span = max((now - batches[0]["committed_ms"]) / 1000, 1e-3)
    assert window_s == span
    assert records_s == sum(b["records_read"] for b in batches[1:]) / span
    assert batches_s == (len(batches) - 1) / span


def test_a_batch_summary_becomes_otel_stats_with_the_job_attribute():
    from elasticity.airflow.otel_metrics import batch_samples
    from elasticity.metrics.summary import BatchSummary

    summary = BatchSummary(job="demo", batch_id=7, generation=2, factor=4, records_read=120, processed=100, skipped=20)
    summary.lag_left, summary.durations_ms, summary.metrics = 33, {"total": 812.5}, {"commit-ns": 9000, "task-count": 8}
    summary.oldest_timestamp_ms, summary.newest_timestamp_ms = 1_000, 1_900
    summary.commit_at(2_000)
    got = {(s.name, s.kind): s.value for s in batch_samples("demo", json.loads(summary.to_json()))}
    assert got == {
        ("elasticity.lag", "gauge"): 33,
        ("elasticity.commit-ns", "gauge"): 9000,
        ("elasticity.task-count", "gauge"): 8,
        ("elasticity.batch-freshness-oldest-ms", "gauge"): 1000,
        ("elasticity.batch-freshness-newest-ms", "gauge"): 100,
        ("elasticity.records-read", "counter"): 120,
        ("elasticity.processed", "counter"): 100,
        ("elasticity.skipped-envelopes", "counter"): 20,
        ("elasticity.dead-lettered", "counter"): 0,
        ("elasticity.batches", "counter"): 1,
        ("elasticity.batch-duration", "timing"): 812.5,
    }
    assert {tuple(s.tags.items()) for s in batch_samples("demo", json.loads(summary.to_json()))} == {(("job", "demo"),)}
