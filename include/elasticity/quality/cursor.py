"""Where incremental data quality stands for a job: its validated edge.

The edge is what the next run needs to check only the batches committed since,
so that its cost depends on them and not on the job's age:
- the last validated batch, and what its checkpoints had passed;
- each key's last validated record (its order and routing continue from it);
- for a stateful app, each store's expected value per key (the next run folds
  the new batches' records into it and compares with the committed stores);
- for exactly-once Kafka outputs, where each output and commit topic partition
  was read up to, and per key the last validated output (its order continues).

Kept in the report folder: `validated.json` naming its `*-<batch>.parquet`
tables, replaced atomically, so an edge is whole or not there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.tool import checkpoints_from_tool_json, checkpoints_to_tool_json
from elasticity.quality.checks import KAFKA_COLUMNS, Done

POSITION_COLUMNS = ["system", "stream", "partition", "key", "offset", "task_name", "generation"]
STATE_COLUMNS = ["store", "key", "value"]
_TABLES = ("positions", "state", "kafka-positions")

State = dict[str, dict[Any, Any]]  # store -> key -> expected value


@dataclass(frozen=True, kw_only=True)
class Cursor:
    last_batch: int
    done: Done
    positions: pd.DataFrame
    state: State | None = None  # None: not recorded (a first run, or an edge an earlier version wrote)
    kafka_positions: pd.DataFrame | None = None
    kafka_edges: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> next offset to read


def start() -> Cursor:
    """The edge before the first validation: nothing done, nothing read."""
    return Cursor(
        last_batch=0,
        done=Done(1, {}),
        positions=pd.DataFrame(columns=POSITION_COLUMNS),
        state={},
        kafka_positions=pd.DataFrame(columns=KAFKA_COLUMNS),
    )


def validated_batch(folder: Path) -> int:
    """The last batch an incremental data-quality run passed (0: none yet): what retention may expire up to."""
    try:
        return int(json.loads((folder / "validated.json").read_text())["last_batch"])
    except (OSError, ValueError, KeyError):
        return 0


def load(folder: Path, stores: Mapping[str, StoreDescriptor]) -> Cursor | None:
    try:
        doc = json.loads((folder / "validated.json").read_text())
    except (OSError, ValueError):
        return None
    cps = {cp.task_name: cp for cp in checkpoints_from_tool_json(doc["checkpoints"])}
    positions = pd.read_parquet(folder / doc["positions"])
    state: State | None = None
    if "state" in doc:
        state = {name: {} for name in doc["state_stores"]}
        for name, k, v in pd.read_parquet(folder / doc["state"]).itertuples(index=False):
            d = stores.get(name)
            if d is None or name not in state:
                state = None  # the app's stores changed since: recompute rather than trust
                break
            state[name][d.key_from(k)] = d.value_from(v)
    kafka_positions = pd.read_parquet(folder / doc["kafka_positions"]) if "kafka_positions" in doc else None
    edges = {t: {int(p): int(o) for p, o in parts.items()} for t, parts in doc.get("kafka_edges", {}).items()}
    return Cursor(
        last_batch=int(doc["last_batch"]),
        done=Done(int(doc["factor"]), cps),
        positions=positions,
        state=state,
        kafka_positions=kafka_positions,
        kafka_edges=edges,
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


def save(folder: Path, edge: Cursor, stores: Mapping[str, StoreDescriptor]) -> None:
    """After a passing run: the window's end becomes the edge of the next one."""
    folder.mkdir(parents=True, exist_ok=True)
    n = edge.last_batch
    doc: dict[str, Any] = {
        "last_batch": n,
        "factor": edge.done.factor,
        "positions": f"positions-{n}.parquet",
        "checkpoints": checkpoints_to_tool_json(edge.done.checkpoints.values()),
        "kafka_edges": {t: {str(p): o for p, o in parts.items()} for t, parts in edge.kafka_edges.items()},
    }
    edge.positions.to_parquet(folder / doc["positions"], index=False)
    if edge.state is not None:
        rows = [
            (name, stores[name].key_bytes(k), stores[name].value_bytes(v))
            for name, values in edge.state.items()
            for k, v in values.items()
        ]
        doc["state"], doc["state_stores"] = f"state-{n}.parquet", sorted(edge.state)
        pd.DataFrame(rows, columns=STATE_COLUMNS).to_parquet(folder / doc["state"], index=False)
    if edge.kafka_positions is not None:
        doc["kafka_positions"] = f"kafka-positions-{n}.parquet"
        edge.kafka_positions.to_parquet(folder / doc["kafka_positions"], index=False)
    (folder / "validated.json.tmp").write_text(json.dumps(doc))
    (folder / "validated.json.tmp").replace(folder / "validated.json")  # the switch: both or neither
    kept = {doc[k] for k in ("positions", "state", "kafka_positions") if k in doc}
    for old in (f for t in _TABLES for f in folder.glob(f"{t}-*.parquet")):
        if old.name not in kept:
            old.unlink()
