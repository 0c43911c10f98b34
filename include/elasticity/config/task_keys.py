"""The keys of running the tasks: the processing guarantee, bad records, concurrency, the containers'
processes and threads, commits and the Spark master. Part of `JobConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from elasticity.config.compat import DEFAULT_THREAD_POOL_SIZE
from elasticity.config.keys import (
    SAME_AS_SAMZA,
    key,
)
from elasticity.config.parsers import (
    callback_timeout,
    choice,
    int_range,
    nonempty,
    py_files,
)


@dataclass(frozen=True, kw_only=True)
class TaskKeys:
    """Running the tasks."""

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
