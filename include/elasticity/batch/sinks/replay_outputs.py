"""`--outputs replace`: the older versions' Parquet rows of a replayed range removed, so that readers see the
replay's rows in their place.

Run by the replay under the job's lease, once its generation is written and before any batch of it runs: every
live file of each `parquet.<name>` output holding a row of an older generation whose input record the replay
processes again (its source partition at or past the replay's start there) is rewritten without those rows,
each file atomically (`outputs.write_atomically`), under its own name. Rows without provenance (no source
partition) stay. Kafka outputs are logs: their records stay, and the replay's follow them.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA, list_root, open_root, output_roots, read_files, write_atomically
from elasticity.checkpoint.replay import Replay
from elasticity.checkpoint.store import Generation

log = logging.getLogger(__name__)


def replayed_mask(table: pa.Table, replay: Replay, generation: int) -> pa.ChunkedArray | pa.Array:
    """The rows of `table` (OUTPUT_SCHEMA) that `replay`, at `generation`, writes again: an older generation's
    (or a row of before the generation column) from an input record at or past the replay's start."""
    older = pc.fill_null(pc.less(table["generation"], generation), True)
    replayed = pa.array([False] * table.num_rows)
    for ssp, start in replay.starts.items():
        same = pc.and_(
            pc.and_(pc.equal(table["source_partition"], ssp.partition), pc.greater_equal(table["source_offset"], start)),
            pc.fill_null(pc.equal(table["source_stream"], ssp.stream), True),  # null: a file of before the column
        )
        same = pc.and_(same, pc.fill_null(pc.equal(table["source_system"], ssp.system), True))
        replayed = pc.or_(replayed, pc.fill_null(same, False))
    return pc.and_(older, replayed)


def remove_replayed(output_dir: str, new: Generation, replay: Replay) -> int:
    """Rewrite the outputs' files without the older versions' rows of the replayed range; how many rows went. An
    earlier version's Hive folder (`batch_id=<n>/`, no batch_id column in its files) is left as it is, logged."""
    removed = 0
    for root in output_roots(output_dir):
        fs, _ = open_root(root)
        for f in list_root(root).live:
            if f.kind == "legacy":
                log.warning("%s: a file of an earlier version's layout, not rewritten; compact the output first", f.path)
                continue
            table = read_files(root, [f], OUTPUT_SCHEMA)
            mask = replayed_mask(table, replay, new.number)
            gone = pc.sum(pc.cast(mask, pa.int64())).as_py() or 0
            if not gone:
                continue
            kept = table.filter(pc.invert(mask))
            write_atomically(fs, f.path, lambda where, kept=kept, fs=fs: pq.write_table(kept, where, filesystem=fs))
            removed += gone
            log.info("%s: %d rows of the replayed range removed (replaced by generation %d's)", f.path, gone, new.number)
    return removed
