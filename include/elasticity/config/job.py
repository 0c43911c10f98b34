"""The job's configuration: `JobConfig` declares every job-level key, once, as a field;
`validate` turns `.properties` into it in three named steps.

1. `_parse_keys`: every key through its parser (a bad value names the key, the value
   and what is allowed; an unknown key gets the nearest known one, "did you mean").
2. `_resolve_inputs`: task.inputs as SystemStreams, job.default.system filled in.
3. `check_rules`: the cross-key rules of `elasticity.config.rules`.

Each step reports everything it finds, so one load names every problem.
"""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from elasticity.config.compat import DEFAULT_THREAD_POOL_SIZE, differences, idle_factor, not_run_reporters
from elasticity.config.connections import Connections
from elasticity.config.errors import ConfigError, ConfigWarning
from elasticity.config.home import elasticity_home
from elasticity.config.kafka_clients import property_problem, shown
from elasticity.config.keys import (
    KAFKA_CLIENT_KEYS,
    MAX_ELASTICITY_FACTOR,
    REPORTER_KEYS,
    REQUIRED,
    SAME_AS_SAMZA,
    STORE_KEYS,
    SYSTEM_KEYS,
    Key,
    declared_keys,
    key,
)
from elasticity.config.names import JOB_NAME_ALLOWED, TOPIC_ALLOWED, is_topic
from elasticity.config.parsers import (
    callback_timeout,
    checkpoint_versions,
    choice,
    flag,
    fraction,
    input_list,
    int_range,
    name_rule,
    nonempty,
    parse_factories,
    py_files,
    reporter_names,
    retention_ms,
    store_url,
)
from elasticity.config.properties import read_properties
from elasticity.config.rules import Parsed, check_rules
from elasticity.jobmodel.grouping import GROUPER_NAMES, Grouper, PartitionScheme
from elasticity.jobmodel.model import SystemStream


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    """A validated job configuration: a typed field per job-level key, and `raw`, every key
    as written (keys with a `<part>` in their name are read from it with `value`)."""

    raw: tuple[tuple[str, str], ...] = field(repr=False)  # may hold secrets (Kafka client passwords)
    connections: Connections | None = field(default=None, repr=False, compare=False)
    """The deployment's connections over the config (`with_connections`); None: the process environment's."""

    # --- the job, its inputs and its tasks ---
    job_name: str = key(
        "job.name",
        name_rule,
        REQUIRED,
        doc="Name of the job; also names its DAGs, folders, state and checkpoints, so it is limited to " + JOB_NAME_ALLOWED + ".",
        samza=SAME_AS_SAMZA,
    )
    job_id: str = key(
        "job.id",
        name_rule,
        "1",
        doc="Instance id of the job, as in Samza; it joins job.name in the commit topic and transactional ids, so "
        "it is limited to " + JOB_NAME_ALLOWED + ".",
        samza=SAME_AS_SAMZA,
    )
    inputs: tuple[SystemStream, ...] = key(
        "task.inputs",
        input_list,
        REQUIRED,
        doc="Input streams, `system.stream` comma-separated; order matters for task.partition.scheme=max.",
        samza=SAME_AS_SAMZA,
    )
    default_system: str | None = key(
        "job.default.system", nonempty, None, doc="System for inputs written without one.", samza=SAME_AS_SAMZA
    )
    elasticity_factor: int = key(
        "job.elasticity.factor",
        int_range(1, MAX_ELASTICITY_FACTOR),
        "1",
        doc=f"Virtual tasks per task, one per key bucket (1 = elasticity off, max {MAX_ELASTICITY_FACTOR}): the initial "
        "factor, the one a new job's first generation takes. Once the job has a generation its factor is the "
        "generation's, and a new value here is not read: change it with a rescale (the elastic_rescale DAG, or "
        "`elasticity rescale --config <file> --factor N`). While the two differ, each batch logs a warning naming "
        "both (not when job.elasticity.schedule or job.elasticity.autosize chooses the factor).",
        samza="Samza's key (SEP-32); on purpose, a key's bucket is pmod(xxhash64(key), F), stable across processes, not abs(key.hashCode()) % F, and task names carry the factor",
    )
    grouper: Grouper = key(
        "job.systemstreampartition.grouper.factory",
        choice(GROUPER_NAMES),
        "GroupByPartition",
        doc="How SSPs are grouped into tasks (Samza class names or short names).",
        samza="Samza's key; its factory class names are accepted, and short names too",
    )
    partition_scheme: PartitionScheme | None = key(
        "task.partition.scheme",
        choice({s.value: s for s in PartitionScheme}),
        None,
        doc="SAMZA-71 scheme for GroupByPartition: max (a task per SSP) or cogroup (GCD of partition counts).",
        samza="SAMZA-71's schemes, which Samza never shipped",
    )
    container_count: int = key(
        "job.container.count",
        int_range(1),
        "1",
        doc="Containers (Spark executor groups) the tasks are spread over.",
        samza="Samza's key; a container here is a group of Spark process slots, not a JVM",
    )

    # --- checkpoints ---
    configured_store_url: str | None = key(
        "task.checkpoint.store.url",
        store_url,
        None,
        doc="SQLAlchemy URL of the checkpoint store (ELASTICITY_CHECKPOINT_STORE_URL overrides it; default a SQLite file in $ELASTICITY_HOME).",
        samza="Samza writes checkpoints to its checkpoint topic (task.checkpoint.factory); here a SQL database holds them, and export/import speak the topic",
    )
    checkpoint_write_versions: tuple[int, ...] = key(
        "task.checkpoint.write.versions",
        checkpoint_versions,
        "1,2",
        doc="Checkpoint versions written on every commit (1,2 = dual write).",
        samza=SAME_AS_SAMZA,
    )
    checkpoint_read_versions: tuple[int, ...] = key(
        "task.checkpoint.read.versions",
        checkpoint_versions,
        "1",
        doc="Checkpoint versions read, in priority order.",
        samza=SAME_AS_SAMZA,
    )
    live_checkpoint_max_age_ms: int = key(
        "task.live.checkpoint.max.age",
        int_range(0),
        "600000",
        doc="A lower-priority checkpoint version newer by more than this many ms wins.",
        samza=SAME_AS_SAMZA,
    )
    checkpoint_history_size: int = key(
        "task.checkpoint.history.size", int_range(1, 1000), "10", doc="Checkpoints kept per virtual task and version."
    )
    lease_ttl_ms: int = key(
        "job.lease.ttl.ms",
        int_range(1000),
        "300000",
        doc="How long a batch or rescale holds the job's lease before another may take it.",
    )
    lease_wait_ms: int = key(
        "job.lease.wait.ms",
        int_range(0),
        "120000",
        doc="How long a micro-batch run waits for the job's lease while another owner holds it (a rescale, another "
        "run's attempt until its lease expires; a later try of the same run takes it over at once) before it fails; "
        "0 fails at once.",
    )

    # --- one micro-batch: read, process, sinks ---
    batch_max_records: int = key(
        "batch.max.records",
        int_range(1),
        "100000",
        doc="Most records one micro-batch reads over all partitions (like Spark's maxOffsetsPerTrigger).",
        samza="none in Samza (it streams); Spark's maxOffsetsPerTrigger",
    )
    read_chunk_records: int = key(
        "batch.read.chunk.records",
        int_range(1),
        "50000",
        doc="Longest offset range one Spark task reads; longer ranges are cut into chunks read in parallel.",
    )
    app_class: str = key(
        "app.class",
        nonempty,
        "elasticity.apps.identity:build",
        doc="module:factory building the operator chain (default: the identity app, every record unchanged to parquet.output).",
        samza="Samza's key names a SamzaApplication class; here a module:factory function building the same high-level API",
    )
    output_path: str | None = key(
        "job.output.path", nonempty, None, doc="Root of the Parquet outputs (default $ELASTICITY_HOME/<job>/output)."
    )
    audit_path: str | None = key(
        "job.audit.path",
        nonempty,
        None,
        doc="Parquet audit dataset, one row per processed input record (default $ELASTICITY_HOME/<job>/audit).",
    )
    dead_letter_path: str | None = key(
        "job.dead.letter.path", nonempty, None, doc="Parquet dead-letter dataset (default $ELASTICITY_HOME/<job>/dead-letter)."
    )
    compaction_target_bytes: int = key(
        "job.output.compaction.target.bytes",
        int_range(1),
        "134217728",
        doc="Size compaction merges the small files of validated batches to, in every Parquet sink (outputs, audit, "
        "dead letters): compacted-<first>-<last>.parquet files of about this many bytes (default 128 MiB).",
        samza="none in Samza; the target file size of Spark/Delta's OPTIMIZE and Iceberg's write.target-file-size-bytes",
    )
    output_retention_ms: int | None = key(
        "job.output.retention.ms",
        retention_ms,
        "-1",
        doc="How long the Parquet outputs of a validated batch are kept after it was written; -1: for ever (they are "
        "the job's results; compacted, never expired unless set).",
        samza="Kafka's topic retention.ms, -1 for no limit",
    )
    audit_retention_ms: int | None = key(
        "job.audit.retention.ms",
        retention_ms,
        "604800000",
        doc="How long the audit rows of a batch data quality has validated are kept after the batch was written "
        "(default 7 days); -1: for ever. Rows of a batch not yet validated are never expired.",
        samza="Kafka's topic retention.ms (its default, 7 days), -1 for no limit",
    )
    dead_letter_retention_ms: int | None = key(
        "job.dead.letter.retention.ms",
        retention_ms,
        "2592000000",
        doc="How long the dead letters of a validated batch are kept after the batch was written (default 30 days); -1: for ever.",
        samza="Kafka's topic retention.ms, -1 for no limit",
    )

    # --- choosing the factor, and the Airflow DAGs ---
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
        doc="The autosizer sizes the job to drain its backlog within this; more records behind than this many seconds "
        "of input is lag above target, and the autosizer never scales down then.",
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

    # --- running the tasks ---
    processing_guarantee: str = key(
        "processing.guarantee",
        choice({"exactly_once": "exactly_once", "exactly_once_v2": "exactly_once", "at_least_once": "at_least_once"}),
        "exactly_once",
        doc="Kafka outputs (send_to and partition_by topics): exactly_once, in one Kafka transaction with the commit "
        "record of the batch's checkpoints, visible to read_committed readers if and only if the batch commits; "
        "at_least_once, sent as they are produced, again on a replay.",
        samza="Kafka Streams' key (exactly_once_v2, at_least_once); Samza's Kafka outputs are at-least-once",
    )
    dead_letter_policy: str = key(
        "task.dead.letter.policy",
        choice({"dlq": "dlq", "fail": "fail"}),
        "dlq",
        doc="dlq: a bad record goes to the dead-letter sink; fail: its task stops there and the batch fails.",
        samza="Samza stops the container on an error (task.ignore.errors, task.drop.deserialization.errors skip); here bad records go to a dead-letter sink",
    )
    input_truncation_policy: str = key(
        "task.input.truncation.policy",
        choice({"fail": "fail", "skip-to-earliest": "skip-to-earliest"}),
        "fail",
        doc="A checkpoint below its partition's log start (retention or DeleteRecords removed records no task "
        "processed): fail stops the job naming them; skip-to-earliest goes on from the log start and declares the "
        "removed range, which the batch's metrics keep and data quality reports. A checkpoint above the log's end "
        "(a recreated topic) always fails.",
        samza="Samza's systems.<system>.consumer.auto.offset.reset (largest/smallest) resets silently; here a reset is declared",
    )
    max_concurrency: int = key(
        "task.max.concurrency",
        int_range(1, 10_000),
        "1",
        doc="flat_map_async calls in flight per virtual task.",
        samza=SAME_AS_SAMZA,
    )
    callback_timeout_ms: int | None = key(
        "task.callback.timeout.ms",
        callback_timeout,
        "-1",
        doc="A flat_map_async call slower than this fails its record (timeout); -1, Samza's default, means no timeout.",
        samza=SAME_AS_SAMZA,
    )
    container_process_count: int = key(
        "job.container.process.count",
        int_range(1, 64),
        "1",
        doc="Python processes per container; its virtual tasks are dealt over them (CPU-bound apps: no GIL shared between them).",
    )
    thread_pool_size: int = key(
        "job.container.thread.pool.size",
        int_range(0, 1024),
        str(DEFAULT_THREAD_POOL_SIZE),
        doc=f"Threads running a container's virtual tasks side by side (default {DEFAULT_THREAD_POOL_SIZE}, so that a higher "
        "factor pays without more keys); 0 (Samza's default): they run one after another.",
        samza=f"Samza's key; its default is 0 (one after another), here {DEFAULT_THREAD_POOL_SIZE}, so that raising job.elasticity.factor pays without another key",
    )
    commit_max_delay_ms: int = key(
        "task.commit.max.delay.ms",
        int_range(0),
        "60000",
        doc="An upload still running at the next commit: within this delay the new commit is skipped, beyond it the new commit waits.",
        samza=SAME_AS_SAMZA,
    )
    commit_timeout_ms: int = key(
        "task.commit.timeout.ms",
        int_range(1),
        "1800000",
        doc="Longest a checkpoint upload may take before the batch fails.",
        samza=SAME_AS_SAMZA,
    )
    spark_master: str | None = key(
        "spark.master",
        nonempty,
        None,
        doc="Spark master of a classic session (default: the embedded Spark Connect server when it runs, else local[*]).",
    )
    spark_remote: str | None = key(
        "spark.remote", nonempty, None, doc="Spark Connect URL (sc://host:15002); used instead of spark.master when set."
    )
    submit_py_files: tuple[str, ...] | None = key(
        "spark.submit.pyFiles",
        py_files,
        None,
        doc="Pure-Python packages the app imports, as .zip, .whl, .egg or .py files on the driver (comma-separated): "
        "each is added to the Spark session under its content's hash and put on the executors' path. "
        "Packages with native code are installed on the workers' Python instead.",
        samza="none in Samza; Spark's key (spark-submit --py-files)",
    )

    # --- state: stores, backup/restore backends, commit and restore pools (read by elasticity.state.store_config) ---
    backup_factories: tuple[str, ...] | None = key(
        "stores.backup.factories",
        parse_factories,
        None,
        doc="Backup backends of every store without its own list (default: the Kafka changelog when the store has one).",
        samza=SAME_AS_SAMZA,
    )
    restore_factories: tuple[str, ...] | None = key(
        "stores.restore.factories",
        parse_factories,
        None,
        doc="Restore backends of every store without its own list (default: the Kafka changelog when the store has one, else the store's backup factories).",
        samza=SAME_AS_SAMZA,
    )
    changelog_system: str | None = key(
        "job.changelog.system",
        nonempty,
        None,
        doc="System of a store changelog given as a bare stream (stores.<store>.changelog=<stream>); default job.default.system.",
        samza=SAME_AS_SAMZA,
    )
    blob_store_uri: str | None = key(
        "blob.store.uri",
        nonempty,
        None,
        doc="Where blob-store snapshots go: a folder or a pyarrow/fsspec URI such as s3://bucket/prefix (default $ELASTICITY_HOME/<job>/blobs).",
    )
    transactional_state: bool = key(
        "task.transactional.state.checkpoint.enabled",
        flag,
        "true",
        doc="true: a restore yields exactly the last checkpoint's state; false: Samza's non-transactional state (local store reused as it is, changelog replayed to its end).",
        samza=SAME_AS_SAMZA,
    )
    job_state_dir: str | None = key(
        "job.state.dir",
        nonempty,
        None,
        doc="Folder of the local RocksDB stores, one per virtual task and store (default $ELASTICITY_HOME/<job>/state).",
        samza="Samza's job.logged.store.base.dir and job.non-logged.store.base.dir",
    )
    commit_pool_size: int = key(
        "job.container.commit.thread.pool.size",
        int_range(1, 1024),
        "2",
        doc="Threads uploading a container's state snapshots, at least: Samza's min(max(2 x tasks, this), the max size).",
        samza=SAME_AS_SAMZA,
    )
    commit_pool_max_size: int = key(
        "job.container.commit.thread.pool.max.size",
        int_range(1, 1024),
        "64",
        doc="Most threads uploading a container's state snapshots.",
        samza=SAME_AS_SAMZA,
    )
    restore_pool_size: int = key(
        "job.container.restore.thread.pool.size",
        int_range(1, 1024),
        "2",
        doc="Threads restoring a container's stores, at least: Samza's min(max(2 x tasks x restore backends, this), the max size).",
        samza=SAME_AS_SAMZA,
    )
    restore_pool_max_size: int = key(
        "job.container.restore.thread.pool.max.size",
        int_range(1, 1024),
        "64",
        doc="Most threads restoring a container's stores.",
        samza=SAME_AS_SAMZA,
    )

    # --- metrics (read by elasticity.metrics.reporters) ---
    metrics_reporters: tuple[str, ...] | None = key(
        "metrics.reporters",
        reporter_names,
        None,
        doc="Metrics reporters, by name (Samza's key), e.g. statsd; empty: none; unset: Airflow's [metrics] statsd_on decides.",
        samza="Samza's key; reporters here are StatsD (Samza's JMX and snapshot reporters need its JVM)",
    )

    strict: bool = key(
        "job.config.strict",
        flag,
        "false",
        doc="true: an unknown key is an error, not a warning (the CLI's --strict does the same).",
    )

    @property
    def raw_map(self) -> dict[str, str]:
        return dict(self.raw)

    @property
    def shown_map(self) -> dict[str, str]:
        """Every key as written, secrets masked: what a stored job model, a log or a page may hold."""
        return {k: shown(k, v) for k, v in self.raw}

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.raw_map.get(key, default)

    def value(self, name: str) -> Any:
        """The typed value of any key, one with a `<part>` too (`systems.kafka.samza.msg.serde`): as written, else its default."""
        return key_value(self.raw_map, name)

    @property
    def deployment(self) -> Connections:
        """The connections in force: those given with `with_connections`, else the process environment's."""
        return self.connections or Connections.from_env()

    def with_connections(self, connections: Connections) -> JobConfig:
        return replace(self, connections=connections)

    def bootstrap_servers(self, system: str) -> str | None:
        """The deployment's servers win (a connection, KAFKA_BOOTSTRAP_SERVERS), as Airflow's env overrides do; then the config."""
        return self.deployment.bootstrap_servers or self.get(f"systems.{system}.consumer.bootstrap.servers")

    def offset_default(self, system: str) -> str:
        """oldest|upcoming for partitions that have no checkpoint yet: Samza's key, then its deprecated
        one (SystemConfig.getSystemOffsetDefault), then this product's earlier name, else upcoming."""
        names = [f"systems.{system}.{k}" for k in OFFSET_DEFAULT_KEYS]
        return next((self.value(n) for n in names if (self.get(n) or "").strip()), self.value(names[0]))

    def changelog(self, store: str) -> SystemStream | None:
        """`stores.<store>.changelog` as Samza's StorageConfig reads it: system.stream, or a bare stream
        of job.changelog.system (else job.default.system); the rules checked one of them is set."""
        text = (self.get(f"stores.{store}.changelog") or "").strip()
        if not text:
            return None  # blank: no changelog, as Samza's trimToNull
        if "." in text:
            return SystemStream.parse(text)
        system = self.changelog_system or self.default_system
        assert system is not None, "checked by the rule changelogs_have_a_system"
        return SystemStream(system, text)

    def changelogs(self) -> dict[SystemStream, str]:
        """Every store's changelog stream -> the store, from the `stores.<s>.changelog` keys."""
        stores = {k.split(".")[1] for k in self.raw_map if k.startswith("stores.") and k.endswith(".changelog")}
        return {cl: s for s in sorted(stores) if (cl := self.changelog(s)) is not None}

    def serde(self, system: str, what: str) -> str:
        """`key` or `msg` serde of a system."""
        return self.value(f"systems.{system}.samza.{what}.serde")

    def path(self, key: str, leaf: str) -> str:
        """job.output.path / job.audit.path / job.dead.letter.path / job.report.path, defaulting under the state folder."""
        return self.get(key) or str(elasticity_home() / self.job_name / leaf)

    @property
    def output_dir(self) -> str:
        """Root of the Parquet outputs: job.output.path, else $ELASTICITY_HOME/<job>/output (a URI on object storage)."""
        return self.path("job.output.path", "output")

    @property
    def audit_dir(self) -> str:
        """The Parquet audit dataset: job.audit.path, else $ELASTICITY_HOME/<job>/audit."""
        return self.path("job.audit.path", "audit")

    @property
    def dead_letter_dir(self) -> str:
        """The Parquet dead-letter dataset: job.dead.letter.path, else $ELASTICITY_HOME/<job>/dead-letter."""
        return self.path("job.dead.letter.path", "dead-letter")

    @property
    def report_location(self) -> str:
        """Where the data-quality reports go: job.report.path (a folder or an object-store URI); else, when
        blob.store.uri is an object store, `<blob.store.uri>/reports/<job>` (the API server reads them from
        there, whichever worker wrote them); else the folder $ELASTICITY_HOME/<job>/reports."""
        if self.report_path:
            return self.report_path
        blobs = self.blob_store_uri or ""
        if "://" in blobs:
            base, q, query = blobs.partition("?")
            return f"{base.rstrip('/')}/reports/{quote(self.job_name, safe='-_.')}" + (f"?{query}" if q else "")
        return str(elasticity_home() / self.job_name / "reports")

    def checkpoint_store_url(self) -> str:
        """The deployment's store (a connection, ELASTICITY_CHECKPOINT_STORE_URL) wins; then the config's."""
        given = self.deployment.store_url
        if given:
            try:
                return store_url(given)
            except ValueError as e:
                raise ConfigError(f"ELASTICITY_CHECKPOINT_STORE_URL={given!r}: expected {e}") from None
        return self.configured_store_url or f"sqlite:///{elasticity_home() / 'checkpoints.db'}"

    def with_overrides(self, overrides: Mapping[str, str]) -> JobConfig:
        """A copy with some keys replaced, validated again (e.g. a new elasticity factor)."""
        return replace(validate({**self.raw_map, **overrides}, warn_unknown=False), connections=self.connections)


OFFSET_DEFAULT_KEYS = ("default.stream.samza.offset.default", "samza.offset.default", "default.stream.offset.default")
"""`systems.<system>.` + each, in the order they are read."""

FIELD_KEYS: tuple[tuple[str, Key], ...] = declared_keys(JobConfig)
"""(JobConfig field, key) of every job-level key."""

KEYS: tuple[Key, ...] = (*(k for _, k in FIELD_KEYS), *SYSTEM_KEYS, *KAFKA_CLIENT_KEYS, *STORE_KEYS, *REPORTER_KEYS)
"""Every key the product reads."""

_DEFAULTS: dict[str, Any] = {k.name: k.default_value for _, k in FIELD_KEYS}


def find_key(name: str) -> Key | None:
    for k in KEYS:
        if k.pattern.match(name):
            return k
    return None


def key_value(props: Mapping[str, str], name: str) -> Any:
    """The typed value of one key of unvalidated properties: as written, else its declared default.
    For DAG files, which read a key or two of every job at parse time without validating the job."""
    found = find_key(name)
    if found is None:
        raise KeyError(f"no config key {name!r}")
    text = props.get(name)
    if text is None:
        return found.default_value
    try:
        return found.parser(text)
    except ValueError as e:
        raise ConfigError(f"{name}={text.strip()!r}: expected {e}") from None


def did_you_mean(name: str) -> str | None:
    """The known key nearest to an unknown one; `<system>`-like parts take the name's own parts."""
    parts = name.split(".")
    candidates = []
    for k in KEYS:
        template = k.name.split(".")
        candidates.append(".".join(parts[i] if t.startswith("<") and i < len(parts) else t for i, t in enumerate(template)))
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


def _parse_keys(props: Mapping[str, str], *, strict: bool, warn_unknown: bool) -> tuple[dict[str, Any], list[str]]:
    """Every key's typed value by name (a job-level key unset or invalid: its default), and the problems:
    a bad value, a missing required key, an unknown key when `strict`."""
    values, errors = dict(_DEFAULTS), []
    for name, text in props.items():
        found = find_key(name)
        if found is None and (refused := property_problem(name)):
            hint = did_you_mean(name)  # a Kafka client property kafka-python cannot honour: never dropped silently
            errors.append(refused + (f" (did you mean {hint!r}?)" if hint else ""))
            continue
        if found is None:
            hint = did_you_mean(name)
            message = f"unknown config key {name!r}" + (f" (did you mean {hint!r}?)" if hint else "")
            if strict:
                errors.append(f"{message}; job.config.strict=true (or --strict) does not allow unknown keys")
            elif warn_unknown:
                warnings.warn(f"{message}; ignored", ConfigWarning, stacklevel=4)  # validate's caller's caller
            continue
        if found.deprecated_for:
            warnings.warn(f"{found.name} is deprecated: use {found.deprecated_for}", ConfigWarning, stacklevel=4)
        try:
            values[name] = found.parser(text)
        except ValueError as e:
            errors.append(f"{name}={shown(name, repr(text))}: expected {e}")
    errors += [f"{k.name} is required: {k.doc}" for k in KEYS if k.required and k.name not in props]
    return values, errors


def _resolve_inputs(values: Mapping[str, Any]) -> tuple[tuple[SystemStream, ...], list[str]]:
    """task.inputs as SystemStreams: an item without a system takes job.default.system."""
    inputs, errors = [], []
    default_system = values["job.default.system"]
    for item in values["task.inputs"] or ():
        if "." in item:
            stream = SystemStream.parse(item)
        elif default_system:
            stream = SystemStream(default_system, item)
        else:
            errors.append(f"task.inputs={item!r}: expected system.stream (or set job.default.system)")
            continue
        if is_topic(stream.stream):
            inputs.append(stream)
        else:
            errors.append(f"task.inputs={item!r}: stream {stream.stream!r} is not {TOPIC_ALLOWED}")
    return tuple(inputs), errors


def validate(props: Mapping[str, str], *, strict: bool = False, warn_unknown: bool = True) -> JobConfig:
    """The typed config, or one ConfigError listing every problem.

    Unknown keys are errors when `strict` (or `job.config.strict=true`), else warnings.
    """
    strict = strict or props.get("job.config.strict", "").strip() == "true"
    values, errors = _parse_keys(props, strict=strict, warn_unknown=warn_unknown)
    values["task.inputs"], unresolved = _resolve_inputs(values)
    errors += unresolved
    errors += check_rules(Parsed(values, props))
    if errors:
        raise ConfigError("invalid job config:\n  " + "\n  ".join(errors))
    if warn_unknown:
        for note in not_run_reporters(props) + idle_factor(values) + (differences(values, props) if strict else []):
            warnings.warn(note, ConfigWarning, stacklevel=3)
    return JobConfig(raw=tuple(sorted(props.items())), **{name: values[k.name] for name, k in FIELD_KEYS})


def load_config(path: str | os.PathLike[str], *, strict: bool = False) -> JobConfig:
    p = Path(path)
    props = read_properties(p)
    try:
        return validate(props, strict=strict)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from e
