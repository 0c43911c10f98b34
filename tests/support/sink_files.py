"""Sink files as the process stage writes them, and as earlier versions did (`batch_id=<n>/` folders), with
rows that tell every batch, attempt and slot apart: for tests of what reads, compacts and expires them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from elasticity.batch.sinks.outputs import DEAD_LETTER_SCHEMA, in_file, write_batch_file


def rows(schema: pa.Schema, *, batch: int, attempt: int, slot: int, n: int) -> list[dict[str, Any]]:
    """n rows of a sink, each telling its batch, attempt, slot and place apart from every other written."""
    tag = f"{batch}.{attempt}.{slot}"
    out = []
    for i in range(n):
        row: dict[str, Any] = {}
        for f in in_file(schema):
            if f.type == pa.string():
                row[f.name] = f"{f.name}-{tag}.{i}"
            elif f.type == pa.binary():
                row[f.name] = f"{tag}.{i}".encode()
            else:
                row[f.name] = (batch * 100 + attempt) * 1000 + slot * 100 + i
        out.append(row)
    return out


def write(root: Path, schema: pa.Schema, batch: int, *, slots: list[int], attempt: int = 0) -> list[dict[str, Any]]:
    """A batch's files as the process stage writes them (dead letters with `batch_id`, the others without);
    the rows as a reader must see them."""
    expected = []
    for slot, n in enumerate(slots):
        part = rows(schema, batch=batch, attempt=attempt, slot=slot, n=n)
        if schema is DEAD_LETTER_SCHEMA:
            table = pa.Table.from_pylist([{**r, "batch_id": -1} for r in part], schema=schema)
        else:
            table = pa.Table.from_pylist(part, schema=in_file(schema))
        write_batch_file(str(root), batch, f"slot-{slot}", table)
        expected += [{**r, "batch_id": batch} for r in part]
    return expected


def write_legacy(root: Path, schema: pa.Schema, batch: int, slots: list[int]) -> list[dict[str, Any]]:
    """A batch as an earlier version wrote it: `batch_id=<n>/slot-<i>.parquet`, the batch in the folder only."""
    folder = root / f"batch_id={batch}"
    folder.mkdir(parents=True, exist_ok=True)
    expected = []
    for slot, n in enumerate(slots):
        part = rows(schema, batch=batch, attempt=0, slot=slot, n=n)
        pq.write_table(pa.Table.from_pylist(part, schema=in_file(schema)), folder / f"slot-{slot}.parquet")
        expected += [{**r, "batch_id": batch} for r in part]
    return expected


def canonical(table_rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(sorted(r.items())) for r in table_rows)
