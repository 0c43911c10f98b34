"""The keys of the job itself: its name and id, inputs, factor and grouping into tasks, and its checkpoints.
Part of `JobConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from elasticity.config.keys import (
    MAX_ELASTICITY_FACTOR,
    REQUIRED,
    SAME_AS_SAMZA,
    key,
)
from elasticity.config.names import JOB_NAME_ALLOWED
from elasticity.config.parsers import (
    checkpoint_versions,
    choice,
    input_list,
    int_range,
    name_rule,
    nonempty,
    store_url,
)
from elasticity.jobmodel.grouping import GROUPER_NAMES, Grouper, PartitionScheme
from elasticity.jobmodel.model import SystemStream


@dataclass(frozen=True, kw_only=True)
class JobKeys:
    """The job, its inputs and tasks, and its checkpoints."""

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
