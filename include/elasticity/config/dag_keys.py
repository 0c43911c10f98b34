"""The keys of how a job's factor is chosen (a schedule, the autosizer, a person's hold) and of its Airflow
DAGs: how micro-batches are triggered, the connections, retention and maintenance. Part of `JobConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from elasticity.config.keys import (
    MAX_ELASTICITY_FACTOR,
    key,
)
from elasticity.config.parsers import (
    choice,
    flag,
    fraction,
    int_range,
    nonempty,
)


@dataclass(frozen=True, kw_only=True)
class DagKeys:
    """Choosing the factor, and the Airflow DAGs."""

    elasticity_schedule: str | None = key(
        "job.elasticity.schedule",
        nonempty,
        None,
        doc="Scheduled factors: '<cron> -> <factor>; ...' (e.g. '0 8 * * * -> 8; 0 20 * * * -> 2').",
    )
    autosize: bool = key(
        "job.elasticity.autosize",
        flag,
        "false",
        doc="Let the autosizer choose the factor: a DS2 controller in Airflow's triggerer sizes the job to its input rate "
        "and backlog from each virtual task's measured rate, within the per-key order limit and the threads.",
    )
    autosize_min: int = key(
        "job.elasticity.autosize.min",
        int_range(1, MAX_ELASTICITY_FACTOR),
        "1",
        doc="Smallest factor the autosizer may choose.",
    )
    autosize_max: int = key(
        "job.elasticity.autosize.max",
        int_range(1, MAX_ELASTICITY_FACTOR),
        "16",
        doc="Largest factor the autosizer may choose.",
    )
    autosize_cooldown_ms: int = key(
        "job.elasticity.autosize.cooldown.ms",
        int_range(0),
        "600000",
        doc="The scale-down cool-down where job.elasticity.autosize.scale.down.cooldown.ms is not set (the single "
        "cool-down of earlier versions).",
    )
    autosize_target_lag_s: int = key(
        "job.elasticity.autosize.target.lag.seconds",
        int_range(1),
        "60",
        doc="More records behind than this many seconds of input is lag above target: the autosizer never scales down then.",
    )
    autosize_catch_up_s: int = key(
        "job.elasticity.autosize.catch.up.seconds",
        int_range(1),
        "300",
        doc="The autosizer sizes the job to drain its backlog within this, beside the input (the Flink autoscaler's "
        "catch-up duration, 5 minutes by default there too): shorter sizes a step up for its backlog, above what "
        "the input alone needs.",
    )
    autosize_utilization_target: float = key(
        "job.elasticity.autosize.utilization.target",
        fraction,
        "0.7",
        doc="Share of its predicted capacity the autosizer sizes the job to use, the rest being headroom.",
    )
    autosize_scale_up_cooldown_ms: int = key(
        "job.elasticity.autosize.scale.up.cooldown.ms",
        int_range(0),
        "120000",
        doc="The autosizer scales up no sooner than this after the last change: short, so a load step is met at once.",
    )
    autosize_scale_down_cooldown_ms: int = key(
        "job.elasticity.autosize.scale.down.cooldown.ms",
        int_range(0),
        "600000",
        doc="The autosizer scales down no sooner than this after the last change: longer, so a passing dip does not "
        "flap the factor.",
    )
    autosize_scale_down_utilization: float = key(
        "job.elasticity.autosize.scale.down.utilization",
        fraction,
        "0.4",
        doc="The autosizer scales down only while the load uses less than this share of the current factor's predicted "
        "capacity (the Flink autoscaler's utilisation boundary): a factor a backlog raised stays while the input alone "
        "still uses it well.",
    )
    autosize_confirm_ms: int = key(
        "job.elasticity.autosize.confirm.ms",
        int_range(0),
        "20000",
        doc="A change the autosizer wants must hold this long (the same direction, poll after poll) before it starts "
        "the rescale: a burst shorter than this changes nothing.",
    )
    autosize_poll_ms: int = key(
        "job.elasticity.autosize.poll.ms",
        int_range(500),
        "5000",
        doc="How often the autosizer in Airflow's triggerer reads the job's lag and high watermarks and decides.",
    )
    microbatch_trigger: str = key(
        "airflow.microbatch.trigger",
        choice({"lag": "lag", "schedule": "schedule"}),
        "lag",
        doc="What starts the job's elastic_microbatch DAG: `lag`, an event from a watcher in Airflow's triggerer "
        "when records wait (event-driven scheduling, no empty runs); `schedule`, `airflow.microbatch.schedule`.",
    )
    microbatch_schedule: str = key(
        "airflow.microbatch.schedule",
        nonempty,
        "*/1 * * * *",
        doc="Cron schedule of the job's elastic_microbatch DAG when `airflow.microbatch.trigger` is `schedule`.",
    )
    microbatch_lag_poll_ms: int = key(
        "airflow.microbatch.lag.poll.ms",
        int_range(100),
        "2000",
        doc="How often the lag watcher (`airflow.microbatch.trigger=lag`) reads the job's lag: broker metadata "
        "and the store, no records.",
    )
    microbatch_lag_records: int = key(
        "airflow.microbatch.lag.records",
        int_range(1),
        "1",
        doc="The lag watcher starts a run once this many records wait.",
    )
    microbatch_lag_max_wait_ms: int = key(
        "airflow.microbatch.lag.max.wait.ms",
        int_range(0),
        "60000",
        doc="Fewer records than `airflow.microbatch.lag.records` start a run once they have waited this long.",
    )
    microbatch_lag_cooldown_ms: int = key(
        "airflow.microbatch.lag.cooldown.ms",
        int_range(0),
        "60000",
        doc="After starting a run, the lag watcher starts none until it has seen one (the job's lease taken or its "
        "checkpoints moved) or this much time has passed.",
    )
    kafka_conn_id: str = key(
        "airflow.connection.kafka",
        nonempty,
        "kafka_default",
        doc="The Airflow connection of the job's Kafka system (its bootstrap servers and client properties over "
        "the config's), used by every task of the job, its lag watcher and its page; a missing one leaves the config's.",
    )
    store_conn_id: str = key(
        "airflow.connection.store",
        nonempty,
        "elasticity_store",
        doc="The Airflow connection of the job's checkpoint store (over `task.checkpoint.store.url`), used by every "
        "task of the job, its lag watcher and its page; a missing one leaves the config's.",
    )
    schema_registry_conn_id: str = key(
        "airflow.connection.schema.registry",
        nonempty,
        "schema_registry_default",
        doc="The Airflow connection of the job's Schema Registry (its URL and basic-auth login over every "
        "registered serde's serializers.registry.<name>.schema.registry.url); a missing one leaves the config's.",
    )
    spark_conn_id: str = key(
        "airflow.connection.spark",
        nonempty,
        "spark_default",
        doc="The Airflow connection the job's batches run on (`spark_connect`: a Connect server; `spark`: "
        "spark-submit to its master), also probed by the job's page; a missing one leaves `spark.remote` / `spark.master`.",
    )
    microbatch_max_seconds: int = key(
        "airflow.microbatch.max.seconds",
        int_range(1),
        "45",
        doc="A micro-batch DAG run starts no new batch after this many seconds (keep it below the schedule interval).",
    )
    manual_hold_ms: int = key(
        "job.elasticity.manual.hold.ms",
        int_range(0),
        "3600000",
        doc="A rescale a person asked for holds this long against the schedule and the autosizer.",
    )
    report_path: str | None = key(
        "job.report.path",
        nonempty,
        None,
        doc="Where the data-quality reports and Data Docs go: a folder or an object-store URI such as s3://bucket/prefix "
        "(default <blob.store.uri>/reports/<job> when blob.store.uri is an object store, else $ELASTICITY_HOME/<job>/reports).",
    )
    batches_retention_ms: int = key(
        "job.batches.retention.ms",
        int_range(0),
        "604800000",
        doc="Committed and abandoned batch plans older than this (default 7 days) are deleted, up to the last batch data "
        "quality validated; the latest plan and pending ones always stay (batch ids keep growing).",
    )
    generations_retention_ms: int = key(
        "job.generations.retention.ms",
        int_range(0),
        "2592000000",
        doc="Generations (the rescale history) older than this (default 30 days) are deleted, never the first (the "
        "job's identity), the current or the previous one; checkpoints are kept for the current and previous only.",
    )
    transactions_retention_ms: int = key(
        "job.transactions.retention.ms",
        int_range(0),
        "3600000",
        doc="Closed Kafka transactional ids older than this (default an hour) are deleted; open ones stay until a run fences them.",
    )
    metrics_retention_ms: int = key(
        "metrics.retention.ms",
        int_range(0),
        "604800000",
        doc="Batch and rescale metrics in the checkpoint store older than this (default 7 days) are deleted; the latest of each stays.",
    )
    quality_retain_runs: int = key(
        "quality.report.retain.runs",
        int_range(1),
        "50",
        doc="Data-quality runs whose report folder is kept: the latest ones; an older run's folder is removed whole.",
    )
    quality_retain_failed_runs: int = key(
        "quality.report.retain.failed.runs",
        int_range(0),
        "1000",
        doc="Failed data-quality runs kept besides those, the latest first.",
    )
    maintenance_schedule: str = key(
        "airflow.maintenance.schedule",
        nonempty,
        "0 * * * *",
        doc="Cron schedule of the job's elastic_maintenance DAG, which applies the retention keys (default hourly).",
    )
