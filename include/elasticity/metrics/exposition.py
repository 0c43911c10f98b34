"""The jobs' metrics in Prometheus' exposition format: a custom collector (prometheus-client's `Collector`
protocol) that turns what one scrape read of each job (`JobSample`, read from the checkpoint store and the
brokers by `elasticity.views.job_sample`) into metric families, at scrape time. Nothing is kept between scrapes
and nothing is registered globally: the figures are the store's, so they are right whichever worker ran the
batch, and any API server process answers the same.

Names follow Prometheus' conventions: an `elasticity_` prefix, base units (seconds, records), one gauge family
per figure. The elastic job is the `job` label, as the Pushgateway's metrics carry theirs: a scrape config keeps
it with `honor_labels: true` (otherwise Prometheus moves it to `exported_job` and sets `job` to the scrape's)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from elasticity.metrics.freshness import FreshnessWindow

PREFIX = "elasticity"
JOB_LABEL = "job"
RESCALE_PHASES = (  # the rescale metrics' keys (SEP-32's names) -> the `phase` label
    ("job-model-generation-ns", "job_model_generation"),
    ("checkpoint-compute-ns", "checkpoint_compute"),
    ("state-move-ns", "state_move"),
)


@dataclass(frozen=True, kw_only=True)
class QualityCheck:
    name: str
    success: bool


@dataclass(frozen=True, kw_only=True)
class JobSample:
    """What one scrape read of one job. `read_ok` False: its config or store could not be read (`error` says
    why) and nothing else is known; `lag` None: the brokers did not answer (`lag_error`)."""

    job: str
    read_ok: bool = True
    error: str | None = None
    generation: int | None = None  # None: the job has not run (its first batch writes generation 1)
    factor: int | None = None
    virtual_tasks: int | None = None
    lag: int | None = None  # records left to process, each counted once (at most that many when not lag_exact)
    lag_exact: bool = True
    lag_per_partition: dict[str, int] = field(default_factory=dict)  # input partition (system.stream.partition) -> records behind
    lag_error: str | None = None
    freshness: FreshnessWindow | None = None  # over the last hour's batches
    records_per_second: float | None = None  # records read per second over the rate window (None: no batch in it)
    batches_per_second: float | None = None
    rate_window_s: float | None = None
    last_batch_id: int | None = None
    last_batch_ms: int | None = None  # when the latest batch committed
    failed_attempts_last_hour: int = 0
    last_failure_ms: int | None = None
    quality_success: bool | None = None  # the latest data-quality run (None: none kept)
    quality_finished_ms: int | None = None
    quality_checks: tuple[QualityCheck, ...] = ()
    rescale_ns: dict[str, int] = field(default_factory=dict)  # the latest rescale: SEP-32 metric name -> ns
    rescale_generation: int | None = None
    generation_created_ms: int | None = None


@dataclass(frozen=True)
class MetricSpec:
    name: str
    doc: str
    labels: tuple[str, ...] = ()


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("up", "1 when the job's config and checkpoint store were read in this scrape, else 0"),
    MetricSpec("lag_records", "Records left to process, each counted once: the input partitions' ends against the checkpoints"),
    MetricSpec("lag_exact", "1 when lag_records is exact, 0 when it is an upper bound (records processed ahead not counted)"),
    MetricSpec("lag_probe_success", "1 when the brokers answered the lag probe of this scrape, else 0 (no lag_records then)"),
    MetricSpec(
        "partition_lag_records",
        "Records behind per input partition (its end minus its slowest virtual task's offset)",
        ("partition",),
    ),
    MetricSpec(
        "freshness_seconds",
        "Age of the batches' oldest and newest records at commit, p50 and p99 over the last hour",
        ("record", "quantile"),
    ),
    MetricSpec("freshness_window_batches", "Batches with timestamped records committed in the last hour (the freshness window)"),
    MetricSpec("records_per_second", "Records read per second over the batches committed in the rate window"),
    MetricSpec("batches_per_second", "Batches committed per second over the rate window"),
    MetricSpec("rate_window_seconds", "The window records_per_second and batches_per_second are measured over"),
    MetricSpec("last_batch_id", "Id of the latest committed batch"),
    MetricSpec("last_batch_timestamp_seconds", "When the latest batch committed (Unix time)"),
    MetricSpec("elasticity_factor", "The current generation's elasticity factor (virtual tasks per input partition)"),
    MetricSpec("virtual_tasks", "Virtual tasks of the current generation"),
    MetricSpec("generation", "The job model's current generation number"),
    MetricSpec("generation_timestamp_seconds", "When the current generation was written (Unix time)"),
    MetricSpec("failed_attempts_last_hour", "Task attempts of the job's DAGs that failed in the last hour"),
    MetricSpec("last_failure_timestamp_seconds", "When the latest failed task attempt was recorded (Unix time)"),
    MetricSpec("data_quality_success", "1 when the latest data-quality run passed, 0 when it failed"),
    MetricSpec("data_quality_timestamp_seconds", "When the latest data-quality run finished (Unix time)"),
    MetricSpec("data_quality_check_success", "Each check of the latest data-quality run: 1 passed, 0 failed", ("check",)),
    MetricSpec(
        "rescale_duration_seconds",
        "The latest rescale's phases (SEP-32's job-model-generation-ns, checkpoint-compute-ns, state-move-ns)",
        ("phase",),
    ),
    MetricSpec("rescale_generation", "The generation the latest measured rescale wrote"),
)


def _families() -> dict[str, GaugeMetricFamily]:
    return {s.name: GaugeMetricFamily(f"{PREFIX}_{s.name}", s.doc, labels=[JOB_LABEL, *s.labels]) for s in METRICS}


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def add_sample(families: dict[str, GaugeMetricFamily], s: JobSample) -> None:
    """One job's samples into the families (absent figures are left out, never exported as 0)."""

    def put(name: str, value: float | int | bool | None, *labels: str) -> None:
        if value is not None:
            families[name].add_metric([s.job, *labels], float(value))

    put("up", s.read_ok)
    if not s.read_ok:
        return
    put("lag_probe_success", s.lag_error is None and s.generation is not None)
    if s.lag is not None:
        put("lag_records", s.lag)
        put("lag_exact", s.lag_exact)
    for partition, behind in sorted(s.lag_per_partition.items()):
        put("partition_lag_records", behind, partition)
    if s.freshness is not None:
        f = s.freshness
        for record, p50, p99 in (("oldest", f.oldest_p50, f.oldest_p99), ("newest", f.newest_p50, f.newest_p99)):
            put("freshness_seconds", p50 / 1000, record, "0.5")
            put("freshness_seconds", p99 / 1000, record, "0.99")
        put("freshness_window_batches", f.batches)
    put("records_per_second", s.records_per_second)
    put("batches_per_second", s.batches_per_second)
    put("rate_window_seconds", s.rate_window_s)
    put("last_batch_id", s.last_batch_id)
    put("last_batch_timestamp_seconds", _seconds(s.last_batch_ms))
    put("elasticity_factor", s.factor)
    put("virtual_tasks", s.virtual_tasks)
    put("generation", s.generation)
    put("generation_timestamp_seconds", _seconds(s.generation_created_ms))
    put("failed_attempts_last_hour", s.failed_attempts_last_hour)
    put("last_failure_timestamp_seconds", _seconds(s.last_failure_ms))
    put("data_quality_success", s.quality_success)
    put("data_quality_timestamp_seconds", _seconds(s.quality_finished_ms))
    for check in s.quality_checks:
        put("data_quality_check_success", check.success, check.name)
    for key, phase in RESCALE_PHASES:
        if key in s.rescale_ns:
            put("rescale_duration_seconds", s.rescale_ns[key] / 1e9, phase)
    put("rescale_generation", s.rescale_generation)


def families_of(samples: Iterable[JobSample]) -> list[Metric]:
    """The metric families of these samples; a family no job has a sample of is left out."""
    families = _families()
    for s in samples:
        add_sample(families, s)
    return [f for f in families.values() if f.samples]


class JobsCollector(Collector):
    """prometheus-client's custom collector: `read()` is called at each scrape (by `generate_latest`), and
    returns the samples of the jobs this scrape may see."""

    def __init__(self, read: Callable[[], Sequence[JobSample]]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        yield from families_of(self.read())

    def describe(self) -> list[Metric]:
        """No description ahead: registering the collector must not read every store."""
        return []
