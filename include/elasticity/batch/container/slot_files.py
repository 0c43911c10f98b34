"""A process slot's files of a batch: each sink's rows of its virtual tasks, the audit and the dead letters, one
file per (batch, slot). Nothing here imports Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from elasticity.api.stream import ApplicationDescriptor
from elasticity.batch.container.process_context import ProcessContext
from elasticity.batch.container.unit_run import UnitRun, sink_roots
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, AuditStatus, in_file, write_batch_file


def write_slot_files(
    ctx: ProcessContext, app: ApplicationDescriptor, slot: int, table: pa.Table, *, units: list[UnitRun]
) -> None:
    """Each sink's rows of the slot's virtual tasks, in task order, as one file per (batch, attempt, slot): its
    name carries the attempt's lease epoch, so a superseded attempt's files never replace, nor join, its
    successor's (`outputs.list_root` reads a batch's highest epoch). Every Parquet output and the audit get their
    file, empty or not; dead letters too under an epoch (a superseded attempt's late dead letters are then never
    the batch's), only when there are some without."""
    name, epoch = f"slot-{slot}", ctx.epoch
    for root in (r for r in sink_roots(ctx, app).values() if r is not None):
        pieces = sorted((p for u in units for p in u.outputs.get(root, ())), key=lambda p: p[0])
        rows = [r for _, rs in pieces for r in rs]
        columns: list[Any] = list(zip(*rows, strict=True)) if rows else [()] * (len(in_file(OUTPUT_SCHEMA)) - 1)
        columns.append([ctx.generation] * len(rows))  # the last column, which the tasks' rows leave out
        write_batch_file(root, ctx.batch_id, name, _table(columns, in_file(OUTPUT_SCHEMA)), epoch=epoch)
    ranges = sorted(r for u in units for r in u.kept)
    failed = set().union(*(u.failed for u in units))
    if sum(b - a for a, b in ranges) == table.num_rows:
        kept = table
    else:
        kept = table.take(pa.array([g for a, b in ranges for g in range(a, b)], pa.int64()))
    seq = [i for a, b in ranges for i in range(b - a)]
    status = [AuditStatus.DEAD_LETTER if g in failed else AuditStatus.PROCESSED for a, b in ranges for g in range(a, b)]
    audit = _table(
        [*(kept.column(n) for n in ("system", "stream", "partition", "offset", "key", "task_name")), seq, status],
        in_file(AUDIT_SCHEMA),
    )
    write_batch_file(ctx.audit_path, ctx.batch_id, name, audit, epoch=epoch)
    dead = [d for _, d in sorted((d for u in units for d in u.dead), key=lambda d: d[0])]
    if dead or epoch is not None:
        dead_table = pa.Table.from_pylist(dead, schema=DEAD_LETTER_SCHEMA)
        write_batch_file(ctx.dead_letter_path, ctx.batch_id, name, dead_table, epoch=epoch)


def _table(columns: list[Any], schema: pa.Schema) -> pa.Table:
    """Columns, Arrow or plain values, as a table of `schema`."""
    arrays = [
        c if isinstance(c, pa.ChunkedArray | pa.Array) else pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
