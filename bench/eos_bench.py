"""Exactly-once Kafka outputs against at-least-once: the same job copying a topic to another, drained in
batches of --batch records, measured side by side in one run (rounds alternate the two), printed as ratios.

What exactly-once adds per commit: the slots write the outputs to staging files instead of producing them,
and the commit reads them back and produces them in one transaction with the commit record.

usage: python bench/eos_bench.py [--records 12000] [--batch 3000] [--rounds 3]
Uses KAFKA_BOOTSTRAP_SERVERS, or starts an embedded broker of its own; a classic local[2] session.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.config import validate  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker, free_port  # noqa: E402


def drain(spark, topic: str, tmp: str, guarantee: str, batch: int) -> tuple[float, list[float], int]:
    """A fresh job of the topic at `guarantee`, drained: seconds, each batch's total ms, records processed."""
    from elasticity.spark.engine import MicroBatchEngine

    name = f"eos-{guarantee}-{uuid.uuid4().hex[:6]}"
    config = validate(
        {
            "job.name": name,
            "task.inputs": f"kafka.{topic}",
            "job.elasticity.factor": "4",
            "systems.kafka.default.stream.samza.offset.default": "oldest",
            "app.class": "elasticity.apps.identity:build_kafka",
            "processing.guarantee": guarantee,
            "task.checkpoint.store.url": f"sqlite:///{tmp}/{name}.db",
            "job.output.path": f"{tmp}/{name}/out",
            "job.audit.path": f"{tmp}/{name}/audit",
            "job.dead.letter.path": f"{tmp}/{name}/dlq",
        }
    )
    start = time.perf_counter()
    summaries = MicroBatchEngine(config, spark).run(max_records=batch, until_caught_up=True)
    elapsed = time.perf_counter() - start
    batches = [s for s in summaries if s.batch_id is not None]
    return elapsed, [s.durations_ms["total"] for s in batches], sum(s.processed for s in batches)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--records", type=int, default=12_000)
    p.add_argument("--batch", type=int, default=3_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()

    from pyspark.sql import SparkSession

    tmp = tempfile.mkdtemp(prefix="elasticity-eos-bench-")
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = EmbeddedBroker(Path(tmp))
        bootstrap = broker.start(port=free_port()).bootstrap
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    spark = SparkSession.builder.master("local[2]").appName("eos-bench").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        topic = f"copy-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 4)
        send(bootstrap, topic, demo_records(args.records, keys=3000, null_key_every=0, hot_key_share=0))
        drain(spark, topic, tmp, "at_least_once", args.records)  # warm the session and the Python workers
        results: dict[str, list[tuple[float, list[float], int]]] = {"at_least_once": [], "exactly_once": []}
        for r in range(args.rounds):
            for guarantee in ("exactly_once", "at_least_once") if r % 2 else ("at_least_once", "exactly_once"):
                results[guarantee].append(drain(spark, topic, tmp, guarantee, args.batch))
        rate, per_batch = {}, {}
        for guarantee, runs in results.items():
            assert all(n == args.records for _, _, n in runs), runs
            rate[guarantee] = statistics.median(args.records / s for s, _, _ in runs)
            per_batch[guarantee] = statistics.median(ms for _, batches, _ in runs for ms in batches)
        print(
            f"{args.records:,} records in batches of {args.batch:,}, factor 4, 4 partitions, local[2]; median of {args.rounds} rounds"
        )
        for g in results:
            print(f"  {g:14s} {rate[g]:8,.0f} records/s   {per_batch[g]:7,.0f} ms per batch")
        print(
            f"  exactly-once / at-least-once: {rate['exactly_once'] / rate['at_least_once']:.2f}x the records/s, "
            f"{per_batch['exactly_once'] / per_batch['at_least_once']:.2f}x the time per batch (target: at most 15 % slower)"
        )
    finally:
        spark.stop()
        if broker:
            broker.stop()


if __name__ == "__main__":
    import results

    sys.exit(results.run("eos_bench", main))
