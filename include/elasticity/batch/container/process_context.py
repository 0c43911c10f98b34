"""What the driver ships to the process stage with each batch, and how it is built from the job's config, its
app and the batch's plan: the ProcessContext (plain values only), each virtual task's process slot, what each
slot reads, the stores' and tables' part, and the app's Kafka output topics (created before the batch writes
to them). Nothing here imports Spark."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from elasticity.api.stream import ApplicationDescriptor
from elasticity.batch.container.reader import SlotReads, chunks
from elasticity.batch.container.routing import RouteTable
from elasticity.batch.container.shipped import Shipped
from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.store import Generation
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint, state_of
from elasticity.config import JobConfig
from elasticity.formats.registry import RegistrySerde, Snapshot, register_outputs, snapshot
from elasticity.formats.schemas import TypedSchema
from elasticity.jobmodel.model import JobModel, SystemStream, SystemStreamPartition, TaskName
from elasticity.kafka.admin import client_settings, create_topic
from elasticity.kafka.clients import Kafka
from elasticity.kafka.consumer import KafkaInputs
from elasticity.serializers import Serde
from elasticity.state.store_config import StorageConfig, state_dir
from elasticity.state.table import SideInputBatch, TableBatch, TableSource
from elasticity.state.worker import BatchState


@dataclass(frozen=True, kw_only=True)
class ProcessContext:
    """Everything a worker needs, shipped with the closure (plain values only)."""

    job_name: str
    batch_id: int
    app_class: str
    job_inputs: tuple[SystemStream, ...]
    key_serdes: dict[str, Serde]  # system -> serde
    msg_serdes: dict[str, Serde]
    output_path: str
    audit_path: str
    dead_letter_path: str
    output_bootstraps: dict[str, Kafka]  # system -> its producer's settings, for Kafka outputs
    policy: str = "dlq"
    max_concurrency: int = 1
    callback_timeout_ms: int | None = None
    thread_pool_size: int = 0  # job.container.thread.pool.size (the config's default is 256): 0 = one after another
    state: BatchState | None = None  # a job with stores
    tables: SideInputBatch | None = None  # a job with tables: their side inputs and this batch's read-up-to offsets
    stage_kafka: bool = False  # processing.guarantee=exactly_once: Kafka outputs wait for the commit's transaction
    slot_claims: str | None = None  # a local master's batch token: tasks claim the slot their process holds (slot_claims)
    slots: int = 0  # the job's process slots (with slot_claims)
    shipped: Shipped = ()  # the user code the driver shipped (spark.shipping): imported from there
    epoch: int | None = None  # the attempt's lease epoch, in its files' names (batch.sinks.outputs); None: not leased
    generation: int | None = None  # the batch's generation, the outputs' `generation` column (a replay's version)
    stream_serdes: dict[tuple[str, str], tuple[Serde, Serde]] = field(default_factory=dict)  # streams.<s>.samza.*.serde
    registry: Snapshot = ()  # the driver's in-memory (mock://) registries' schemas, loaded by each worker
    output_schemas: dict[str, TypedSchema] = field(default_factory=dict)  # typed Parquet outputs (outputs.<name>.schema)

    def serdes_of(self, system: str, stream: str) -> tuple[Serde, Serde]:
        """(key, message) serde of a stream: its own (`streams.<stream>.samza.*.serde`), else its system's."""
        found = self.stream_serdes.get((system, stream))
        return found if found is not None else (self.key_serdes.get(system, "string"), self.msg_serdes.get(system, "json"))


def process_context(
    config: JobConfig,
    app: ApplicationDescriptor,
    batch_id: int,
    *,
    slots: int,
    state: BatchState | None,
    tables: SideInputBatch | None,
    stage_kafka: bool,
    slot_claims: str | None = None,
    shipped: Shipped = (),
    output_bootstraps: dict[str, Kafka] | None = None,
    epoch: int | None = None,
    generation: int | None = None,
) -> ProcessContext:
    """The batch's ProcessContext: the job's serdes, sinks and policies, with the batch's state and tables (the
    engine's and the test harness's: `output_bootstraps={}` when there is no broker to send to)."""
    c = config
    kafka_systems = _kafka_systems(config, app)
    streams = {(s.system, s.stream) for s in c.inputs} | {(o.system, o.name) for o in app.outputs.values() if o.kind == "kafka"}
    stream_serdes = {
        (system, stream): (c.serde(system, "key", stream), c.serde(system, "msg", stream))
        for system, stream in sorted(streams)
        if any(c.get(f"streams.{stream}.samza.{w}.serde") for w in ("key", "msg"))
    }
    return ProcessContext(
        job_name=c.job_name,
        batch_id=batch_id,
        app_class=c.app_class,
        job_inputs=c.inputs,
        key_serdes={s: c.serde(s, "key") for s in kafka_systems},
        msg_serdes={s: c.serde(s, "msg") for s in kafka_systems},
        output_path=c.output_dir,
        audit_path=c.audit_dir,
        dead_letter_path=c.dead_letter_dir,
        output_bootstraps=_output_bootstraps(config, kafka_systems) if output_bootstraps is None else output_bootstraps,
        policy=c.dead_letter_policy,
        max_concurrency=c.max_concurrency,
        callback_timeout_ms=c.callback_timeout_ms,
        thread_pool_size=c.thread_pool_size,
        state=state,
        tables=tables,
        stage_kafka=stage_kafka,
        slot_claims=slot_claims,
        slots=slots,
        shipped=shipped,
        epoch=epoch,
        generation=generation,
        stream_serdes=stream_serdes,
        registry=_registry(config, app),
        output_schemas={
            o.name: typed for o in app.outputs.values() if o.kind == "parquet" and (typed := c.output_schema(o.name)) is not None
        },
    )


def _registry(config: JobConfig, app: ApplicationDescriptor) -> Snapshot:
    """The Kafka outputs' writer schemas registered (once, here, before the batch), and what the in-memory
    registries hold then, for the workers."""
    writes: list[tuple[RegistrySerde, str, str]] = []
    urls: set[str] = set()
    kafka_outputs = {(o.system, o.name) for o in app.outputs.values() if o.kind == "kafka"}
    streams = {(s.system, s.stream) for s in config.inputs} | kafka_outputs
    for system, stream in sorted(streams):
        for what, part in (("key", "key"), ("msg", "value")):
            serde = config.serde(system, what, stream)
            if isinstance(serde, RegistrySerde):
                urls.add(serde.url)
                if (system, stream) in kafka_outputs:
                    writes.append((serde, stream, part))
    for name in sorted(n.split(".")[2] for n in config.raw_map if n.startswith("serializers.registry.") and n.endswith(".class")):
        serde = config.registered_serde(name)  # side inputs' and stores' serdes read too
        if isinstance(serde, RegistrySerde):
            urls.add(serde.url)
    for store in sorted(app.stores):  # stores.<store>.msg.serde: written by the workers too
        serde = config.registered_serde(config.value(f"stores.{store}.msg.serde") or "json")
        if isinstance(serde, RegistrySerde):
            urls.add(serde.url)
            changelog = config.changelog(store)
            writes.append((serde, changelog.stream if changelog is not None else store, "value"))
    register_outputs(writes)
    return snapshot(urls)


def _kafka_systems(config: JobConfig, app: ApplicationDescriptor) -> set[str]:
    return {s.system for s in config.inputs} | {o.system for o in app.outputs.values() if o.kind == "kafka"}


def _output_bootstraps(config: JobConfig, systems: set[str]) -> dict[str, Kafka]:
    bootstraps: dict[str, Kafka] = {}
    for s in systems:
        with contextlib.suppress(ConnectionError):  # no broker: no Kafka output on this system
            bootstraps[s] = client_settings(config, s, "producer")
    return bootstraps


def create_output_topics(config: JobConfig, app: ApplicationDescriptor, inputs: KafkaInputs) -> None:
    """The app's Kafka outputs' topics, made when missing: intermediate streams get the inputs' width."""
    kafka_outputs = [o for o in app.outputs.values() if o.kind == "kafka"]
    if kafka_outputs:
        partitions = max(inputs.partition_counts(config.inputs).values())
        for o in kafka_outputs:
            create_topic(client_settings(config, o.system, "admin"), o.name, partitions)


def slot_of(job_model: JobModel, process_count: int) -> dict[TaskName, int]:
    """Each virtual task's process slot: a container's tasks are dealt round-robin over
    `job.container.process.count` slots, each one Spark task and one Python worker (no GIL shared
    between slots); a task stays whole, in offset order, in one."""
    return {
        t.task_name: ci * process_count + ti % process_count
        for ci, c in enumerate(job_model.containers)
        for ti, t in enumerate(c.tasks)
    }


def slot_tasks(job_model: JobModel, slots: Mapping[TaskName, int]) -> dict[int, tuple[tuple[str, int], ...]]:
    """Each slot's virtual tasks with their changelog partitions, by name: what a slot's state opens."""
    by_slot: dict[int, list[tuple[str, int]]] = {}
    for t in job_model.tasks():
        by_slot.setdefault(slots[t.task_name], []).append((t.task_name.name, t.changelog_partition))
    return {s: tuple(sorted(ts)) for s, ts in by_slot.items()}


def slot_reads(
    config: JobConfig,
    plan: BatchPlan,
    generation: Generation,
    cps: Mapping[TaskName, TaskCheckpoint],
    *,
    slots: Mapping[TaskName, int],
    bootstraps: Mapping[str, Kafka] | None = None,
) -> SlotReads:
    """What each slot reads: the chunks of its tasks' SSPs, and which task and slot own each key bucket (the
    engine's and the test harness's: `bootstraps`, per system, where there is no broker to read from)."""
    if bootstraps is None:
        bootstraps = {s: client_settings(config, s) for s in {r.ssp.system for r in plan.ranges}}
    cs = chunks([r for r in plan.ranges if r.size > 0], bootstraps, config.read_chunk_records)
    weighed = tuple(range(config.autosize_min, config.autosize_max + 1)) if config.autosize else ()
    return SlotReads.of(RouteTable.of(generation.factor, cps, slots, weighed), cs)


def batch_state(
    storage: StorageConfig,
    generation: Generation,
    cps: Mapping[TaskName, TaskCheckpoint],
    *,
    written: Mapping[TaskName, TaskCheckpoint],
    slots: Mapping[TaskName, int],
) -> BatchState:
    """Where each virtual task's state starts (`cps`: the last written checkpoints, or the previous
    batch's while its upload runs) and which checkpoints are written (`written`: cleanup may rely on those)."""
    return BatchState(
        storage=storage,
        checkpoint_id=CheckpointId.create(),
        slots=slot_tasks(generation.job_model, slots),
        start={t.name: state_of(cp) for t, cp in cps.items()},
        written={t.name: v2 for t, cp in written.items() if (v2 := state_of(cp)) is not None},
        changelog_partitions=len(generation.job_model.tasks()),
    )


def table_batch(
    config: JobConfig, tables: tuple[TableSource, ...], recorded: Mapping[SystemStreamPartition, int]
) -> SideInputBatch:
    """The tables of a batch, read up to the `recorded` offsets of their side inputs."""
    out = []
    for t in tables:
        systems = sorted({s.system for s in t.streams})
        out.append(
            TableBatch(
                name=t.name,
                targets=tuple((ssp, o) for ssp, o in sorted(recorded.items()) if ssp.system_stream in t.streams),
                bootstraps=tuple((s, client_settings(config, s)) for s in systems),
                serdes=tuple(
                    (str(s), config.serde(s.system, "key", s.stream), config.serde(s.system, "msg", s.stream)) for s in t.streams
                ),
                processor_factory=t.processor_factory,
            )
        )
    configured = state_dir(config)
    return SideInputBatch(config.job_name, str(configured) if configured else None, tuple(out))
