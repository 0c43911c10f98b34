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
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.batch_plan import BatchPlan, BatchStatus
from elasticity.checkpoint.commit_record import CommitRecord, last_record, to_parts
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.kafka.admin import Kafka
from elasticity.kafka.transactions import (
    JobTransactions,
    OutputRecord,
    commit_topic,
    fence,
    read_commit_tail,
    transactional_id,
)

log = logging.getLogger(__name__)

STAGING = "_kafka"  # under job.output.path; a leading "_" keeps it out of the Parquet outputs' listing


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

    def counts(self, batch_ids: Iterable[int]) -> dict[int, dict[str, int]]:
        counts: dict[int, dict[str, int]] = {b: {} for b in batch_ids}
        for topic, table in self.tables:
            for b in table.column("batch_id").to_pylist():
                counts[b][topic] = counts[b].get(topic, 0) + 1
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
    if found is None or found[1] != "planned":
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
        """The Kafka transaction of a commit: the staged outputs of every batch it covers, then its record."""
        if self._tx is None:
            raise RuntimeError("ExactlyOnceOutputs.start() first")
        batch_ids = (*covers, plan.batch_id)
        staged = StagedBatches.read(self.outputs, batch_ids)
        record = CommitRecord(
            job_name=self.job_name,
            generation=plan.generation,
            batch_ids=batch_ids,
            commit_id=uuid.uuid4().hex,
            checkpoints=tuple(checkpoints),
            outputs=staged.counts(batch_ids),
        )
        sent = self._tx.commit(staged.records(), to_parts(record))
        self._last_batch = plan.batch_id
        return sent

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
