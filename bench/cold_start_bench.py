"""Cold-start benchmark: a job's first batch on a Spark Connect server that has just started, with and without
the server's warm-up (elasticity.local.warmup), beside a warm batch, measured side by side in one run.

  (a) a job's first batch after its server (local[2]) started again on its address, without warm-up
  (b) the same with the warm-up (started as `elasticity spark start` starts it, the job's config among those
      whose sessions it readies), the batch started once the warm-up is done
  (c) a warm batch: the median of the job's next batches on server (b)

Each job ran a batch on the server before it was stopped (its stores are in the blob store): the first batch
after the restart restores them, as a job's would after a deploy or a driver restart.

The job is the stateful demo job as cpu_bench.py runs it (enrichment:build_stateful, RocksDB backed up to the blob
store, 3,000-record batches, factor 2, 2 containers, the lookup at 0 ms), its driver this process (a Connect
client, as `elasticity run-batch` is), its modules imported before either server starts (the driver's own
imports are not the server's cold start). Server (b) runs first, so that (a) has the warmer page cache.

usage: .venv/bin/python bench/cold_start_bench.py [--warm-batches 5]
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
from elasticity.config import load_config  # noqa: E402
from elasticity.config.services import port_open  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402
from elasticity.spark.engine import MicroBatchEngine  # noqa: E402
from elasticity.spark.session import session  # noqa: E402
from elasticity.spark.target import SparkTarget  # noqa: E402

PARTITIONS = 4
USERS = 3000
BATCH = 3000


def job_file(home: Path, topic: str) -> Path:
    name = f"cold-{uuid.uuid4().hex[:6]}"
    props = {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "2",
        "job.container.thread.pool.size": "64",
        "app.class": "elasticity.apps.enrichment:build_stateful",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "batch.max.records": str(BATCH),
        "stores.totals.backup.factories": "blobstore",
        "task.checkpoint.store.url": f"sqlite:///{home}/{name}.db",
        "job.output.path": f"{home}/{name}/out",
        "job.audit.path": f"{home}/{name}/audit",
        "job.dead.letter.path": f"{home}/{name}/dlq",
        "task.checkpoint.read.versions": "2,1",
    }
    path = home / f"{name}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def batches(remote: str, path: Path, count: int) -> list[tuple[float, dict[str, float]]]:
    """`count` batches of the job, each a run of its own through a new engine (as `elasticity run-batch` runs
    one: its lease, its job model, its sinks' check), on the job's session: each one's wall time and durations."""
    config = load_config(path)
    spark = session(config, target=SparkTarget("connect", remote, "bench"))
    out = []
    try:
        for _ in range(count):
            t = time.perf_counter()
            (summary,) = MicroBatchEngine(config, spark).run(max_records=BATCH)
            assert summary.processed == BATCH, summary.processed
            out.append((time.perf_counter() - t, summary.durations_ms))
    finally:
        spark.stop()  # the next server's session is a new object, on the same address
    return out


def run(home: Path, bootstrap: str, *, warm_up: bool, warm_batches: int) -> dict[str, float]:
    """A job that ran a batch on a server, the server started again on its address (as the supervisor does),
    with or without warm-up, and the job's next batches: the first one's and the warm ones' wall time."""
    topic = f"cold-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    send(bootstrap, topic, demo_records(BATCH * (2 + warm_batches), keys=USERS, seed=1, null_key_every=0, hot_key_share=0))
    path = job_file(home, topic)
    server = SparkConnectServer(home / f"spark-{'warm' if warm_up else 'cold'}")
    state = server.start(port=free_port(), master="local[2]", env={"DEMO_LOOKUP_MS": "0"})
    try:
        batches(state.remote, path, 1)  # the job exists, its state in the blob store
    finally:
        server.stop()
    deadline = time.monotonic() + 60
    while port_open(state.port) and time.monotonic() < deadline:  # the stopped JVM's sockets closing
        time.sleep(0.2)
    t = time.perf_counter()
    state = server.start(port=state.port, master="local[2]", env={"DEMO_LOOKUP_MS": "0"}, warm_up=[path] if warm_up else None)
    out = {"port_s": time.perf_counter() - t}
    try:
        if warm_up:
            w = server.wait_warm(600)
            assert w is not None and w.state == "warm", f"warm-up: {w}"
            out["warm_up_s"] = time.perf_counter() - t - out["port_s"]
        ran = batches(state.remote, path, 1 + warm_batches)
    finally:
        server.stop()
    times = [w for w, _ in ran]
    out["first_s"], out["warm_s"] = times[0], statistics.median(times[1:])
    label = "with warm-up" if warm_up else "no warm-up"
    print(f"  {label}: batches after the restart (s): {', '.join(f'{x:.2f}' for x in times)}", flush=True)
    keys = ("plan", "spark", "read", "process", "commit", "total")
    for name, (_, d) in (("first", ran[0]), ("second", ran[1])):
        print(f"  {label}: {name} batch, ms: {json.dumps({k: d.get(k) for k in keys})}", flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warm-batches", type=int, default=5, help="batches after the first; their median is the warm batch")
    args = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="elasticity-cold-bench-"))
    os.environ["ELASTICITY_HOME"] = str(home)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    broker = EmbeddedBroker(home)
    bootstrap = broker.start(port=free_port()).bootstrap
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    try:
        b = run(home, bootstrap, warm_up=True, warm_batches=args.warm_batches)
        a = run(home, bootstrap, warm_up=False, warm_batches=args.warm_batches)
    finally:
        broker.stop()
    warm = b["warm_s"]
    rows = [
        ("(a) first batch after a restart, no warm-up", f"{a['first_s']:.2f} s", f"{a['first_s'] / warm:.1f}x the warm batch"),
        ("(b) first batch after a restart, warmed up", f"{b['first_s']:.2f} s", f"{b['first_s'] / warm:.1f}x the warm batch"),
        ("(c) warm batch (median of the next ones on (b))", f"{warm:.2f} s", f"on (a): {a['warm_s']:.2f} s"),
        ("server restart (port open), (b) / (a)", f"{b['port_s']:.1f} s / {a['port_s']:.1f} s", "what `spark start` waits"),
        ("warm-up (background, after the port opened)", f"{b['warm_up_s']:.1f} s", "the batch of (b) started after it"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure'.ljust(width)} | figure          | notes")
    for name, figure, note in rows:
        print(f"{name.ljust(width)} | {figure:<15} | {note}")
    return 0


if __name__ == "__main__":
    import results

    sys.exit(results.run("cold_start", main, "cold_start_bench.py"))
