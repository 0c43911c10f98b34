"""A batch's files carry their attempt's lease epoch: of a batch's files in a root only the highest epoch's are
read, a cleanup never deletes a later attempt's, and compaction drops a superseded attempt's late files."""

from __future__ import annotations

import pyarrow as pa

from elasticity.batch.sinks.compaction import compact_root
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, delete_batches, in_file, list_root, read_table, write_batch_file


def rows(batch: int, n: int, tag: str) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "system": "kafka",
                "stream": tag,
                "partition": 0,
                "offset": i,
                "key": b"k",
                "task_name": "t",
                "seq": i,
                "status": "processed",
            }
            for i in range(n)
        ],
        schema=in_file(AUDIT_SCHEMA),
    )


def test_only_the_highest_epoch_of_a_batch_is_read_and_a_late_superseded_file_is_not(tmp_path):
    root = str(tmp_path / "audit")
    write_batch_file(root, 1, "slot-0", rows(1, 2, "one"), epoch=3)
    write_batch_file(root, 2, "slot-0", rows(2, 3, "old"), epoch=3)  # attempt 3, superseded before its commit
    write_batch_file(root, 2, "slot-0", rows(2, 1, "new"), epoch=4)
    write_batch_file(root, 2, "slot-1", rows(2, 1, "late"), epoch=3)  # attempt 3, resumed, writes on
    listing = list_root(root)
    assert sorted(f.path.rsplit("/", 1)[1] for f in listing.superseded) == [
        "batch-000000000002-e3-slot-0.parquet",
        "batch-000000000002-e3-slot-1.parquet",
    ]
    assert sorted(read_table(root, AUDIT_SCHEMA).column("stream").to_pylist()) == ["new", "one", "one"]
    write_batch_file(root, 2, "extra", rows(2, 1, "tool"))  # a name without an epoch: always read
    assert "tool" in read_table(root, AUDIT_SCHEMA, [2]).column("stream").to_pylist()


def test_a_cleanup_leaves_a_later_attempts_files_alone(tmp_path):
    root = str(tmp_path / "audit")
    for epoch in (2, 3, 5):
        write_batch_file(root, 7, "slot-0", rows(7, 1, f"e{epoch}"), epoch=epoch)
    delete_batches(root, [7], through_epoch=3)
    assert [f.epoch for f in list_root(root).files] == [5]


def test_compaction_drops_what_a_superseded_attempt_wrote(tmp_path):
    root = str(tmp_path / "audit")
    write_batch_file(root, 1, "slot-0", rows(1, 2, "winner"), epoch=2)
    write_batch_file(root, 1, "slot-0", rows(1, 5, "loser"), epoch=1)
    compact_root(root, AUDIT_SCHEMA, sink="audit", through_batch=1, now_ms=0, target_bytes=1 << 20, retention_ms=None)
    listing = list_root(root)
    assert [f.kind for f in listing.files] == ["compacted"]
    assert read_table(root, AUDIT_SCHEMA).column("stream").to_pylist() == ["winner", "winner"]
