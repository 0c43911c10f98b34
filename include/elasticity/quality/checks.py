"""The facts the data-quality suites check, as plain tables (pandas).

Each table has one boolean or count column that an expectation constrains, and
a `record` column that names the offending key and offset when it fails:

  loss     every input record the current checkpoints have passed is audited
  order    per key, audit order (batch, seq) follows offset order, across rescales
  routing  within a generation every key was handled by one virtual task
  audit    no input record audited twice
  sink     no input record twice in the exactly-once (Parquet) sink
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


@dataclass(frozen=True)
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
