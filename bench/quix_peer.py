"""The stateful demo job on Quix Streams, the per-record Python stream library that bench/cpu_bench.py compares
the engine with: the same work per record (JSON decode, each user's running total and order count in a RocksDB
store with its changelog topic, the lookup, JSON encode, an output), one record at a time, in one process.

Run by bench/cpu_bench.py under .venv/quix/bin/python (`make bench-quix`); prints one JSON line: the records it
processed, and the wall and CPU seconds (this process, all its threads: librdkafka's too) from its first record
to its last output flushed, so start-up, the group join and the first fetch are left out (warm, as for the engine).

usage: .venv/quix/bin/python bench/quix_peer.py BOOTSTRAP TOPIC RECORDS LOOKUP_MS STATE_DIR
"""

from __future__ import annotations

import json
import resource
import sys
import time
import uuid


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    from quixstreams import Application

    bootstrap, topic, records, lookup_ms, state_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    app = Application(
        broker_address=bootstrap,
        consumer_group=f"quix-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        state_dir=state_dir,
        use_changelog_topics=True,
        # kept for comparable runs, though it does not stop the idle spin: it postpones fetches only while librdkafka's
        # queue is full, and the embedded broker answers an empty fetch at once, ignoring fetch.wait.max.ms, so a
        # consumer at its partitions' end fetches again at once (bench/fetch_wait_bench.py, docs/comparison.md)
        consumer_extra_config={"fetch.queue.backoff.ms": 100},
    )
    first: list[float] = []

    def valid(order: dict) -> bool:
        if not first:
            first.extend((time.perf_counter(), cpu_s()))
        if not isinstance(order, dict) or "key" not in order:
            raise ValueError(f"order without a key field: {order!r}")
        return True

    def running_totals(order: dict, state) -> dict:
        totals = state.get("totals") or {"total": 0, "count": 0}
        totals = {"total": round(totals["total"] + order["amount"], 2), "count": totals["count"] + 1}
        state.set("totals", totals)
        return {**order, **totals}

    def lookup(order: dict) -> dict:
        if lookup_ms:
            time.sleep(lookup_ms / 1000)  # a remote call, one at a time per partition
        return {**order, "tier": "gold" if sum(order["key"].encode()) % 5 == 0 else "standard"}

    sdf = app.dataframe(app.topic(topic, key_deserializer="str", value_deserializer="json"))
    sdf = sdf.filter(valid).apply(running_totals, stateful=True).apply(lookup)
    sdf.to_topic(app.topic(f"{topic}-quix-out", key_serializer="str", value_serializer="json"))
    app.run(count=records, collect=False)
    wall, cpu = time.perf_counter() - first[0], cpu_s() - first[1]
    print(json.dumps({"records": records, "wall_s": wall, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    main()
