"""Run an app on a list of records, with no broker and no Spark: the test harness of
Kafka Streams' TopologyTestDriver and Flink's operator test harnesses, for this engine.

    run = TestRun("my_app:build", inputs=["kafka.orders"], factor=4)
    result = run.process([("user-1", {"amount": 5})], stream="kafka.orders", partitions=2)
    result.outputs["parquet.enriched"], result.stores["totals"], result.dead_letters

A `process` call is one micro-batch through the engine's own code: the job's
config validated by `elasticity.config.validate`, its job model built by the
groupers, each record partitioned by Kafka's murmur2 of its key bytes; the
batch planned (`planning.plan_ranges`), its virtual tasks placed on process
slots and their reads and state laid out (`process_context.slot_of`,
`slot_reads`, `batch_state`), each record routed to its virtual task by
`routing.route_records` (SEP-32's key bucket) as a slot reads it, decoded by the
job's serdes, run through `SliceExecutor` (`processing.process_slot`) under
`task.dead.letter.policy` and `task.max.concurrency`, with real RocksDB stores
restored from and snapshotted to local checkpoints, windows closed by the
watermark as between batches, and the checkpoints advanced as the driver
advances them (`outcome.new_checkpoints`). What the harness keeps itself: the
Kafka log (in memory), the checkpoints from batch to batch (committed at once),
and reading back what the sinks wrote. Kafka outputs are staged as files, as
under `processing.guarantee=exactly_once`, and read from there.
"""

from elasticity.testing.batch_result import DeadLetter, Emitted, Record, Result, TaskRun
from elasticity.testing.harness import TestRun

__all__ = ["DeadLetter", "Emitted", "Record", "Result", "TaskRun", "TestRun"]
