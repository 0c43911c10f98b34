"""Where incremental data quality stands for a job: its validated edge.

The edge is what the next run needs to check only the batches committed since,
so that its cost depends on them and not on the job's age:
- the last validated batch, and what its checkpoints had passed;
- each key's last validated record (its order and routing continue from it);
- for a stateful app, each store's expected value per key (the next run folds
  the new batches' records into it and compares with the committed stores);
- for exactly-once Kafka outputs, where each output and commit topic partition
  was read up to, and per key the last validated output (its order continues).

Kept in the checkpoint store, one row per job replaced whole in one transaction
(its JSON document and its Parquet tables together), so an edge is whole or not
there, and a run on any worker continues from the edge a run on another left.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.store import CheckpointStore, QualityEdge
from elasticity.checkpoint.tool import checkpoints_from_tool_json, checkpoints_to_tool_json
from elasticity.quality.checks import KAFKA_COLUMNS, Done

POSITION_COLUMNS = ["system", "stream", "partition", "key", "offset", "task_name", "generation"]
STATE_COLUMNS = ["store", "key", "value"]

State = dict[str, dict[Any, Any]]  # store -> key -> expected value


@dataclass(frozen=True, kw_only=True)
class Cursor:
    last_batch: int
    done: Done
    positions: pd.DataFrame
    state: State | None = None  # None: not recorded (a first run, or an edge an earlier version wrote)
    kafka_positions: pd.DataFrame | None = None
    kafka_edges: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> next offset to read
    version: int = 0  # the version the last batch belongs to: the replay generation it follows (0: none)


def start() -> Cursor:
    """The edge before the first validation: nothing done, nothing read."""
    return Cursor(
        last_batch=0,
        done=Done(1, {}),
        positions=pd.DataFrame(columns=POSITION_COLUMNS),
        state={},
        kafka_positions=pd.DataFrame(columns=KAFKA_COLUMNS),
    )


def validated_batch(store: CheckpointStore, job: str) -> int:
    """The last batch an incremental data-quality run passed (0: none yet): what retention may expire up to."""
    return store.validated_batch(job)


def _table(data: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(data))


def _parquet(table: pd.DataFrame) -> bytes:
    out = io.BytesIO()
    table.to_parquet(out, index=False)
    return out.getvalue()


def load(store: CheckpointStore, job: str, stores: Mapping[str, StoreDescriptor]) -> Cursor | None:
    row = store.quality_edge(job)
    if row is None:
        return None
    doc = json.loads(row.edge)
    cps = {cp.task_name: cp for cp in checkpoints_from_tool_json(doc["checkpoints"])}
    state: State | None = None
    if row.state is not None:
        state = {name: {} for name in doc["state_stores"]}
        for name, k, v in _table(row.state).itertuples(index=False):
            d = stores.get(name)
            if d is None or name not in state:
                state = None  # the app's stores changed since: recompute rather than trust
                break
            state[name][d.key_from(k)] = d.value_from(v)
    edges = {t: {int(p): int(o) for p, o in parts.items()} for t, parts in doc.get("kafka_edges", {}).items()}
    return Cursor(
        last_batch=row.last_batch,
        done=Done(int(doc["factor"]), cps),
        positions=_table(row.positions),
        state=state,
        kafka_positions=_table(row.kafka_positions) if row.kafka_positions is not None else None,
        kafka_edges=edges,
        version=int(doc.get("version", 0)),
    )


def next_positions(previous: pd.DataFrame, audit: pd.DataFrame, generation_of_batch: dict[int, int]) -> pd.DataFrame:
    """Each key's last validated record once the window's audit rows are validated too."""
    keyed = audit[audit["key"].notna()].assign(generation=audit["batch_id"].map(generation_of_batch))
    latest = (
        keyed.sort_values(["batch_id", "seq"])
        .groupby(["system", "stream", "partition", "key"], sort=False)
        .tail(1)[POSITION_COLUMNS]
    )
    merged = pd.concat([previous, latest], ignore_index=True) if len(previous) else latest
    return merged.drop_duplicates(["system", "stream", "partition", "key"], keep="last")


def save(store: CheckpointStore, job: str, edge: Cursor, stores: Mapping[str, StoreDescriptor]) -> None:
    """After a passing run: the window's end becomes the edge of the next one (the row replaced whole)."""
    doc: dict[str, Any] = {
        "factor": edge.done.factor,
        "checkpoints": checkpoints_to_tool_json(edge.done.checkpoints.values()),
        "kafka_edges": {t: {str(p): o for p, o in parts.items()} for t, parts in edge.kafka_edges.items()},
        "version": edge.version,
    }
    state = None
    if edge.state is not None:
        rows = [
            (name, stores[name].key_bytes(k), stores[name].value_bytes(v))
            for name, values in edge.state.items()
            for k, v in values.items()
        ]
        doc["state_stores"] = sorted(edge.state)
        state = _parquet(pd.DataFrame(rows, columns=STATE_COLUMNS))
    store.save_quality_edge(
        job,
        QualityEdge(
            last_batch=edge.last_batch,
            edge=json.dumps(doc),
            positions=_parquet(edge.positions),
            state=state,
            kafka_positions=_parquet(edge.kafka_positions) if edge.kafka_positions is not None else None,
        ),
    )
