"""What a librdkafka consumer costs while it waits at its partitions' end: the Fetch requests it sends per second,
its own CPU and the broker's, with the settings that should make it wait (why Quix Streams' CPU in
bench/cpu_bench.py's I/O-bound run is not its processing).

A Kafka broker holds an empty fetch for up to the request's max wait (librdkafka's `fetch.wait.max.ms`, 500 ms by
default) or until `fetch.min.bytes` arrive, so an idle consumer sends about two fetches a second per broker. A
broker that answers an empty fetch at once makes the consumer fetch again at once, in a loop. Each setting below
runs one consumer (confluent-kafka, of this venv) that reads a 4-partition topic of 100 records to its end, then
polls for --idle-s seconds; librdkafka's statistics count its Fetch requests.

usage: python bench/fetch_wait_bench.py [--idle-s 6]
Uses KAFKA_BOOTSTRAP_SERVERS (the broker's CPU is then not measured), or starts an embedded broker of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

import confluent_kafka
import psutil
from confluent_kafka import Consumer

from elasticity.apps.demo_feed import demo_records
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from elasticity.local.broker import EmbeddedBroker, free_port

RECORDS = 100
SETTINGS: list[tuple[str, dict[str, object]]] = [
    ("librdkafka's defaults (fetch.wait.max.ms=500)", {}),
    ("fetch.queue.backoff.ms=100 (bench/quix_peer.py)", {"fetch.queue.backoff.ms": 100}),
    ("fetch.wait.max.ms=5000", {"fetch.wait.max.ms": 5000}),
]


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def idle_consumer(bootstrap: str, topic: str, extra: dict[str, object], idle_s: float, broker: psutil.Process | None) -> str:
    stats: list[dict] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fetch-wait-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 1000,
            "stats_cb": lambda s: stats.append(json.loads(s)),
            **extra,
        }
    )
    try:
        consumer.subscribe([topic])
        read, deadline = 0, time.monotonic() + 60
        while read < RECORDS and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            read += m is not None and not m.error()
        if read < RECORDS:
            raise RuntimeError(f"read {read} of {RECORDS} records in 60 s")
        stats.clear()
        broker_cpu = sum(broker.cpu_times()[:2]) if broker else 0.0
        cpu, start = cpu_s(), time.monotonic()
        while time.monotonic() - start < idle_s:
            consumer.poll(0.1)
        wall = time.monotonic() - start
        mine = (cpu_s() - cpu) / wall
        theirs = f"{(sum(broker.cpu_times()[:2]) - broker_cpu) / wall:.2f} core" if broker else "not measured"
    finally:
        consumer.close()
    fetches = [sum(b["req"].get("Fetch", 0) for b in s["brokers"].values()) for s in stats]
    per_s = (fetches[-1] - fetches[0]) / (len(fetches) - 1) if len(fetches) > 1 else float("nan")
    return f"{per_s:>9,.0f}/s | {mine:.2f} core      | {theirs}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--idle-s", type=float, default=6.0, help="seconds each consumer waits at its partitions' end")
    args = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="elasticity-fetch-wait-bench-"))
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    embedded = None if bootstrap else EmbeddedBroker(home)
    broker = None
    if embedded:
        state = embedded.start(port=free_port())
        bootstrap, broker = state.bootstrap, psutil.Process(state.pid)
    assert bootstrap
    try:
        topic = f"fetch-wait-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 4)
        send(bootstrap, topic, demo_records(RECORDS, keys=30, seed=2, null_key_every=0, hot_key_share=0))
        kind = "the embedded broker (noida-db)" if embedded else bootstrap
        print(f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), {kind}")
        print(f"one consumer at the end of 4 partitions, idle {args.idle_s:g} s per setting\n")
        width = max(len(name) for name, _ in SETTINGS)
        print(f"{'consumer setting'.ljust(width)} | fetches     | consumer's CPU | broker's CPU")
        for name, extra in SETTINGS:
            print(f"{name.ljust(width)} | {idle_consumer(bootstrap, topic, extra, args.idle_s, broker)}", flush=True)
    finally:
        if embedded:
            embedded.stop()
    return 0


if __name__ == "__main__":
    import results

    sys.exit(results.run("fetch_wait_bench", main))
