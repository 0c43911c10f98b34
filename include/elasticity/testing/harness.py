"""TestRun: one micro-batch of an app through the engine's own process stage, with the Kafka log in memory
(the package's docstring says what runs and what the harness keeps itself)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from kafka.partitioner.default import murmur2
from rocksdict import AccessType, Options, Rdict

from elasticity.api.descriptors import StoreDescriptor
from elasticity.api.stream import KV, ApplicationDescriptor, OutputStream, load_application
from elasticity.batch.container.container_process import container_process
from elasticity.batch.container.process_context import (
    ProcessContext,
    batch_state,
    process_context,
    slot_of,
    slot_reads,
    slot_tasks,
)
from elasticity.batch.container.processing import SUMMARY_SCHEMA, process_slot
from elasticity.batch.container.reader import Chunk, Columns, SlotReads
from elasticity.batch.coordinator.outcome import TaskSummary, new_checkpoints
from elasticity.batch.coordinator.planning import plan_ranges
from elasticity.batch.sinks.exactly_once import staging_root
from elasticity.batch.sinks.outputs import batch_file_name
from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.store import Generation
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import JobConfig, validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import JobModel, SystemStream, SystemStreamPartition, TaskName
from elasticity.serializers import deserialize, serialize
from elasticity.state.rocksdb import StoreDirs, raw_items
from elasticity.state.store_config import StorageConfig, local_state_dir
from elasticity.state.table import SideInputBatch, SideInputTable, TableBatch, TableSource, _processor, resolve_tables
from elasticity.state.worker import BatchState
from elasticity.testing.batch_result import DeadLetter, Emitted, Record, Result, task_run

_NO_BROKER = "testing"  # the bootstrap a staged or in-memory stream names: nothing connects to it


@dataclass
class _Log:
    """One partition of a stream in memory: offset i is the list's item i."""

    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.keys)


class _LogTable(SideInputTable):
    """A side-input table caught up from the in-memory log instead of a Kafka consumer (the rest is the engine's)."""

    logs: Mapping[tuple[str, str, int], _Log] = {}

    def _read(  # type: ignore[override]  # the engine's is static: it needs no state, the log does
        self, bootstrap: Any, ssp: SystemStreamPartition, start: int, end: int
    ) -> list[tuple[int, bytes | None, bytes | None, int]]:
        log = self.logs[(ssp.system, ssp.stream, ssp.partition)]
        return [(o, log.keys[o], log.values[o], log.timestamps[o]) for o in range(start, end)]


class TestRun:
    """An app run batch by batch on records given in the test, as the engine runs it in a job.

    `app` is `module:factory` (as `app.class`), the factory itself, or None for `config`'s `app.class`.
    `config` holds any job keys; the harness adds the job name, `task.inputs`, `job.elasticity.factor` and
    its own folders where they are not given, and `task.checkpoint.read.versions=2,1` (stores need
    CheckpointV2). `partitions`: each stream's partition count, one for all or per `system.stream`."""

    __test__ = False  # a harness, not a pytest test class

    def __init__(
        self,
        app: str | Callable[[ApplicationDescriptor], None] | None = None,
        *,
        inputs: Sequence[str] = (),
        factor: int = 1,
        partitions: int | Mapping[str, int] = 1,
        config: Mapping[str, str] | None = None,
        folder: str | Path | None = None,
    ) -> None:
        self._own_folder = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix="elasticity-test-")) if folder is None else Path(folder)
        props = {
            "job.name": "test",
            "job.elasticity.factor": str(factor),
            "task.checkpoint.read.versions": "2,1",
            "job.state.dir": str(self.folder / "state"),
            "job.output.path": str(self.folder / "output"),
            "job.audit.path": str(self.folder / "audit"),
            "job.dead.letter.path": str(self.folder / "dead-letter"),
            "blob.store.uri": str(self.folder / "blobs"),
            **({"task.inputs": ",".join(inputs)} if inputs else {}),
            **({"app.class": _app_class(app)} if app is not None else {}),
            **(config or {}),
        }
        self.config: JobConfig = validate(props)
        if not self.config.app_class:
            raise ValueError("no app: pass TestRun(app=...) or app.class in config")
        self.app = load_application(self.config.app_class, self.config.inputs)
        stores = list(self.app.stores.values())
        self.storage = StorageConfig.of(self.config, stores) if stores else None
        self.tables: tuple[TableSource, ...] = resolve_tables(self.config, self.app.tables) if self.app.tables else ()
        self._partitions = partitions
        self._counts: dict[SystemStream, int] = {}
        self._logs: dict[tuple[str, str, int], _Log] = {}
        self._round_robin: dict[SystemStream, int] = {}
        self._cps: dict[TaskName, TaskCheckpoint] = {}  # each task's offsets and state snapshot, as committed
        self._model: JobModel | None = None
        self._slots: dict[int, tuple[tuple[str, int], ...]] = {}
        self._slot_of: dict[TaskName, int] = {}
        self.batch_id = 0

    # --- input ---------------------------------------------------------------------

    def append(self, stream: str, records: Iterable[Record | tuple[Any, Any]], *, partitions: int | None = None) -> None:
        """Produce records to an input or side-input stream; the next `process` reads them."""
        ss = SystemStream.parse(stream)
        side = {s for t in self.tables for s in t.streams}
        if ss not in self.config.inputs and ss not in side:
            known = sorted(map(str, (*self.config.inputs, *side)))
            raise ValueError(f"{stream}: neither in task.inputs nor a table's side input ({known})")
        n = self._count(ss, partitions)
        key_serde, msg_serde = self.config.serde(ss.system, "key"), self.config.serde(ss.system, "msg")
        for r in records:
            rec = r if isinstance(r, Record) else Record(*r)
            key, value = _encode(key_serde, rec.key), _encode(msg_serde, rec.value)
            partition = rec.partition
            if partition is None:
                if key is None:
                    partition = self._round_robin.get(ss, 0) % n
                    self._round_robin[ss] = partition + 1
                else:
                    partition = (murmur2(key) & 0x7FFFFFFF) % n  # Kafka's default partitioner
            if not 0 <= partition < n:
                raise ValueError(f"{stream}: partition {partition} of a stream of {n}")
            log = self._logs.setdefault((ss.system, ss.stream, partition), _Log())
            log.keys.append(key)
            log.values.append(value)
            log.timestamps.append(rec.timestamp)

    def _count(self, ss: SystemStream, partitions: int | None) -> int:
        if partitions is None and ss in self._counts:
            return self._counts[ss]
        if partitions is None:
            p = self._partitions
            partitions = p if isinstance(p, int) else p.get(str(ss), 1)
        known = self._counts.setdefault(ss, partitions)
        if known != partitions:
            raise ValueError(f"{ss}: {partitions} partitions, but it has {known} (the harness does not repartition)")
        return known

    # --- a batch -------------------------------------------------------------------

    def process(
        self, records: Iterable[Record | tuple[Any, Any]] = (), *, stream: str | None = None, partitions: int | None = None
    ) -> Result:
        """One micro-batch over every record appended since the last (`records` are appended to `stream` first,
        by default the job's only input); state and open windows carry over to the next."""
        self._append_given(list(records), stream, partitions)
        self.batch_id += 1
        generation = self._generation()
        cps, slots = self._cps, self._slot_of
        plan = self._plan(generation, cps)
        no_broker = {ss.system: _NO_BROKER for ss in self.config.inputs}
        reads = slot_reads(self.config, plan, generation, cps, slots=slots, bootstraps=no_broker)
        side_batch = self._side_inputs()
        state = batch_state(self.storage, generation, cps, written=cps, slots=slots) if self.storage is not None else None
        ctx = self._context(state, side_batch, len(self._slots))
        rows = [row for slot in sorted(self._slots) for row in self._process_slot(ctx, reads, slot, side_batch)]
        summaries = TaskSummary.of(pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA))  # the rows as the driver reads them
        self._cps = new_checkpoints(plan, cps, summaries, stateful=self.storage is not None)
        emitted = {spec: self._read_output(out) for spec, out in sorted(self.app.outputs.items())}
        return Result(
            batch_id=self.batch_id,
            outputs={spec: [KV(e.key, e.value) for e in es] for spec, es in emitted.items()},
            emitted=emitted,
            dead_letters=self._read_dead_letters(),
            stores=self.stores(),
            by_task={r.task_name: task_run(r) for r in summaries},
        )

    def _append_given(self, records: list[Record | tuple[Any, Any]], stream: str | None, partitions: int | None) -> None:
        """`process`'s records appended to `stream`, by default the job's only input."""
        if records or stream is not None:
            if stream is None:
                if len(self.config.inputs) != 1:
                    raise ValueError(
                        f"process(records, stream=...): the job has several inputs {sorted(map(str, self.config.inputs))}"
                    )
                stream = str(self.config.inputs[0])
            self.append(stream, records, partitions=partitions)

    def _generation(self) -> Generation:
        """The one generation the harness runs (it does not rescale), its job model built by the groupers at the
        first batch; each virtual task placed on its process slot and starting at offset 0, as the engine does."""
        for ss in self.config.inputs:
            self._count(ss, None)
        counts = {ss: self._counts[ss] for ss in self.config.inputs}
        model = build_job_model(self.config, counts)
        if self._model is not None and model != self._model:
            raise ValueError("the job model changed between batches (a stream's partition count)")
        if self._model is None:
            self._model = model
            self._slot_of = slot_of(model, self.config.container_process_count)
            self._slots = slot_tasks(model, self._slot_of)
            self._cps = {
                t.task_name: TaskCheckpoint.of_offsets(t.task_name, dict.fromkeys(t.system_stream_partitions, 0))
                for t in model.tasks()
            }
        factor = self.config.elasticity_factor
        return Generation(job_name=self.config.job_name, number=1, factor=factor, job_model=model, reason="test", created_ms=0)

    def _plan(self, generation: Generation, cps: Mapping[TaskName, TaskCheckpoint]) -> BatchPlan:
        """The engine's plan of a batch up to every input partition's end: nothing appended is left for later."""
        high = {}
        for cp in cps.values():
            for ssp in map(SystemStreamPartition.without_key_bucket, cp.offsets):
                high[ssp] = len(self._logs.get((ssp.system, ssp.stream, ssp.partition), ()))
        ranges = plan_ranges(cps.values(), high, max(1, sum(high.values())))
        return BatchPlan(job_name=self.config.job_name, batch_id=self.batch_id, generation=generation.number, ranges=ranges)

    def _process_slot(
        self, ctx: ProcessContext, reads: SlotReads, slot: int, side_batch: SideInputBatch | None
    ) -> list[dict[str, Any]]:
        """The slot's part of the batch through the engine's read (from the logs in memory) and process stage."""
        routed, _ = reads.read(slot, source=self._read_logs)
        if side_batch is not None:
            self._catch_up(side_batch, slot)
        return process_slot(ctx, slot, routed)

    def _read_logs(self, chunks: Iterable[Chunk]) -> Iterator[tuple[Chunk, Columns]]:
        """The engine's `read_chunks` for the logs in memory."""
        for c in chunks:
            log = self._logs[(c.system, c.stream, c.partition)]
            yield (
                c,
                {
                    "offset": list(range(c.start, c.end)),
                    "key": log.keys[c.start : c.end],
                    "value": log.values[c.start : c.end],
                    "timestamp": log.timestamps[c.start : c.end],
                },
            )

    def _context(self, state: BatchState | None, tables: SideInputBatch | None, slots: int) -> ProcessContext:
        return process_context(
            self.config,
            self.app,
            self.batch_id,
            slots=slots,
            state=state,
            tables=tables,
            stage_kafka=True,  # Kafka outputs to files, as under exactly-once: no broker to send to
            output_bootstraps={},
        )

    # --- side inputs ---------------------------------------------------------------

    def _side_inputs(self) -> SideInputBatch | None:
        """The batch's tables read up to each side-input partition's end now (the driver's replay rule)."""
        if not self.tables:
            return None
        out = []
        for t in self.tables:
            targets = []
            for ss in t.streams:
                for p in range(self._count(ss, None)):
                    log = self._logs.get((ss.system, ss.stream, p))
                    targets.append((SystemStreamPartition(ss.system, ss.stream, p), len(log) if log else 0))
            serdes = tuple(
                sorted({(s.system, self.config.serde(s.system, "key"), self.config.serde(s.system, "msg")) for s in t.streams})
            )
            bootstraps = tuple((s, _NO_BROKER) for s in sorted({s.system for s in t.streams}))
            out.append(
                TableBatch(
                    name=t.name,
                    targets=tuple(targets),
                    bootstraps=bootstraps,
                    serdes=serdes,
                    processor_factory=t.processor_factory,
                )
            )
        return SideInputBatch(self.config.job_name, self.config.job_state_dir, tuple(out))

    def _catch_up(self, batch: SideInputBatch, slot: int) -> None:
        """Each table's folder of the slot caught up from the in-memory log before `process_slot` opens it,
        which then finds nothing to read."""
        for tb in batch.tables:
            d = self.app.tables[tb.name]
            folder = local_state_dir(batch.state_dir, batch.job_name) / "side-inputs" / tb.name / f"slot-{slot}"
            table = _LogTable(folder, d, tb, _processor(d, tb.processor_factory))
            table.logs = self._logs
            try:
                table.catch_up()
            finally:
                table.close()

    # --- what the batch left -------------------------------------------------------

    def _read_output(self, out: OutputStream) -> list[Emitted]:
        c = self.config
        root = c.output_dir.rstrip("/")
        if out.kind == "parquet":
            folder, serdes = f"{root}/{out.name}", ("string", "json")
        else:
            folder, serdes = staging_root(root, out.system, out.name), (c.serde(out.system, "key"), c.serde(out.system, "msg"))
        emitted = []
        for row in self._batch_rows(folder):
            emitted.append(
                Emitted(
                    key=_decode(serdes[0], row["key"]),
                    value=deserialize(serdes[1], row["value"], "value"),
                    task=row["task_name"],
                    stream=f"{row['source_system']}.{row['source_stream']}",
                    partition=row["source_partition"],
                    offset=row["source_offset"],
                )
            )
        return emitted

    def _read_dead_letters(self) -> list[DeadLetter]:
        rows = self._batch_rows(self.config.dead_letter_dir)
        return [
            DeadLetter(
                key=r["key"],
                value=r["value"],
                error=r["error"],
                task=r["task_name"],
                stream=f"{r['system']}.{r['stream']}",
                partition=r["partition"],
                offset=r["offset"],
            )
            for r in rows
        ]

    def _batch_rows(self, root: str) -> list[dict[str, Any]]:
        """The batch's rows of a sink, slot by slot, each slot's file in the order the engine wrote it."""
        rows: list[dict[str, Any]] = []
        for slot in sorted(self._slots):
            path = Path(root) / batch_file_name(self.batch_id, f"slot-{slot}")
            if path.exists():
                rows += pq.read_table(path).to_pylist()
        return rows

    def stores(self) -> dict[str, dict[Any, Any]]:
        """Every store's committed state, all virtual tasks merged (read from their last snapshots). A window's
        store holds its operator's entries (open windows, timers, marks) under byte keys."""
        out: dict[str, dict[Any, Any]] = {}
        state_dir = local_state_dir(self.storage.state_dir if self.storage else None, self.config.job_name)
        for name, d in sorted(self.app.stores.items()):
            merged = out[name] = {}
            for task, cp in sorted(self._cps.items()):
                if cp.checkpoint_id is None:
                    continue  # no snapshot yet
                folder = StoreDirs.of(state_dir, task, name).valid_checkpoint(cp.checkpoint_id)
                if folder is None:
                    raise RuntimeError(f"store {name!r} of task {task.name!r}: no local snapshot {cp.checkpoint_id}")
                for k, v in _snapshot(folder, d):
                    if k in merged:
                        raise AssertionError(f"store {name!r}: key {k!r} is held by two virtual tasks")
                    merged[k] = v
        return out

    # --- the end -------------------------------------------------------------------

    def close(self) -> None:
        """Close the stores the batches left open (parked, as a Spark Python worker keeps them) and remove the
        harness's folder when it made it."""
        if self.storage is not None:
            for tasks in self._slots.values():
                container_process().close_container((self.storage, tasks))
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> TestRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _app_class(app: str | Callable[[ApplicationDescriptor], None]) -> str:
    if isinstance(app, str):
        return app
    spec = f"{app.__module__}:{app.__qualname__}"
    if "<" in app.__qualname__ or "." in app.__qualname__:
        raise ValueError(f"app {spec}: a factory at a module's top level, which Python workers can import by name")
    return spec


def _encode(serde: str, v: Any) -> bytes | None:
    return v if isinstance(v, bytes) or v is None else serialize(serde, v)


def _decode(serde: str, raw: bytes | None) -> Any:
    """A sink's key as the serde reads it; a Parquet output's key text as str, other bytes as they are."""
    try:
        return deserialize(serde, raw, "key")
    except ValueError:
        return raw


def _snapshot(folder: Path, d: StoreDescriptor) -> list[tuple[Any, Any]]:
    """A store's entries in a local RocksDB checkpoint, opened read-only (the checkpoint stays as it is)."""
    db = Rdict(str(folder), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return [(d.key_from(k), d.value_from(v)) for k, v in raw_items(db)]
    finally:
        db.close()
