"""Exactly-once Kafka outputs: a batch's Kafka outputs show to `read_committed` readers if and only if its
checkpoint commits.

The protocol (Kafka Streams' way of committing offsets in the transaction of the outputs):
1. The slots do not produce. They stage each Kafka output's records like a Parquet output, one file per batch
   and slot (`<job.output.path>/_kafka/<system>.<topic>/batch-<n>-slot-<i>.parquet`), which a retry overwrites.
2. The commit runs one Kafka transaction on the run's transactional producer: the staged records of every batch
   it covers, in batch order, each with its provenance headers (`PROVENANCE`), then the commit record (the
   checkpoints and each batch's record counts, `checkpoint.commit_record`) to the job's commit topic. Then the
   store commits the same checkpoints, as without Kafka outputs.
3. A run, and a rescale, start by fencing every transactional.id an earlier run recorded (what a dead or
   stalled run left open is aborted, and its commit can no longer happen), then finish the last commit if its
   Kafka transaction committed and the store's did not (roll forward from the commit record); a run then
   records its own id.
A crash before the Kafka commit leaves nothing visible and the batch replays; after it, the next run writes
the checkpoints the record carries, and the batch does not replay.

An output record the broker refuses (too large for the topic's `max.message.bytes`, invalid: `kafka.refusals`)
aborts the transaction it is in, and would on every replay. Under `task.dead.letter.policy=dlq` it goes to the
dead letters of its batch (`<n>-e<epoch>-refused`, charged to the input record it derives from, with the
refused key and value and the broker's reason), written before a new transaction commits every other record
and a commit record that counts only those: the batch commits once, less the refused records, which data
quality takes as declared. Under `fail` nothing of the commit shows (its transaction aborted) and the run fails
naming the record and the broker's reason; the batch stays planned, so every later run replays it and fails
the same way, at once, until the app or the topic changes or the policy is `dlq`: the records of a Kafka
transaction commit together, and a commit cannot leave one out without dead-lettering it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from elasticity.api.stream import ApplicationDescriptor
from elasticity.batch.sinks.outputs import DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, dead_letter, read_table, write_batch_file
from elasticity.checkpoint.batch_plan import BatchPlan, BatchStatus
from elasticity.checkpoint.commit_record import CommitRecord, last_record, to_parts
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import JobConfig
from elasticity.config.names import commit_topic
from elasticity.config.runtime_rules import check_exactly_once_systems
from elasticity.jobmodel.model import TaskName
from elasticity.kafka.admin import client_settings
from elasticity.kafka.clients import Kafka
from elasticity.kafka.refusals import Refusal
from elasticity.kafka.transactions import (
    JobTransactions,
    OutputRecord,
    OutputRefused,
    fence,
    read_commit_tail,
    transactional_id,
)

log = logging.getLogger(__name__)

STAGING = "_kafka"
REFUSED = "refused"  # the name of a batch's dead-letter file of refused Kafka outputs  # under job.output.path; a leading "_" keeps it out of the Parquet outputs' listing


def staging_root(output_path: str, system: str, topic: str) -> str:
    return f"{output_path.rstrip('/')}/{STAGING}/{system}.{topic}"


@dataclass(frozen=True)
class StagedOutput:
    """A Kafka output of the job: where its records wait for their batch's commit."""

    topic: str
    root: str


PROVENANCE = (  # the headers of each output record: the input record it comes from, where it was made
    "elasticity.source.system",
    "elasticity.source.stream",
    "elasticity.source.partition",
    "elasticity.source.offset",
    "elasticity.task",
    "elasticity.batch",
    "elasticity.seq",  # its place in the task's output order within the batch
)
_COLUMNS = ("source_system", "source_stream", "source_partition", "source_offset", "task_name", "batch_id", "seq")


def provenance(headers: Iterable[tuple[str, bytes | None]] | None) -> dict[str, str]:
    """An output record's provenance headers, by the staged column they carry (`_COLUMNS`), as text."""
    names = dict(zip(PROVENANCE, _COLUMNS, strict=True))
    return {names[k]: v.decode() for k, v in headers or () if k in names and v is not None}


@dataclass(frozen=True)
class StagedBatches:
    """The staged records of a commit's batches, each batch's in task and output order, and how many each output
    got per batch (carried in the commit record, so that a reader can tell that none is missing)."""

    tables: list[tuple[str, pa.Table]]  # (topic, records), batch by batch, outputs in order

    @classmethod
    def read(cls, outputs: Iterable[StagedOutput], batch_ids: Iterable[int]) -> StagedBatches:
        outputs = list(outputs)
        return cls(
            [
                (out.topic, read_table(out.root, OUTPUT_SCHEMA, [b]).sort_by([("task_name", "ascending"), ("seq", "ascending")]))
                for b in batch_ids
                for out in outputs
            ]
        )

    def counts(self, batch_ids: Iterable[int], refused: Iterable[int] = ()) -> dict[int, dict[str, int]]:
        """Per batch and topic, the records sent: all but the `refused` (indices in `records()` order)."""
        counts: dict[int, dict[str, int]] = {b: {} for b in batch_ids}
        left_out, i = set(refused), 0
        for topic, table in self.tables:
            for b in table.column("batch_id").to_pylist():
                if i not in left_out:
                    counts[b][topic] = counts[b].get(topic, 0) + 1
                i += 1
        return counts

    def records(self) -> Iterator[OutputRecord]:
        """Each record with the provenance headers (PROVENANCE), which data quality joins to the input with."""
        for topic, table in self.tables:
            columns = [table.column(c).to_pylist() for c in ("key", "value", *_COLUMNS)]
            for key, value, *where in zip(*columns, strict=True):
                headers = tuple((h, str(v).encode()) for h, v in zip(PROVENANCE, where, strict=True) if v is not None)
                yield OutputRecord(topic, key, value, headers)


def settle(
    job_name: str,
    job_id: str,
    store: CheckpointStore,
    *,
    kafka_for: Callable[[str], Kafka],
    write_versions: tuple[int, ...],
    owner: str,
) -> list[CommitRecord]:
    """Before a run or a rescale, under the job's lease: fence every transactional.id an earlier run recorded
    (what it left open is aborted, its commit refused), then write the checkpoints of a commit whose Kafka
    transaction committed while the store's did not. Returns the commit records rolled forward."""
    earlier = store.open_transactional_ids(job_name)
    rolled = []
    for system in dict.fromkeys(system for _, system in earlier):
        kafka = kafka_for(system)
        for tid, s in earlier:
            if s == system:
                fence(kafka, tid)
        if (
            record := _roll_forward(job_name, job_id, store, kafka=kafka, write_versions=write_versions, owner=owner)
        ) is not None:
            rolled.append(record)
    store.close_transactional_ids(job_name, [tid for tid, _ in earlier])
    return rolled


def _roll_forward(
    job_name: str, job_id: str, store: CheckpointStore, *, kafka: Kafka, write_versions: tuple[int, ...], owner: str
) -> CommitRecord | None:
    """The last commit record's batches, when the store still has them planned: their Kafka outputs are
    visible, so their checkpoints are written (never replayed)."""
    record = last_record(read_commit_tail(kafka, commit_topic(job_name, job_id)), job_name)
    if record is None:
        return None
    found = store.plan(job_name, record.batch_id)
    if found is None or found[1] is not BatchStatus.PLANNED:
        return None
    log.info(
        "job %r: batches %s committed their Kafka outputs before the run that made them died; their checkpoints are "
        "written from the commit record",
        job_name,
        list(record.batch_ids),
    )
    store.commit_batch(found[0], record.checkpoints, write_versions, owner=owner, covers=record.batch_ids[:-1])
    return record


@dataclass(kw_only=True)
class ExactlyOnceOutputs:
    """One run's side of the protocol: `start` settles what earlier runs left and opens this run's producer,
    `commit` runs before each store commit, `close` ends the run."""

    job_name: str
    job_id: str
    system: str  # where the job's Kafka outputs and its commit records go
    kafka_for: Callable[[str], Kafka]  # a system's producer settings
    outputs: tuple[StagedOutput, ...]
    store: CheckpointStore
    write_versions: tuple[int, ...]
    owner: str
    dead_letter_path: str | None = None  # job.dead.letter.path: refused outputs' dead letters (policy dlq)
    policy: str = "dlq"  # task.dead.letter.policy: what a refused output does (the module's docstring)
    refused: dict[int, int] = field(default_factory=dict, init=False)  # batch -> outputs dead-lettered by the last commit
    _tx: JobTransactions | None = field(default=None, init=False)
    _last_batch: int | None = field(default=None, init=False)  # of the last commit whose Kafka transaction committed

    def start(self) -> list[CommitRecord]:
        """Settle earlier runs, then record and open this run's transactional.id. Returns what was rolled forward."""
        rolled = settle(
            self.job_name, self.job_id, self.store, kafka_for=self.kafka_for, write_versions=self.write_versions, owner=self.owner
        )
        tid = transactional_id(self.job_name, self.job_id, uuid.uuid4().hex)
        self.store.open_transactional_id(self.job_name, tid, self.system)
        self._tx = JobTransactions(self.kafka_for(self.system), tid, commit_topic(self.job_name, self.job_id))
        return rolled

    def commit(self, plan: BatchPlan, checkpoints: Iterable[TaskCheckpoint], covers: tuple[int, ...]) -> int:
        """The Kafka transaction of a commit: the staged outputs of every batch it covers, then its record; an
        output the broker refuses is dead-lettered or fails the commit (the module's docstring). `refused` says
        how many of each batch's outputs went to the dead letters."""
        if self._tx is None:
            raise RuntimeError("ExactlyOnceOutputs.start() first")
        batch_ids = (*covers, plan.batch_id)
        staged = StagedBatches.read(self.outputs, batch_ids)
        records, cps, commit_id = list(staged.records()), tuple(checkpoints), uuid.uuid4().hex

        def commit_record(refused: frozenset[int]) -> list[bytes]:
            counts = staged.counts(batch_ids, refused)
            return to_parts(
                CommitRecord(
                    job_name=self.job_name,
                    generation=plan.generation,
                    batch_ids=batch_ids,
                    commit_id=commit_id,
                    checkpoints=cps,
                    outputs=counts,
                )
            )

        def dead_letters(refused: list[Refusal]) -> None:
            self.refused = self._dead_letters(records, refused)

        self.refused = {}
        try:
            sent = self._tx.commit(records, commit_record, on_refused=dead_letters if self.policy == "dlq" else None)
        except OutputRefused as e:
            raise OutputRefused(self._refused_error(records[e.refused.index], e.refused), e.refused) from None
        self._last_batch = plan.batch_id
        return sent

    def _dead_letters(self, records: list[OutputRecord], refused: list[Refusal]) -> dict[int, int]:
        """Every refused output so far as a dead letter of its batch, each batch's file written whole (again),
        before the transaction that leaves them out commits; returns how many per batch."""
        if self.dead_letter_path is None:
            raise RuntimeError("ExactlyOnceOutputs.dead_letter_path: where refused outputs go under task.dead.letter.policy=dlq")
        by_batch: dict[int, list[dict]] = {}
        for r in refused:
            record = records[r.index]
            where = provenance(record.headers)
            batch = int(where["batch_id"])
            source = (
                where.get("source_system", ""),
                where.get("source_stream", ""),
                int(where.get("source_partition", -1)),
                int(where.get("source_offset", -1)),
            )
            letter = dead_letter(
                source,
                record.key,
                record.value,
                task_name=TaskName(where.get("task_name", "")),
                batch_id=batch,
                error=r.describe(self.system),
            )
            by_batch.setdefault(batch, []).append(letter)
        epoch = self.store.held_epoch(self.job_name, self.owner)
        for batch, letters in by_batch.items():
            table = pa.Table.from_pylist(letters, schema=DEAD_LETTER_SCHEMA)
            write_batch_file(self.dead_letter_path, batch, REFUSED, table, epoch=epoch)
        return {b: len(letters) for b, letters in by_batch.items()}

    def _refused_error(self, record: OutputRecord, refused: Refusal) -> str:
        """Under task.dead.letter.policy=fail: which output, from which input record, and why, and what follows."""
        w = provenance(record.headers)
        source = f"{w.get('source_system')}.{w.get('source_stream')}-{w.get('source_partition')}@{w.get('source_offset')}"
        return (
            f"batch {w.get('batch_id')}: {refused.describe(self.system)}; it derives from {source} (task {w.get('task_name')}). "
            "task.dead.letter.policy=fail: nothing of the batch is committed (its Kafka transaction was aborted), and each "
            "run replays it and fails so until the app or the topic changes, or task.dead.letter.policy=dlq dead-letters it"
        )

    def close(self) -> None:
        """The run ends. With no transaction open and its last Kafka commit in the store too, its id is closed;
        else the next run (or rescale) fences it and rolls that commit forward."""
        if self._tx is None:
            return
        self._tx.close()
        last = self.store.plan(self.job_name, self._last_batch) if self._last_batch is not None else None
        if not self._tx.in_transaction and (last is None or last[1] == BatchStatus.COMMITTED):
            self.store.close_transactional_ids(self.job_name, [self._tx.tid])
        self._tx = None


def staged_outputs(config: JobConfig, app: ApplicationDescriptor) -> tuple[StagedOutput, ...]:
    """The app's Kafka outputs when they are exactly-once (processing.guarantee): staged per batch and slot,
    produced in the commit's transaction. Empty: none, or at-least-once."""
    if config.processing_guarantee != "exactly_once":
        return ()
    kafka = sorted((o for o in app.outputs.values() if o.kind == "kafka"), key=lambda o: (o.system, o.name))
    check_exactly_once_systems(o.system for o in kafka)
    return tuple(StagedOutput(o.name, staging_root(config.output_dir, o.system, o.name)) for o in kafka)


def exactly_once_outputs(
    config: JobConfig, app: ApplicationDescriptor, *, staged: tuple[StagedOutput, ...], store: CheckpointStore, owner: str
) -> ExactlyOnceOutputs | None:
    """The run's exactly-once outputs (None: no staged output), producing as `owner` through the job's producers."""
    if not staged:
        return None
    system = next(o.system for o in app.outputs.values() if o.kind == "kafka")
    return ExactlyOnceOutputs(
        job_name=config.job_name,
        job_id=config.job_id,
        system=system,
        kafka_for=lambda s: client_settings(config, s, "producer"),
        outputs=staged,
        store=store,
        write_versions=config.checkpoint_write_versions,
        owner=owner,
        dead_letter_path=config.dead_letter_dir,
        policy=config.dead_letter_policy,
    )
