"""Formats benchmark: the same records through the same stateful job (elasticity.apps.totals: running totals per
user to a typed Parquet output and a Kafka topic) with JSON throughout, and with an Avro input topic and an Avro
Kafka output in Confluent's wire format (confluent-kafka's serdes, its in-memory registry), measured side by side
in one run: the two jobs' runs alternate on one warm Spark Connect server, and the ratio of their median
records/s is the figure (the target: Avro within 1.3x of JSON).

Each job first runs a warm-up backlog (its Python workers, the server's JIT), then `--rounds` rounds of
`--records` more records each, JSON then Avro, each run until caught up (batch.max.records=3000, factor 2, 2
containers, the typed Parquet output on both sides, Kafka outputs exactly once).

usage: .venv/bin/python bench/formats_bench.py [--records 12000] [--rounds 5] [--warm 6000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.config import validate  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402
from elasticity.serializers import serialize  # noqa: E402

PARTITIONS = 4
USERS = 3000
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "demo",
    "fields": [
        {"name": "key", "type": ["null", "string"]},
        {"name": "seq", "type": "long"},
        {"name": "amount", "type": "double"},
    ],
}
TOTAL = {
    "type": "record",
    "name": "UserTotal",
    "namespace": "demo",
    "fields": [
        *ORDER["fields"],
        {"name": "user", "type": "string"},
        {"name": "total", "type": "double"},
        {"name": "count", "type": "long"},
    ],
}
DDL = "user STRING NOT NULL, amount DOUBLE, total DOUBLE, count BIGINT"  # seq: a column every output has


def job(home: Path, topic: str, fmt: str):
    name = f"formats-{fmt}-{uuid.uuid4().hex[:6]}"
    props = {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "2",
        "job.container.thread.pool.size": "64",
        "app.class": "elasticity.apps.totals:build",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "batch.max.records": "3000",
        "task.checkpoint.store.url": f"sqlite:///{home}/{name}.db",
        "job.output.path": f"{home}/{name}/out",
        "job.audit.path": f"{home}/{name}/audit",
        "job.dead.letter.path": f"{home}/{name}/dlq",
        "job.state.dir": f"{home}/{name}/state",
        "blob.store.uri": f"{home}/{name}/blobs",
        "stores.totals.backup.factories": "blobstore",
        "task.checkpoint.read.versions": "2,1",
        "outputs.totals.schema": DDL,
    }
    if fmt == "avro":
        registry = f"mock://{name}"
        for serde, schema in (("orders", ORDER), ("totals", TOTAL)):
            props |= {
                f"serializers.registry.{serde}.class": "avro",
                f"serializers.registry.{serde}.schema.registry.url": registry,
                f"serializers.registry.{serde}.schema": json.dumps(schema),
            }
        props |= {"systems.kafka.samza.msg.serde": "orders", f"streams.{topic}-totals.samza.msg.serde": "totals"}
    return validate(props)


def records(fmt: str, config, topic: str, count: int, seed: int) -> list[tuple[bytes | None, bytes]]:
    """The demo's orders (no null keys), as JSON, or re-encoded as Avro records of the job's registry."""
    out = list(demo_records(count, keys=USERS, seed=seed, null_key_every=0, hot_key_share=0))
    if fmt == "json":
        return out
    serde = config.serde("kafka", "msg")
    encoded = [(k, serialize(serde, json.loads(v), topic)) for k, v in out]
    return [(k, v) for k, v in encoded if v is not None]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=12_000, help="records of each measured run")
    p.add_argument("--rounds", type=int, default=5, help="measured runs of each format, alternating")
    p.add_argument("--warm", type=int, default=6_000, help="records of each job's warm-up backlog")
    args = p.parse_args()

    from elasticity.spark.engine import MicroBatchEngine
    from elasticity.spark.session import session
    from elasticity.spark.target import SparkTarget

    with tempfile.TemporaryDirectory(prefix="formats-bench-") as tmp:
        home = Path(tmp)
        broker = EmbeddedBroker(home / "broker")
        bootstrap = broker.start(port=free_port()).bootstrap
        server = SparkConnectServer(home / "spark")
        remote = server.start(port=free_port(), master="local[2]").remote
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
        try:
            jobs = {}
            for fmt in ("json", "avro"):
                topic = f"orders-{fmt}-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, topic, PARTITIONS)
                config = job(home, topic, fmt)
                engine = MicroBatchEngine(config, session(config, target=SparkTarget("connect", remote, "bench")))
                send(bootstrap, topic, records(fmt, config, topic, args.warm, seed=1))
                engine.run(until_caught_up=True)
                jobs[fmt] = (topic, config, engine)
            rates: dict[str, list[float]] = {"json": [], "avro": []}
            for r in range(args.rounds):
                for fmt in ("json", "avro"):
                    topic, config, engine = jobs[fmt]
                    send(bootstrap, topic, records(fmt, config, topic, args.records, seed=2 + r))
                    start = time.perf_counter()
                    summaries = engine.run(until_caught_up=True)
                    wall = time.perf_counter() - start
                    done = sum(s.processed for s in summaries)
                    assert done == args.records, f"{fmt}: processed {done} of {args.records}"
                    rates[fmt].append(done / wall)
                    keys = ("plan", "read", "process", "commit", "total")
                    ms = {k: round(sum(x.durations_ms.get(k, 0) for x in summaries) / len(summaries)) for k in keys}
                    print(
                        f"round {r + 1} {fmt:4}: {done:,} records in {len(summaries)} batches, {wall:.2f} s, "
                        f"{done / wall:,.0f} rec/s; ms per batch {json.dumps(ms)}",
                        flush=True,
                    )
            for fmt in ("json", "avro"):
                engine = jobs[fmt][2]
                engine.spark.client.close()
        finally:
            server.stop()
            broker.stop()
    json_rate, avro_rate = statistics.median(rates["json"]), statistics.median(rates["avro"])
    print()
    print("measure                                   | figure")
    print(f"JSON throughout, median of {args.rounds}               | {json_rate:,.0f} rec/s")
    print(f"Avro in and out (Confluent wire format)   | {avro_rate:,.0f} rec/s")
    print(f"time ratio Avro / JSON (target <= 1.30)   | {json_rate / avro_rate:.2f}x")
    pairs = [j / a for j, a in zip(rates["json"], rates["avro"], strict=True)]
    print(f"the ratio round by round                  | {', '.join(f'{p:.2f}' for p in pairs)}")
    return 0


if __name__ == "__main__":
    import results

    sys.exit(results.run("formats_bench", main))
