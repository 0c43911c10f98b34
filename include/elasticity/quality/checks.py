"""The facts the data-quality suites check, as plain tables (pandas).

Each table has one boolean or count column that an expectation constrains, and
a `record` column that names the offending key and offset when it fails:

  loss     every input record the current checkpoints have passed is audited
  order    per key, audit order (batch, seq) follows offset order, across rescales
  routing  within a generation every key was handled by one virtual task
  audit    no input record audited twice
  sink     no input record twice in the exactly-once (Parquet) sink
  kafka    for exactly-once Kafka outputs, read read_committed and joined to their input by
           the provenance headers each record carries (source stream, partition, offset,
           virtual task, batch): no input record's output twice (kafka_unique), per key
           the outputs in input order (kafka_key_order), and each committed batch's
           outputs all visible, as many as its commit record counts (kafka_no_loss)
  state    for a stateful app, every stored value equals the app's recomputation
           from the processed input below the checkpoints (quality.state)

An incremental run validates only the batches committed since the last
validated one. Its edge is checked too: what the checkpoints had passed at the
last validation was done before (so it must not be audited again, and only the
rest must be audited now), and each key's last validated position and task
continue its order and routing.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.jobmodel.keybucket import record_hash
from elasticity.jobmodel.model import SystemStreamPartition, TaskName


@dataclass(frozen=True, kw_only=True)
class QualityInputs:
    audit: pd.DataFrame  # committed batches' audit rows
    inputs: pd.DataFrame  # re-read input records: system, stream, partition, offset, key
    sink: pd.DataFrame  # committed batches' Parquet output rows (may be empty)
    generation_of_batch: dict[int, int]
    factor: int  # of the current generation
    checkpoints: dict[TaskName, TaskCheckpoint]  # of the current generation
    before: Done | None = None  # what was done at the last validation (incremental runs)
    positions: pd.DataFrame | None = (
        None  # each key's last validated record: system, stream, partition, key, offset, task_name, generation
    )
    state: pd.DataFrame | None = None  # quality.state.state_table, for apps with a state_reference
    kafka: pd.DataFrame | None = None  # exactly-once Kafka outputs as read read_committed: KAFKA_COLUMNS
    kafka_batches: pd.DataFrame | None = None  # the window's committed batches x Kafka outputs: batch_id, output,
    # recorded (a commit record of the batch is visible), sent (the records it counts; missing: not counted)
    kafka_positions: pd.DataFrame | None = None  # per key and input partition, its last validated output (KAFKA_COLUMNS)
    validated_batch: int = 0  # the last batch validated before the window (incremental runs)
    lost: pd.DataFrame | None = None  # ranges the window's batches declared lost (log_bounds.LostRange): LOST_COLUMNS


KAFKA_COLUMNS = [  # an output record: where it is, its key, and its provenance headers (and a key's edge position)
    "output",
    "partition",
    "offset",
    "key",
    "source_system",
    "source_stream",
    "source_partition",
    "source_offset",
    "task_name",
    "batch_id",
    "seq",
]


@dataclass(frozen=True)
class Done:
    """The records a set of checkpoints has passed (offset below, or under a watermark)."""

    factor: int
    checkpoints: dict[TaskName, TaskCheckpoint]

    def mask(self, records: pd.DataFrame) -> pd.Series:
        owner: dict[SystemStreamPartition, tuple[int, tuple]] = {}
        for cp in self.checkpoints.values():
            for ssp, offset in cp.offsets.items():
                owner[ssp] = (offset, cp.watermarks.get(ssp, ()))
        done = []
        for system, stream, partition, offset, key in records[["system", "stream", "partition", "offset", "key"]].itertuples(
            index=False
        ):
            h = record_hash(key, offset)
            base = SystemStreamPartition(system, stream, int(partition))
            found = owner.get(base.with_key_bucket(h % self.factor) if self.factor > 1 else base)
            done.append(found is not None and (offset < found[0] or any(w.covers(h, offset) for w in found[1])))
        return pd.Series(done, index=records.index, dtype=bool)


def _record(row: pd.Series, key_col: str = "key") -> str:
    key = row[key_col]
    key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    return f"{row['stream']}-{row['partition']}@{row['offset']} key={key}"


def committed_records(q: QualityInputs) -> pd.DataFrame:
    """The re-read input records that the current checkpoints say are done, and that were not done before the window."""
    if not len(q.inputs):
        return q.inputs
    done = Done(q.factor, q.checkpoints).mask(q.inputs)
    if q.before is not None:
        done &= ~q.before.mask(q.inputs)
    return q.inputs[done]


def loss_table(q: QualityInputs) -> pd.DataFrame:
    committed = committed_records(q)
    audited = q.audit[["system", "stream", "partition", "offset"]].drop_duplicates().assign(audited=True)
    t = committed.merge(audited, on=["system", "stream", "partition", "offset"], how="left")
    t["audited"] = t["audited"].eq(True)
    t["record"] = t.apply(_record, axis=1) if len(t) else pd.Series(dtype=str)
    return t[["record", "audited"]]


def _with_positions(q: QualityInputs, audit: pd.DataFrame) -> pd.DataFrame:
    """The window's audit rows after each key's last validated record (batch -1: before the window)."""
    if q.positions is None or not len(q.positions):
        return audit.assign(generation=audit["batch_id"].map(q.generation_of_batch))
    prev = q.positions.assign(batch_id=-1, seq=0)
    window = audit.assign(generation=audit["batch_id"].map(q.generation_of_batch))
    return pd.concat([prev, window], ignore_index=True)


def order_table(q: QualityInputs) -> pd.DataFrame:
    a = _with_positions(q, q.audit[q.audit["key"].notna()]).sort_values(["batch_id", "task_name", "seq"], kind="stable")
    prev = a.groupby(["system", "stream", "partition", "key"], sort=False)["offset"].shift()
    t = a.assign(in_order=prev.isna() | (a["offset"] > prev))
    t["record"] = t.apply(_record, axis=1) if len(t) else pd.Series(dtype=str)
    return t[["record", "in_order"]]


def routing_table(q: QualityInputs) -> pd.DataFrame:
    a = _with_positions(q, q.audit[q.audit["key"].notna()])
    t = (
        a.groupby(["generation", "system", "stream", "partition", "key"])["task_name"]
        .nunique()
        .rename("tasks_per_key")
        .reset_index()
    )
    t["record"] = [
        f"generation {g} {s}-{p} key={k.decode('utf-8', 'replace')}"
        for g, s, p, k in t[["generation", "stream", "partition", "key"]].itertuples(index=False)
    ]
    return t[["record", "tasks_per_key"]]


def audit_table(q: QualityInputs) -> pd.DataFrame:
    """The window's audit rows, plus a row for each of them that was done before the window: a duplicate either way."""
    t = q.audit[["system", "stream", "partition", "offset", "key", "batch_id"]].copy()
    if q.before is not None and len(t):
        t = pd.concat([t, t[q.before.mask(t)].assign(batch_id=-1)], ignore_index=True)
    t["record"] = t.apply(_record, axis=1) if len(t) else pd.Series(dtype=str)
    return t


def sink_table(q: QualityInputs) -> pd.DataFrame:
    t = (
        q.sink[["output", "source_partition", "source_offset", "batch_id"]].copy()
        if len(q.sink)
        else pd.DataFrame({"output": [], "source_partition": [], "source_offset": [], "batch_id": []})
    )
    t["record"] = [
        f"{o} from partition {p}@{s}" for o, p, s in t[["output", "source_partition", "source_offset"]].itertuples(index=False)
    ]
    return t


def state_table(q: QualityInputs) -> pd.DataFrame:
    assert q.state is not None  # the check applies to apps with a state_reference only
    return q.state


def _kafka_record(row) -> str:
    key = row.key.decode("utf-8", "replace") if isinstance(row.key, bytes) else row.key
    return (
        f"{row.output}-{row.partition}@{row.offset} key={key} from {row.source_stream}-{row.source_partition}@"
        f"{row.source_offset} (batch {row.batch_id}, {row.task_name})"
    )


def _kafka(q: QualityInputs) -> pd.DataFrame:
    assert q.kafka is not None  # the Kafka checks apply to jobs with exactly-once Kafka outputs only
    return q.kafka.sort_values(["output", "partition", "offset"], kind="stable")


def kafka_unique_table(q: QualityInputs) -> pd.DataFrame:
    """Each output with the input record it comes from and its place among that record's outputs on the topic
    (`nth`: 0 for a map's one output; a flatMap's outputs of one record count up in their task's order). An input
    record relayed twice, by a replay or a transaction seen twice, has two outputs with the same place. An output
    of a batch validated before, found past the edge an incremental run reads from, was written again: it counts
    twice."""
    t = _kafka(q)
    source = ["output", "source_system", "source_stream", "source_partition", "source_offset"]
    t = t.assign(nth=t.groupby([*source, "batch_id", "task_name"], dropna=False)["seq"].rank(method="dense") - 1)
    if q.validated_batch:
        t = pd.concat([t, t[t["batch_id"] <= q.validated_batch]], ignore_index=True)
    t["record"] = [_kafka_record(r) for r in t.itertuples(index=False)]
    return t[[*source, "nth", "record"]]


def kafka_order_table(q: QualityInputs) -> pd.DataFrame:
    """Per key and input partition, in each output partition's log order: a later output comes from a later input
    record (or from the same record, later in its task's output order); each key's last validated output (an
    incremental run's edge) comes first."""
    t = _kafka(q).assign(edge=False)
    if q.kafka_positions is not None and len(q.kafka_positions):
        t = pd.concat([q.kafka_positions.assign(edge=True), t], ignore_index=True)
    t = t[t["key"].notna()]
    group = t.groupby(["output", "partition", "key", "source_system", "source_stream", "source_partition"], sort=False)
    prev = {c: group[c].shift() for c in ("source_offset", "batch_id", "task_name", "seq")}
    later = t["source_offset"] > prev["source_offset"]
    same = (t["source_offset"] == prev["source_offset"]) & (t["batch_id"] == prev["batch_id"])
    same &= (t["task_name"] == prev["task_name"]) & (t["seq"] > prev["seq"])
    t = t.assign(in_order=prev["source_offset"].isna() | later | same)
    t = t[~t["edge"].astype(bool)]
    t["record"] = [_kafka_record(r) for r in t.itertuples(index=False)]
    return t[["record", "in_order"]]


def kafka_loss_table(q: QualityInputs) -> pd.DataFrame:
    """Per committed batch of the window and Kafka output: the records visible read_committed against those its
    commit record says it sent. A batch no visible commit record covers fails; one whose record predates the
    counts passes on its record alone."""
    assert q.kafka is not None and q.kafka_batches is not None
    found = q.kafka.groupby(["batch_id", "output"]).size().rename("visible").reset_index()
    t = q.kafka_batches.merge(found, on=["batch_id", "output"], how="left")
    t["visible"] = t["visible"].fillna(0).astype(int)
    t["complete"] = t["recorded"].astype(bool) & (t["sent"].isna() | (t["sent"] == t["visible"])).astype(bool)
    t["record"] = [
        f"batch {b} to {o}: {v} visible, "
        + ("no commit record visible" if not r else "not counted" if pd.isna(s) else f"{int(s)} sent")
        for b, o, r, s, v in t[["batch_id", "output", "recorded", "sent", "visible"]].itertuples(index=False)
    ]
    return t[["record", "complete"]]


LOST_COLUMNS = ["batch_id", "task_name", "stream", "partition", "start", "end"]


def lost_table(q: QualityInputs) -> pd.DataFrame:
    """Per range a batch of the window declared lost (its records removed from the log before any task read them,
    under task.input.truncation.policy=skip-to-earliest): never processed, so each row fails, named. The input
    records cannot show it: they are gone from the log the check reads."""
    t = q.lost if q.lost is not None else pd.DataFrame(columns=LOST_COLUMNS)
    records = [
        f"batch {b}: {stream}-{partition} offsets {start}..{end - 1} ({task}) removed from the log before they were read"
        for b, task, stream, partition, start, end in t[LOST_COLUMNS].itertuples(index=False)
    ]
    return pd.DataFrame({"record": records, "processed": [False] * len(records)})
