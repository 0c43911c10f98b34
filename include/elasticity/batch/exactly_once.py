"""Exactly-once Kafka outputs: a batch's Kafka outputs show to `read_committed` readers if and only if its
checkpoint commits.

The protocol (Kafka Streams' way of committing offsets in the transaction of the outputs):
1. The slots do not produce. They stage each Kafka output's records like a Parquet output, one file per batch
   and slot (`<job.output.path>/_kafka/<system>.<topic>/batch_id=<n>/slot-<i>.parquet`), which a retry overwrites.
2. The commit runs one Kafka transaction on the run's transactional producer: the staged records of every batch
   it covers, in batch order, then the commit record (the checkpoints, `checkpoint.commit_record`) to the job's
   commit topic. Then the store commits the same checkpoints, as without Kafka outputs.
3. A run starts by fencing every transactional.id an earlier run recorded (what a dead or stalled run left open
   is aborted, and its commit can no longer happen), then finishes the last commit if its Kafka transaction
   committed and the store's did not (roll forward from the commit record), then records its own id.
A crash before the Kafka commit leaves nothing visible and the batch replays; after it, the next run writes
the checkpoints the record carries, and the batch does not replay.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from elasticity.batch.sinks import OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.batch_plan import BatchPlan
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


def staged_records(outputs: Iterable[StagedOutput], batch_ids: Iterable[int]) -> Iterator[OutputRecord]:
    """The staged records of each batch in turn, each batch's in task and output order."""
    outputs = list(outputs)
    for b in batch_ids:
        for out in outputs:
            table = read_table(out.root, OUTPUT_SCHEMA, [b]).sort_by([("task_name", "ascending"), ("seq", "ascending")])
            for key, value in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True):
                yield OutputRecord(out.topic, key, value)


@dataclass
class ExactlyOnceOutputs:
    """One run's side of the protocol: `start` fences and rolls forward, `commit` before each store commit."""

    job_name: str
    job_id: str
    kafka: Kafka  # the producer settings of the outputs' system
    outputs: tuple[StagedOutput, ...]
    store: CheckpointStore
    write_versions: tuple[int, ...]
    owner: str
    _tx: JobTransactions | None = field(default=None, init=False)

    @property
    def commits(self) -> str:
        return commit_topic(self.job_name, self.job_id)

    def start(self) -> CommitRecord | None:
        """Fence earlier runs, finish a commit their Kafka transaction made, open this run's producer. Returns the
        commit record rolled forward, if any. The caller holds the job's lease."""
        earlier = self.store.open_transactional_ids(self.job_name)
        for tid in earlier:
            fence(self.kafka, tid)
        self.store.close_transactional_ids(self.job_name, earlier)
        rolled = self.roll_forward()
        tid = transactional_id(self.job_name, self.job_id, uuid.uuid4().hex)
        self.store.open_transactional_id(self.job_name, tid)
        self._tx = JobTransactions(self.kafka, tid, self.commits)
        return rolled

    def roll_forward(self) -> CommitRecord | None:
        """The last commit record's batches, when the store still has them planned: their Kafka outputs are
        visible, so their checkpoints are written (never replayed)."""
        record = last_record(read_commit_tail(self.kafka, self.commits), self.job_name)
        if record is None:
            return None
        found = self.store.plan(self.job_name, record.batch_id)
        if found is None or found[1] != "planned":
            return None
        plan, _ = found
        log.info(
            "job %r: batches %s committed their Kafka outputs before the run that made them died; their checkpoints are "
            "written from the commit record",
            self.job_name,
            list(record.batch_ids),
        )
        self.store.commit_batch(plan, record.checkpoints, self.write_versions, self.owner, record.batch_ids[:-1])
        return record

    def commit(self, plan: BatchPlan, checkpoints: Iterable[TaskCheckpoint], covers: tuple[int, ...]) -> int:
        """The Kafka transaction of a commit: the staged outputs of every batch it covers, then its record."""
        if self._tx is None:
            raise RuntimeError("ExactlyOnceOutputs.start() first")
        batch_ids = (*covers, plan.batch_id)
        record = CommitRecord(self.job_name, plan.generation, batch_ids, uuid.uuid4().hex, tuple(checkpoints))
        return self._tx.commit(staged_records(self.outputs, batch_ids), to_parts(record))

    def close(self) -> None:
        """The run ends; with no transaction open, the next one need not fence it."""
        if self._tx is not None:
            self._tx.close()
            if not self._tx.in_transaction:  # else the next run fences it, aborting what is open
                self.store.close_transactional_ids(self.job_name, [self._tx.tid])
            self._tx = None
