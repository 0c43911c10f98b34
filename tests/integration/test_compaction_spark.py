"""Compacted sinks read by Spark: a root holding an earlier version's `batch_id=<n>/` folders and batch files,
once compacted, is one dataset to `spark.read.parquet(root)`, with the rows the library's reader sees."""

from __future__ import annotations

from elasticity.batch.sinks.compaction import compact_sinks
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, list_root, read_table
from elasticity.config import validate
from tests.support.sink_files import canonical, write, write_legacy

SINKS = {"out/doubled": OUTPUT_SCHEMA, "audit": AUDIT_SCHEMA, "dlq": DEAD_LETTER_SCHEMA}


def test_spark_reads_a_compacted_root_as_the_library_does(spark, tmp_path):
    for sink, schema in SINKS.items():
        for b in (1, 2):
            write_legacy(tmp_path / sink, schema, b, [2, 1])
        for b in range(3, 9):
            write(tmp_path / sink, schema, b, slots=[3, 2])
    props = {
        "job.name": "j",
        "task.inputs": "kafka.orders",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
        "job.output.compaction.target.bytes": "6000",
    }
    report = compact_sinks(validate(props), through_batch=8, now_ms=0)
    assert [s.batches_compacted for s in report.sinks] == [8, 8, 8]
    for sink, schema in SINKS.items():
        root = tmp_path / sink
        assert len(list_root(str(root)).live) > 1  # several compacted files, each of consecutive batches
        ours = canonical(read_table(str(root), schema).to_pylist())
        assert len(ours) == 2 * 3 + 6 * 5
        theirs = spark.read.parquet(str(root))
        assert theirs.schema.fieldNames() == schema.names
        assert canonical([r.asDict() for r in theirs.collect()]) == ours
