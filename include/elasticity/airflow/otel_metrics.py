"""A run's batch metrics through OpenTelemetry when Airflow's own metrics go there (`[metrics] otel_on`, with
`statsd_on` off: Airflow's stats backend is then its OpenTelemetry logger). They are sent with Airflow's stats
plumbing, so they reach the collector Airflow's metrics reach, under its prefix and service name, filtered by its
`metrics_allow_list`/`metrics_block_list`: the OTLP endpoint is `[metrics] otel_host`/`otel_port` (or the
standard `OTEL_EXPORTER_OTLP_*` variables, which win), protobuf over HTTP unless they say gRPC.

The figures are the committed batches' summaries as the store has them (whichever process ran the batches:
this task, or a spark-submit driver), reported by the micro-batch task once its batches committed, and flushed
at once (not at the next export interval). With StatsD on instead, `elasticity.metrics.reporters` already
sends them to Airflow's StatsD; without either, nothing is sent.

Names: `<prefix>.elasticity.<SEP-32 name>` with the attribute `job`: gauges `lag`, `task-count`,
`keyhash-compute-ns`, `process-ns-per-message`, `total-input-consumption-ns`, `commit-ns`,
`batch-freshness-oldest-ms`, `batch-freshness-newest-ms`; counters `records-read`, `processed`,
`skipped-envelopes`, `dead-lettered`, `batches`; the batch's wall time as the histogram `batch-duration`
(Airflow's timing, in ms)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from elasticity.metrics.freshness import NEWEST_GAUGE, OLDEST_GAUGE
from elasticity.metrics.job_metrics import BATCH_GAUGES

log = logging.getLogger(__name__)

PREFIX = "elasticity"
COUNTERS = (
    ("records_read", "records-read"),
    ("processed", "processed"),
    ("skipped", "skipped-envelopes"),
    ("dead_lettered", "dead-lettered"),
)


@dataclass(frozen=True)
class Sample:
    """One stat for Airflow's Stats: `kind` gauge, counter or timing (ms)."""

    name: str
    value: float
    kind: str
    tags: dict[str, str]


def batch_samples(job: str, summary: Mapping[str, Any]) -> list[Sample]:
    """A committed batch's summary (the store's JSON) as stats with the attribute `job`."""
    tags = {"job": job}
    m = summary.get("metrics", {})
    out = [Sample(f"{PREFIX}.lag", summary.get("lag_left", 0), "gauge", tags)]
    out += [Sample(f"{PREFIX}.{k}", m[k], "gauge", tags) for k in BATCH_GAUGES if isinstance(m.get(k), int)]
    if fresh := summary.get("freshness_ms"):
        out += [Sample(f"{PREFIX}.{OLDEST_GAUGE}", fresh["oldest"], "gauge", tags)]
        out += [Sample(f"{PREFIX}.{NEWEST_GAUGE}", fresh["newest"], "gauge", tags)]
    out += [Sample(f"{PREFIX}.{name}", summary.get(key, 0), "counter", tags) for key, name in COUNTERS]
    out.append(Sample(f"{PREFIX}.batches", 1, "counter", tags))
    if (total := summary.get("durations_ms", {}).get("total")) is not None:
        out.append(Sample(f"{PREFIX}.batch-duration", total, "timing", tags))
    return out


def otel_on() -> bool:
    """Airflow's stats backend is its OpenTelemetry logger: otel_on, and not statsd_on (which Airflow prefers)."""
    from airflow.sdk.configuration import conf

    return conf.getboolean("metrics", "otel_on", fallback=False) and not conf.getboolean("metrics", "statsd_on", fallback=False)


def _stats() -> Any:
    """Airflow's stats module of this process, initialized as a task runner initializes it when nothing has (a
    `dag.test()` runs tasks in its own process without the runner's start-up)."""
    from airflow.sdk._shared.observability.metrics import stats
    from airflow.sdk.configuration import conf
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    if getattr(stats, "_factory", None) is None:
        stats.initialize(factory=get_stats_factory(), export_legacy_names=conf.getboolean("metrics", "legacy_names_on"))
    return stats


def report_batches(job: str, summaries: Iterable[Mapping[str, Any]]) -> int:
    """Send the batches' stats through Airflow's OpenTelemetry metrics and flush them; returns how many stats
    were sent (0 when Airflow's metrics do not go to OpenTelemetry). Never raises: metrics must not fail the
    work they measure."""
    if not otel_on():
        return 0
    try:
        stats = _stats()
        sent = 0
        for summary in summaries:
            for s in batch_samples(job, summary):
                if s.kind == "gauge":
                    stats.gauge(s.name, s.value, tags=s.tags)
                elif s.kind == "counter":
                    stats.incr(s.name, int(s.value), tags=s.tags)
                else:
                    stats.timing(s.name, timedelta(milliseconds=s.value), tags=s.tags)
                sent += 1
        from opentelemetry import metrics

        provider = metrics.get_meter_provider()
        if hasattr(provider, "force_flush"):
            provider.force_flush()
        return sent
    except Exception as e:  # noqa: BLE001 - a collector down, a bad endpoint: logged, the batches stand
        log.warning("job %r: batch metrics not sent to OpenTelemetry: %s", job, e)
        return 0
