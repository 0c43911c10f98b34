"""Engine benchmark: every figure is measured side by side in one run and printed
as a ratio, because absolute times drift on a shared machine.

  1. elastic speed-up: 4 partitions, 5 ms simulated I/O per record, factor 1/2/4/8,
     with `job.container.process.count` Python processes per container (--processes)
  2. read cost against the factor (the Spark job outside the process stage: read, route,
     scheduling, at F over F=1), and F=8 with two processes per container against one
  3. read path against a plain kafka-python consumer of the same ranges
  4. flat_map_async against flat_map, 20 ms simulated calls, concurrency 32
  5. fixed cost of an empty batch and of a 100k-record batch

usage: python bench/engine_bench.py [--records 16000] [--big 100000]
Uses KAFKA_BOOTSTRAP_SERVERS, or starts an embedded broker of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("DEMO_LOOKUP_MS", "5")

from elasticity.api import ApplicationDescriptor, Message  # noqa: E402
from elasticity.api.executor import SliceExecutor  # noqa: E402
from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.config import validate  # noqa: E402
from elasticity.jobmodel.model import SystemStreamPartition  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker, free_port  # noqa: E402


def job(topic: str, tmp: str, factor: int, **extra: str):
    name = f"bench-{uuid.uuid4().hex[:6]}"
    return validate(
        {
            "job.name": name,
            "task.inputs": f"kafka.{topic}",
            "job.elasticity.factor": str(factor),
            "job.container.count": "2",
            "job.container.thread.pool.size": "64",
            "job.container.process.count": str(PROCESSES),
            "systems.kafka.default.stream.samza.offset.default": "oldest",
            "task.checkpoint.store.url": f"sqlite:///{tmp}/{name}.db",
            "job.output.path": f"{tmp}/{name}/out",
            "job.audit.path": f"{tmp}/{name}/audit",
            "job.dead.letter.path": f"{tmp}/{name}/dlq",
            "task.checkpoint.write.versions": "2",
            "task.checkpoint.read.versions": "2",
            **extra,
        }
    )


PROCESSES = 1


def outside_process_ms(summary) -> float:
    """Read, route and Spark's scheduling: the Spark job's time outside the process stage."""
    return summary.durations_ms["spark"] - summary.durations_ms["process"]


def slowest_task(summary) -> int:
    """Records of the busiest virtual task: per-key order makes a batch last at least as long as its slice, so
    the speed-up a factor can give is bounded by how evenly the keys fall into buckets, not by the factor alone."""
    return max(summary.metrics["records"].values())


def run_batch(spark, config, max_records=10**7):
    from elasticity.spark.engine import MicroBatchEngine

    start = time.perf_counter()
    (summary,) = MicroBatchEngine(config, spark).run(max_records=max_records)
    return summary, time.perf_counter() - start


def plain_consumer_rate(bootstrap: str, topic: str, partitions: int) -> tuple[int, float]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = c.end_offsets(tps)
    c.assign(tps)
    c.seek_to_beginning()
    start, n, done = time.perf_counter(), 0, set()
    while len(done) < len(tps):
        for tp, recs in c.poll(timeout_ms=500, max_records=5000).items():
            n += len(recs)
            if recs and recs[-1].offset + 1 >= ends[tp]:
                done.add(tp)
    elapsed = time.perf_counter() - start
    c.close()
    return n, elapsed


def async_vs_sync(records: int, call_ms: float, concurrency: int) -> tuple[float, float]:
    msgs = [
        Message(key=f"k{i}", value=i, ssp=SystemStreamPartition("kafka", "t", 0), offset=i, timestamp=0) for i in range(records)
    ]

    def sync_call(m):
        time.sleep(call_ms / 1000)
        return [m.value]

    async def async_call(m):
        await asyncio.sleep(call_ms / 1000)
        return [m.value]

    times = []
    for op, conc in (("flat_map", 1), ("flat_map_async", concurrency)):
        app = ApplicationDescriptor()
        stream = app.input("kafka.t")
        getattr(stream, op)(sync_call if op == "flat_map" else async_call).send_to("parquet.out")
        start = time.perf_counter()
        result = SliceExecutor(app=app, max_concurrency=conc).run(msgs)
        times.append(time.perf_counter() - start)
        assert [v for _, _, v in result.outputs[app.output("parquet.out")]] == list(range(records))
    return times[0], times[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument(
        "--records", type=int, default=16000, help="records of the speed-up run (5 ms each at factor 1 = 4 in parallel)"
    )
    p.add_argument("--big", type=int, default=100_000, help="records of the read-path and fixed-cost runs")
    p.add_argument("--processes", type=int, default=1, help="job.container.process.count of the speed-up runs")
    args = p.parse_args()
    global PROCESSES
    PROCESSES = args.processes

    from pyspark.sql import SparkSession

    tmp = tempfile.mkdtemp(prefix="elasticity-bench-")
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = EmbeddedBroker(Path(tmp))
        bootstrap = broker.start(port=free_port()).bootstrap
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    spark = SparkSession.builder.master("local[2]").appName("elasticity-bench").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rows: list[tuple[str, str, str]] = []
    try:
        slow = f"slow-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, slow, 4)
        send(bootstrap, slow, demo_records(args.records, keys=4000, null_key_every=0, hot_key_share=0))
        run_batch(spark, job(slow, tmp, 1))  # warm up the session and the Python workers

        base = None
        base_slowest = 0
        reads = {}
        for factor in (1, 2, 4, 8):
            summary, _ = run_batch(spark, job(slow, tmp, factor, **{"app.class": "elasticity.apps.enrichment:build"}))
            assert summary.processed == args.records, summary
            process_s = summary.durations_ms["process"] / 1000
            batch_s = summary.durations_ms["total"] / 1000
            reads[factor] = outside_process_ms(summary)
            rate, batch_rate = args.records / process_s, args.records / batch_s
            base = base or (rate, batch_rate)
            base_slowest = base_slowest or slowest_task(summary)
            rows.append(
                (
                    f"speed-up F={factor} ({4 * factor} vtasks, {PROCESSES} proc/container)",
                    f"{rate:,.0f} rec/s process, {batch_rate:,.0f} rec/s batch",
                    f"{rate / base[0]:.2f}x / {batch_rate / base[1]:.2f}x (slowest-task limit "
                    f"{base_slowest / slowest_task(summary):.2f}x; goal >= {0.8 * factor:.1f}x process, {0.75 * factor:.1f}x batch)",
                )
            )
        rows.append(
            (
                "Spark job outside the process stage, F=8 over F=1",
                f"{reads[8]:.0f} ms vs {reads[1]:.0f} ms",
                f"{reads[8] / reads[1]:.2f} (goal <= 1.2)",
            )
        )
        other = 1 if PROCESSES > 1 else 2
        two = job(slow, tmp, 8, **{"app.class": "elasticity.apps.enrichment:build", "job.container.process.count": str(other)})
        other_summary, _ = run_batch(spark, two)
        other_rate = args.records / (other_summary.durations_ms["total"] / 1000)
        rows.append(
            (
                f"F=8 batch: {PROCESSES} vs {other} proc/container",
                f"{batch_rate:,.0f} vs {other_rate:,.0f} rec/s",
                f"{batch_rate / other_rate:.2f}x (a slot is a Spark task: {2 * max(PROCESSES, other)} slots on local[2] run in two waves)",
            )
        )

        hot = f"hot-{uuid.uuid4().hex[:6]}"  # the same load with one key carrying 10% of it
        create_topic(bootstrap, hot, 4)
        send(bootstrap, hot, demo_records(args.records, keys=4000, null_key_every=0, hot_key_share=0.1))
        hot_rates, hot_slowest = {}, {}
        for factor in (1, 8):
            summary, _ = run_batch(spark, job(hot, tmp, factor, **{"app.class": "elasticity.apps.enrichment:build"}))
            hot_rates[factor] = args.records / (summary.durations_ms["process"] / 1000)
            hot_slowest[factor] = slowest_task(summary)
        rows.append(
            (
                "speed-up F=8 with a 10% hot key",
                f"{hot_rates[8]:,.0f} vs {hot_rates[1]:,.0f} rec/s",
                f"{hot_rates[8] / hot_rates[1]:.2f}x (slowest-task limit {hot_slowest[1] / hot_slowest[8]:.2f}x: "
                "one key stays in one task, for order)",
            )
        )

        big = f"big-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, big, 4)
        t = time.perf_counter()
        send(bootstrap, big, demo_records(args.big, keys=5000))
        feed_s = time.perf_counter() - t
        n, plain_s = plain_consumer_rate(bootstrap, big, 4)
        config = job(big, tmp, 4)
        summary, total_s = run_batch(spark, config)
        read_route_s = outside_process_ms(summary) / 1000
        rows.append(
            (
                "read+route vs plain kafka-python consumer",
                f"{args.big / read_route_s:,.0f} vs {n / plain_s:,.0f} rec/s",
                f"{(args.big / read_route_s) / (n / plain_s):.2f}",
            )
        )
        rows.append(
            (
                f"batch of {args.big:,} records (identity app)",
                f"{total_s * 1000:,.0f} ms",
                "phases: " + ", ".join(f"{k} {v:,.0f}" for k, v in summary.durations_ms.items() if k != "total"),
            )
        )
        _, empty_s = run_batch(spark, config)
        rows.append(("empty batch (nothing to read)", f"{empty_s * 1000:,.0f} ms", f"{empty_s / total_s:.3f} of the 100k batch"))
        rows.append(("producer feed (kafka-python, for scale)", f"{args.big / feed_s:,.0f} rec/s", ""))

        sync_s, async_s = async_vs_sync(200, 20, 32)
        rows.append(
            (
                "flat_map_async vs flat_map, 20 ms calls, conc 32",
                f"{async_s * 1000:,.0f} ms vs {sync_s * 1000:,.0f} ms",
                f"{sync_s / async_s:.1f}x (goal >= 20x)",
            )
        )
    finally:
        spark.stop()
        if broker:
            broker.stop()

    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':{width}s} | {'figures':45s} | ratio")
    print(f"{'-' * width}-|-{'-' * 45}-|------")
    for name, fig, ratio in rows:
        print(f"{name:{width}s} | {fig:45s} | {ratio}")


if __name__ == "__main__":
    import results

    sys.exit(results.run("engine_bench", main))
