"""Where incremental data quality stands for a job: the last validated batch, what
its checkpoints had passed, and each key's last validated record. Kept in the
report folder (`validated.json` naming its `positions-<batch>.parquet`, replaced
atomically), so a run reads only the
batches committed since and its cost depends on them, not on the job's age."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from elasticity.checkpoint.tool import checkpoints_from_tool_json, checkpoints_to_tool_json
from elasticity.quality.checks import Done

POSITION_COLUMNS = ["system", "stream", "partition", "key", "offset", "task_name", "generation"]


@dataclass(frozen=True)
class Cursor:
    last_batch: int
    done: Done
    positions: pd.DataFrame


def validated_batch(folder: Path) -> int:
    """The last batch an incremental data-quality run passed (0: none yet): what retention may expire up to."""
    try:
        return int(json.loads((folder / "validated.json").read_text())["last_batch"])
    except (OSError, ValueError, KeyError):
        return 0


def load(folder: Path) -> Cursor | None:
    try:
        doc = json.loads((folder / "validated.json").read_text())
    except (OSError, ValueError):
        return None
    cps = {cp.task_name: cp for cp in checkpoints_from_tool_json(doc["checkpoints"])}
    positions = pd.read_parquet(folder / doc["positions"])
    return Cursor(int(doc["last_batch"]), Done(int(doc["factor"]), cps), positions)


def advance(
    folder: Path, previous: Cursor | None, last_batch: int, done: Done, audit: pd.DataFrame, generation_of_batch: dict[int, int]
) -> None:
    """After a passing run: the window's end becomes the edge of the next one."""
    keyed = audit[audit["key"].notna()].assign(generation=audit["batch_id"].map(generation_of_batch))
    latest = (
        keyed.sort_values(["batch_id", "seq"])
        .groupby(["system", "stream", "partition", "key"], sort=False)
        .tail(1)[POSITION_COLUMNS]
    )
    merged = (
        pd.concat([previous.positions, latest], ignore_index=True) if previous is not None and len(previous.positions) else latest
    )
    merged = merged.drop_duplicates(["system", "stream", "partition", "key"], keep="last")
    folder.mkdir(parents=True, exist_ok=True)
    name = f"positions-{last_batch}.parquet"
    merged.to_parquet(folder / name, index=False)
    doc = {
        "last_batch": last_batch,
        "factor": done.factor,
        "positions": name,
        "checkpoints": checkpoints_to_tool_json(done.checkpoints.values()),
    }
    (folder / "validated.json.tmp").write_text(json.dumps(doc))
    (folder / "validated.json.tmp").replace(folder / "validated.json")  # the switch: both or neither
    for old in folder.glob("positions-*.parquet"):
        if old.name != name:
            old.unlink()
